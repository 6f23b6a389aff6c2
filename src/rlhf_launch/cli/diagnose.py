"""`rlhf-launch diagnose [RUN | --log FILE]`: why an attempt failed or stalled, from its
driver log and, on a live cluster, Ray's job info and state (dead actors, pending groups)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    log: str | None = typer.Option(None, "--log", help="diagnose a driver log file instead of a run"),
    attempt: int | None = typer.Option(None, "--attempt", min=1, help="which attempt (default: the latest)"),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Classify why a run's attempt failed or stalled (failure class, retriable, phase, step, evidence, hint)."""
    from rlhf_launch import diagnose
    from rlhf_launch.cli import report
    from rlhf_launch.errors import UserError
    from rlhf_launch.runs import evidence, remote
    from rlhf_launch.runs.history import past_failures
    from rlhf_launch.runs.status import AttemptStatus

    data: dict[str, Any]
    if log is not None:
        path = Path(log)
        if not path.is_file():
            raise UserError(f"log file {path} not found", hint="pass the driver log, e.g. from `ray job logs JOB > job.log`")
        data = {"log": str(path), **diagnose.diagnose_file(path).as_json()}
    else:
        record, cluster = options.run_and_cluster(run, address, token_file)
        record = remote.refresh(record, cluster.jobs)
        chosen = next((a for a in record.attempts if a.number == attempt), None) if attempt else record.current
        if chosen is None:
            raise UserError(f"run {record.run_id} has no attempt {attempt}", hint=f"it has {len(record.attempts)}")
        data = {"run_id": record.run_id, "attempt": chosen.number, "job_id": chosen.job_id, "job_status": str(chosen.status)}
        if chosen.status is AttemptStatus.SUCCEEDED:  # nothing failed: what the run came through
            data["history"] = [past.as_json() for past in past_failures(record) if past.attempt < chosen.number]
        elif (chosen.diagnosis or {}).get("stall"):  # the supervisor diagnosed the stall when it saw it
            data.update(chosen.diagnosis or {})
        elif chosen.status.is_live():  # nothing failed (yet): no class to give it
            from rlhf_launch.runs.overview import row

            data["running"] = True
            if chosen is record.current:
                data["progress"] = report.progress_text(row(record, True))
        else:
            found = evidence.gather(cluster.jobs, cluster.dashboard, chosen.job_id)
            data.update(found.diagnosis().as_json())
            if found.missing:
                data["note"] = found.missing
    output.echo_json(data) if as_json else output.echo(report.diagnose_text(data))
