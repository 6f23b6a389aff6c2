"""`rlhf-launch diagnose [RUN | --log FILE]`: why an attempt failed or stalled, from its
driver log and, on a live cluster, Ray's job info and state (dead actors, pending groups)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    log: str | None = typer.Option(
        None, "--log", help="diagnose a driver log file instead of a run (or a directory holding one job-driver-*.log)"
    ),
    attempt: int | None = options.ATTEMPT,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Classify why a run's attempt failed or stalled (failure class, retriable, phase, step, evidence, hint)."""
    from rlhf_launch.cli import report
    from rlhf_launch.runs import evidence, logfile, logs, remote
    from rlhf_launch.runs.history import past_failures, verdict
    from rlhf_launch.runs.status import AttemptStatus

    data: dict[str, Any]
    if log is not None:
        path = driver_log(Path(log))
        diagnosis = logfile.diagnose_file(path)
        data = {"log": str(path), **diagnosis.as_json(), "auto_resume": auto_resume_verdict(diagnosis)}
    else:
        record, cluster = options.run_and_cluster(run, address, token_file)
        record = remote.refresh(record, cluster.jobs)
        chosen = logs.attempt_of(record, attempt)
        data = {"run_id": record.run_id, "attempt": chosen.number, "job_id": chosen.job_id, "job_status": str(chosen.status)}
        if chosen.status is AttemptStatus.SUCCEEDED:  # nothing failed: what the run came through
            data["history"] = [past.as_json() for past in past_failures(record) if past.attempt < chosen.number]
        elif chosen.status is AttemptStatus.STOPPED and record.stopped_by_user and chosen is record.current:
            data["stopped"] = True  # `rlhf-launch stop` ended it: nothing failed, its log's last lines are no failure
            data["history"] = [past.as_json() for past in past_failures(record) if past.attempt < chosen.number]
        elif (chosen.diagnosis or {}).get("stall"):  # the supervisor diagnosed the stall when it saw it
            data.update(chosen.diagnosis or {})
            decided = verdict(record, chosen.number, data)
            if decided:  # a stalled attempt the supervisor ended: what auto-resume decided then
                data["auto_resume"] = decided
        elif chosen.status.is_live():  # nothing failed (yet): no class to give it
            from rlhf_launch.runs.overview import row

            data["running"] = True
            if chosen is record.current:
                data["progress"] = report.progress_text(row(record, True))
            data["history"] = [past.as_json() for past in past_failures(record) if past.attempt < chosen.number]
        else:
            found = evidence.gather(cluster.jobs, cluster.dashboard, chosen.job_id)
            data.update(found.diagnosis().as_json())
            # what the supervisor decides after this failure, from the run's history: on the diagnosis
            # it stored when it decided (it may have read less than is readable now), else this one
            decided = verdict(record, chosen.number, chosen.diagnosis or data)
            if decided:
                data["auto_resume"] = decided
            if found.missing:
                data["note"] = found.missing
    output.echo_json(data) if as_json else output.echo(report.diagnose_text(data))


def auto_resume_verdict(diagnosis: Any) -> dict[str, Any]:
    """What the supervisor would do with this failure as a run's first, with a resume left
    (`--auto-resume 1`, no --retry-on / --no-retry-on): the same function decides both
    (runs/retry.py `decide`), so `diagnose --log` and the supervisor cannot disagree."""
    from rlhf_launch.runs import retry

    decision = retry.decide([retry.Failure.of(diagnosis)], retry.Policy(auto_resume=1))
    return {"retry": isinstance(decision, retry.Retry), "reason": decision.reason}


DRIVER_LOGS = "job-driver-*.log"  # Ray's name for a job's driver log in a session's logs/ directory


def driver_log(path: Path) -> Path:
    """The file `diagnose --log` reads: the path itself, or a directory's one driver log
    (Ray's session logs/ directory of one job); else a UserError saying what it wants."""
    from rlhf_launch.errors import UserError

    wanted = "one driver log file, e.g. from `ray job logs JOB > job.log`, or Ray's job-driver-JOB.log"
    if path.is_dir():
        found = sorted(p for p in path.glob(DRIVER_LOGS) if p.is_file())
        if len(found) == 1:
            output.echo(f"reading {found[0]}, the driver log in {path}", err=True)
            return found[0]
        names = ", ".join(p.name for p in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        what = f"holds {len(found)} driver logs ({names}): pass one of them" if found else f"holds no driver log ({DRIVER_LOGS})"
        raise UserError(f"--log {path} is a directory, and it {what}", hint=f"--log wants {wanted}")
    if not path.exists():
        raise UserError(f"log file {path} not found", hint=f"--log wants {wanted}")
    if not path.is_file():
        raise UserError(f"--log {path} is not a regular file", hint=f"--log wants {wanted}")
    return path
