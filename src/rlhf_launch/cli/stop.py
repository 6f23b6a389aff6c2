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
    cluster_ended: str | None = typer.Option(
        None,
        "--cluster-ended",
        metavar="WHY",
        help="the run's cluster itself ended (its Slurm allocation, its pods): record the run and every live attempt "
        "STOPPED with WHY, without asking Ray",
    ),
) -> None:
    """Stop a run: its supervisor, every attempt, every process; a stopped run is not resumed."""
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import sweep
    from rlhf_launch.runs.stop import stop

    if cluster_ended is not None:
        _record_ended(run, cluster_ended, as_json)
        return

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


def _record_ended(run: str | None, why: str, as_json: bool) -> None:
    """`stop --cluster-ended WHY`: the record alone, as the end of the cluster left the run."""
    from rlhf_launch.errors import UserError
    from rlhf_launch.runs import lifecycle, lookup

    found = lookup.local(run)
    if isinstance(found, lookup.Unknown):
        raise UserError(found.text, hint=found.closest_text or None)
    record = lifecycle.mark_interrupted(found.run_id, why)
    attempts = [{"number": a.number, "status": str(a.status), "message": a.message} for a in record.attempts]
    if as_json:
        output.echo_json({"run_id": record.run_id, "status": str(record.status), "attempts": attempts})
        return
    ended = ", ".join(f"attempt {a['number']} {a['status']}" for a in attempts) or "no attempt"
    output.echo(f"{record.run_id}: recorded {record.status} ({why}); {ended}")
