"""`rlhf-launch stop [RUN]`: stop a run; it returns when the trainer is gone and its GPUs are
free, or exits 1 saying what is left. A stopped run is never resumed automatically."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    timeout: float = typer.Option(60.0, "--timeout", min=1, help="seconds to wait for the trainer and its GPUs to be gone"),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Stop a run: its supervisor, every attempt, every process; a stopped run is not resumed."""
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import sweep
    from rlhf_launch.runs.stop import stop

    record, cluster = options.run_and_cluster(run, address, token_file)
    if not as_json:
        output.echo(f"stopping {record.run_id} (waiting up to {timeout:g}s for its trainer and GPUs to be gone)", err=True)
    jobs = cluster.jobs
    end = time.monotonic() + timeout

    def sweeper(runs: Sequence[str], job_ids: Sequence[str]) -> list[dict[str, Any]]:
        return sweep.by_probe_job(jobs, runs, job_ids, settle=sweep.STOP_SETTLE, deadline=end - time.monotonic())

    done = stop(record, jobs, cluster.dashboard, sweeper, bound=timeout)
    output.echo_json(done.as_json()) if as_json else output.echo(report.stopped_text(done))
    if not done.gone:
        output.exit_with(output.FAILED)
