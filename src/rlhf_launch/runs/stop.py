"""Stop a run: mark it stopped (so nothing resubmits it), stop its attempt, wait for the end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster.jobs import Jobs, JobStatus
from rlhf_launch.errors import JobNotFound
from rlhf_launch.runs import lifecycle
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Run

WAIT = 60.0


@dataclass(frozen=True)
class Stopped:
    run_id: str
    job_id: str | None
    job_status: str

    def as_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "job_id": self.job_id, "job_status": self.job_status, "status": "STOPPED"}


def stop(run: Run, jobs: Jobs, wait: float = WAIT) -> Stopped:
    run = lifecycle.mark_stopped(run.run_id)  # first, so a supervisor never resubmits past this point
    attempt = run.current
    if attempt is None:
        return Stopped(run.run_id, None, "NONE")
    status: str
    if jobs.stop(attempt.job_id):
        status = jobs.wait_terminal(attempt.job_id, wait)
    else:
        try:
            status = jobs.status(attempt.job_id)  # already over
        except JobNotFound:
            status = "LOST"
    lifecycle.observe(runs.load(run.run_id), jobs)
    return Stopped(run.run_id, attempt.job_id, status if not isinstance(status, JobStatus) else status.value)
