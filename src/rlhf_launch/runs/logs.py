"""A run's logs: the current attempt's, or followed live on into the attempts after it."""

from __future__ import annotations

from collections.abc import Iterator

from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterError, UserError
from rlhf_launch.runs import history, lifecycle, remote, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus
from rlhf_launch.util.poll import poll_until

NEXT_ATTEMPT_WAIT = 3600.0


def attempt_of(run: Run, number: int | None) -> Attempt:
    """Attempt `number` of the run (None: its current one); a UserError saying which it has."""
    if not run.attempts:
        raise UserError(f"run {run.run_id} has no attempts")
    if number is None:
        chosen = run.current
    else:
        chosen = next((a for a in run.attempts if a.number == number), None)
    if chosen is None:
        numbers = ", ".join(str(a.number) for a in run.attempts)
        raise UserError(f"run {run.run_id} has no attempt {number}", hint=f"its attempts: {numbers} (--attempt N)")
    return chosen


def current(run: Run, jobs: Jobs, number: int | None = None) -> str:
    """The logs of the run's current attempt (or of attempt `number`)."""
    return jobs.logs(attempt_of(run, number).job_id)


def follow(run: Run, jobs: Jobs, number: int | None = None) -> Iterator[str]:
    """Stream the current attempt (or attempt `number`) until it ends, then the next one
    while a supervisor runs."""
    attempt = attempt_of(run, number)
    while True:
        yield f"--- {run.run_id} attempt {attempt.number} ({attempt.job_id})\n"
        yield from jobs.follow(attempt.job_id)
        nxt = _next_attempt(run.run_id, attempt.number, jobs)
        run = remote.refresh(runs.load(run.run_id), jobs)
        if nxt is None:
            yield f"--- {run.run_id}: {run.status}{_why(run)}\n"
            return
        attempt = nxt


def _why(run: Run) -> str:
    """What follows a run's final status: its current attempt's failure, or its history."""
    current = run.current
    if run.diagnosis and current is not None and current.status.is_failure():
        return f" ({run.diagnosis.get('class')}: {run.diagnosis.get('hint', '')})"
    past = history.history_text(run)
    return f" ({past})" if past else ""


def _next_attempt(run_id: str, after: int, jobs: Jobs, wait: float = NEXT_ATTEMPT_WAIT) -> Attempt | None:
    """The attempt after `after` once Ray has it, or None when no more will come."""

    def check() -> tuple[Attempt | None] | None:
        try:
            run = lifecycle.observe(runs.load(run_id), jobs)
            supervised = supervisor.live_supervisor(run, jobs) is not None
        except ClusterError:
            return None  # unknown: keep waiting
        attempt = run.current
        if attempt and attempt.number > after and attempt.status is not AttemptStatus.SUBMITTING:
            return (attempt,)
        if run.final or not supervised:
            return (None,)
        return None  # the supervisor may still submit one

    found = poll_until(check, wait, 1.0)
    return found[0] if found else None
