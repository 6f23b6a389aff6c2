"""A run's past: the failures its earlier attempts survived, told as history ("resumed after
nccl_timeout at step 5"), never as the run's outcome. Pure: a record in, values out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.runs.record import Run
from rlhf_launch.runs.status import AttemptStatus

__all__ = ["PastFailure", "past_failures", "history_text"]


@dataclass(frozen=True)
class PastFailure:
    attempt: int
    status: str
    failure_class: str
    step: int | None  # the step it reached (None: before the first step, or unknown)

    def text(self) -> str:
        return self.failure_class + (f" at step {self.step}" if self.step is not None else " before its first step")

    def as_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "status": self.status, "class": self.failure_class, "step": self.step}


def past_failures(run: Run) -> list[PastFailure]:
    """The failed attempts a later attempt followed, oldest first (an attempt stopped because
    it could never be placed is not a failure of the run: it is left out)."""
    out = []
    for attempt in run.attempts[:-1]:
        if not attempt.status.is_failure() or attempt.status is AttemptStatus.SUPERSEDED:
            continue
        found = attempt.diagnosis or {}
        step = found.get("step")
        out.append(
            PastFailure(attempt.number, str(attempt.status), str(found.get("class") or "unknown"), step if isinstance(step, int) else None)
        )
    return out


def history_text(run: Run) -> str:
    """`resumed after nccl_timeout at step 5, node_lost at step 12` ("" when no attempt failed)."""
    failures = past_failures(run)
    return "resumed after " + ", ".join(f.text() for f in failures) if failures else ""
