"""Auto-resume that learns: whether to resubmit after a failed (or stalled) attempt. Pure.

The failures so far (each a `Diagnosis` or a `Stall`, oldest first, only those that count
against `--auto-resume N`: an attempt the supervisor superseded at placement does not), the
budget and the overrides give `Retry` or `Stop`, checked in this order:

1. a class in `--no-retry-on` stops (FAILED);
2. a class the policy does not retry stops (FAILED), unless it is in `--retry-on`;
   a stall (`stall`: a milestone late past its deadline) is retried by default;
   an `unknown` failure the diagnosis did not find retriable is retried once (the
   `unknown_retries` knob) when the attempt made progress: at least one step beyond the
   previous failure's step and the step it resumed from; before the first step, or with no
   step gained, it stops (FAILED: the cause is unknown, so nothing says a retry would help
   or that it would fail again);
3. the last two failures of the same class at the same step stop (FAILED): it will
   repeat; "no step yet" twice counts as the same step; `--retry-on CLASS` lifts this too;
4. the retries used up stop (GAVE_UP): `N` failures after the first;
5. otherwise: retry.

Class names are the diagnose classes (README, rlhf-launch diagnose) plus `stall`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rlhf_launch.diagnose import Diagnosis, FailureClass
from rlhf_launch.runs.progress import Stall

__all__ = ["STALL", "Failure", "Policy", "Retry", "Stop", "decide", "known_classes", "parse_classes"]

STALL = "stall"
UNKNOWN = FailureClass.UNKNOWN.value


def known_classes() -> tuple[str, ...]:
    return (*(c.value for c in FailureClass), STALL)


def parse_classes(text: str | Iterable[str] | None) -> frozenset[str]:
    """`"gpu_oom, nccl"` (or a list of names) -> {"gpu_oom", "nccl"}; ValueError naming
    every unknown class and listing the known ones."""
    if text is None:
        return frozenset()
    parts = text.split(",") if isinstance(text, str) else list(text)
    names = [str(p).strip().lower() for p in parts if str(p).strip()]
    known = known_classes()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown failure class{'es' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (known: {', '.join(known)})"
        )
    return frozenset(names)


@dataclass(frozen=True)
class Failure:
    """One counted failure: its class (a FailureClass value or `stall`), whether the
    diagnosis found it retriable, the last global step seen, and the step the attempt
    resumed from (when known)."""

    kind: str
    retriable: bool
    step: int | None
    resumed_from: int | None = None

    @classmethod
    def of(cls, failure: Failure | Diagnosis | Stall) -> Failure:
        if isinstance(failure, Failure):
            return failure
        if isinstance(failure, Diagnosis):
            return cls(str(failure.cls), failure.retriable, failure.step)
        return cls(STALL, True, failure.step)


@dataclass(frozen=True)
class Policy:
    auto_resume: int
    retry_on: frozenset[str] = frozenset()
    no_retry_on: frozenset[str] = frozenset()
    unknown_retries: int = 1  # retries in a row of an unknown failure that came after progress

    def __post_init__(self) -> None:
        if self.auto_resume < 0:
            raise ValueError(f"auto_resume must be >= 0, got {self.auto_resume}")
        if self.unknown_retries < 0:
            raise ValueError(f"unknown_retries must be >= 0, got {self.unknown_retries}")
        parse_classes(self.retry_on | self.no_retry_on)  # names must be known
        both = self.retry_on & self.no_retry_on
        if both:
            raise ValueError(f"{', '.join(sorted(both))} cannot be in both --retry-on and --no-retry-on")

    @classmethod
    def parse(cls, auto_resume: int, retry_on: str | Iterable[str] | None = None, no_retry_on: str | Iterable[str] | None = None) -> Policy:
        return cls(auto_resume, parse_classes(retry_on), parse_classes(no_retry_on))


@dataclass(frozen=True)
class Retry:
    reason: str


@dataclass(frozen=True)
class Stop:
    reason: str
    status: Literal["FAILED", "GAVE_UP"]  # the run's final status (runs/status.py RunStatus)


def _at(step: int | None) -> str:
    return f"at step {step}" if step is not None else "before the first step"


def _baseline(seen: Sequence[Failure]) -> int | None:
    """The step the last attempt had to pass to count as progress: the previous failure's
    step and the step it resumed from, the later of those known."""
    known = [s for s in (seen[-2].step if len(seen) >= 2 else None, seen[-1].resumed_from) if s is not None]
    return max(known) if known else None


def _unknown_after_progress(seen: Sequence[Failure], policy: Policy) -> Stop | None:
    """An unknown failure the diagnosis did not find retriable: None (go on to retry) when
    the attempt made progress and the unknown retries in a row are not used up."""
    last, base = seen[-1], _baseline(seen)
    if last.step is None or (base is not None and last.step <= base):
        since = f"beyond step {base}" if base is not None else "yet"
        return Stop(
            f"unknown failure {_at(last.step)}, no step gained {since}: not retried by default; --retry-on unknown overrides",
            "FAILED",
        )
    streak = 0
    for earlier in reversed(seen[:-1]):
        if earlier.kind != UNKNOWN or earlier.retriable:
            break
        streak += 1
    if streak >= policy.unknown_retries:
        return Stop(
            f"unknown failure {_at(last.step)} again after {streak} retr{'ies' if streak != 1 else 'y'} of an unknown failure: "
            "not retried again; --retry-on unknown overrides",
            "FAILED",
        )
    return None


def decide(failures: Sequence[Failure | Diagnosis | Stall], policy: Policy) -> Retry | Stop:
    """Retry or stop after the last of `failures` (oldest first, at least one)."""
    if not failures:
        raise ValueError("decide() needs at least one failure")
    seen = [Failure.of(f) for f in failures]
    last = seen[-1]
    if last.kind in policy.no_retry_on:
        return Stop(f"{last.kind} is in --no-retry-on", "FAILED")
    forced = last.kind in policy.retry_on
    progressed = False
    if not last.retriable and not forced:
        if last.kind != UNKNOWN:
            return Stop(f"{last.kind} is not retriable (resubmitting would fail the same way); --retry-on {last.kind} overrides", "FAILED")
        stop = _unknown_after_progress(seen, policy)
        if stop is not None:
            return stop
        progressed = True
    if len(seen) >= 2 and not forced and last.kind != UNKNOWN:  # an unknown cause is not known to repeat
        previous = seen[-2]
        if previous.kind == last.kind and previous.step == last.step:
            return Stop(f"{last.kind} twice in a row {_at(last.step)}: it will repeat; --retry-on {last.kind} overrides", "FAILED")
    used = len(seen) - 1
    if used >= policy.auto_resume:
        return Stop(f"{used} automatic resume{'s' if used != 1 else ''} used of {policy.auto_resume}", "GAVE_UP")
    why = "forced by --retry-on" if forced and not last.retriable else "retriable"
    if progressed:
        base = _baseline(seen)
        why = f"retried once: the attempt made progress (past step {base})" if base is not None else "retried once: it came after progress"
    return Retry(f"{last.kind} {_at(last.step)} is {why}: resume {used + 1} of {policy.auto_resume}")
