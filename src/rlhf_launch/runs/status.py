"""Typed statuses: a Ray job's, an attempt's and a run's, and the one mapping between them.

    Ray job      PENDING RUNNING                SUCCEEDED FAILED STOPPED
    attempt      PENDING RUNNING SUBMITTING     SUCCEEDED FAILED STOPPED  SUBMIT_FAILED SUPERSEDED LOST
    run          PENDING RUNNING SUBMITTING     SUCCEEDED FAILED STOPPED  WAITING GAVE_UP LOST

- A job's status becomes its attempt's status unchanged (`AttemptStatus.of_job`).
- An attempt is SUBMITTING from the moment it is recorded until Ray accepted it,
  SUBMIT_FAILED if Ray refused it, SUPERSEDED when the supervisor stopped it because it could
  never be placed, and LOST only when the cluster answered that it has no such job (the
  cluster was restarted). A timeout or an unreachable cluster never changes an attempt's status.
- A run follows its current attempt (`RunStatus.of_attempt`), except that a user's stop makes
  it STOPPED, a failure the supervisor will retry makes it WAITING, and a supervisor that
  stopped retrying makes it GAVE_UP (retries used up) or FAILED (a failure no retry fixes).
"""

from __future__ import annotations

from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.util.enums import StrEnum

__all__ = ["AttemptStatus", "JobStatus", "RunStatus"]


class AttemptStatus(StrEnum):
    SUBMITTING = "SUBMITTING"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    SUBMIT_FAILED = "SUBMIT_FAILED"
    SUPERSEDED = "SUPERSEDED"
    LOST = "LOST"

    @classmethod
    def of_job(cls, status: JobStatus) -> AttemptStatus:
        return cls(status.value)

    def is_terminal(self) -> bool:
        return not self.is_live()

    def is_live(self) -> bool:
        """The trainer may be running or about to run."""
        return self in (AttemptStatus.SUBMITTING, AttemptStatus.PENDING, AttemptStatus.RUNNING)

    def is_failure(self) -> bool:
        """Ended without success and without a stop: what auto-resume acts on."""
        return self in (AttemptStatus.FAILED, AttemptStatus.LOST, AttemptStatus.SUBMIT_FAILED, AttemptStatus.SUPERSEDED)


class RunStatus(StrEnum):
    SUBMITTING = "SUBMITTING"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    WAITING = "WAITING"  # between attempts: the supervisor will submit the next one
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    GAVE_UP = "GAVE_UP"
    LOST = "LOST"

    @classmethod
    def of_attempt(cls, status: AttemptStatus, *, stopped_by_user: bool = False) -> RunStatus:
        if stopped_by_user and status.is_terminal():
            return cls.STOPPED
        if status in (AttemptStatus.SUBMIT_FAILED,):
            return cls.FAILED
        if status is AttemptStatus.SUPERSEDED:
            return cls.WAITING
        return cls(status.value)

    def is_final(self) -> bool:
        """Nothing will happen to the run unless a user resumes it."""
        return self in (RunStatus.SUCCEEDED, RunStatus.STOPPED, RunStatus.GAVE_UP)

    def is_live(self) -> bool:
        return self in (RunStatus.SUBMITTING, RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING)
