"""A run's past: the failures its earlier attempts survived, told as history ("resumed after
nccl_timeout at step 5"), never as the run's outcome. Pure: a record in, values out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlhf_launch.runs import retry
from rlhf_launch.runs.record import Run
from rlhf_launch.runs.status import AttemptStatus

__all__ = ["PastFailure", "counted_failures", "past_failures", "history_text", "verdict"]


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


def counted_failures(run: Run, upto: int | None = None, fresh: Mapping[str, Any] | None = None) -> list[retry.Failure]:
    """The failures auto-resume counts, oldest first: those since the user last (re)submitted
    the run, up to attempt number `upto` (every attempt when None), with `fresh` as the
    diagnosis of attempt `upto` when given (one just made, not yet recorded). The supervisor
    decides on these; `diagnose RUN` shows the same decision."""
    attempts = [a for a in run.attempts if upto is None or a.number <= upto]
    since = max((i for i, a in enumerate(attempts) if a.reason in ("submit", "resume")), default=0)
    out = []
    for a in attempts[since:]:
        if a.status.is_failure() and a.status is not AttemptStatus.SUPERSEDED:
            d = fresh if fresh is not None and a.number == upto else (a.diagnosis or {})
            step = d.get("step")
            out.append(
                retry.Failure(
                    str(d.get("class", "unknown")),
                    bool(d.get("retriable", True)),
                    step if isinstance(step, int) else None,
                    a.resumed_from_step,
                )
            )
    return out


def verdict(run: Run, upto: int, fresh: Mapping[str, Any]) -> dict[str, Any]:
    """What the supervisor decides (decided) after attempt `upto` failed with `fresh`: its
    `retry` and `reason`, under the run's own auto-resume policy; a run without auto-resume is
    asked as if it had one resume left per failure counted (`hypothetical`: true)."""
    chosen = next((a for a in run.attempts if a.number == upto), None)
    if chosen is None or not chosen.status.is_failure() or chosen.status is AttemptStatus.SUPERSEDED:
        return {}  # nothing auto-resume counts: a stop, a success, a layout change
    failures = counted_failures(run, upto, fresh)
    hypothetical = run.auto_resume <= 0
    budget = len(failures) if hypothetical else run.auto_resume
    decision = retry.decide(failures, retry.Policy(budget, frozenset(run.retry_on), frozenset(run.no_retry_on)))
    reason = decision.reason + (" (the run has no auto-resume: --auto-resume N at submit or resume)" if hypothetical else "")
    return {"retry": isinstance(decision, retry.Retry), "reason": reason, "hypothetical": hypothetical}
