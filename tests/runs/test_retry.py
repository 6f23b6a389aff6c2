"""The auto-resume policy: one test per rule, in the order decide() applies them."""

from __future__ import annotations

import pytest

from rlhf_launch.diagnose import Diagnosis, FailureClass
from rlhf_launch.runs.progress import Milestone, Stall
from rlhf_launch.runs.retry import STALL, Failure, Policy, Retry, Stop, decide, known_classes, parse_classes


def diag(cls: str, retriable: bool, step: int | None) -> Diagnosis:
    return Diagnosis(FailureClass(cls), retriable, None, step, [], "")


def stalled(step: int | None) -> Stall:
    return Stall(Milestone.STEP, 0.0, 5000.0, 2000.0, step)


def test_parse_classes():
    assert parse_classes("gpu_oom, nccl,") == {"gpu_oom", "nccl"}
    assert parse_classes(" STALL ") == {STALL}
    assert parse_classes("") == frozenset() and parse_classes(None) == frozenset()
    assert parse_classes(["node_lost"]) == {FailureClass.NODE_LOST}
    with pytest.raises(ValueError, match=r"unknown failure classes 'oom', 'ncc' \(known: config, import,.*, unknown, stall\)"):
        parse_classes("oom,nccl,ncc")
    assert set(known_classes()) == {c.value for c in FailureClass} | {STALL}


def test_policy_validates_its_overrides():
    with pytest.raises(ValueError, match="both"):
        Policy.parse(3, "nccl", "nccl,gpu_oom")
    with pytest.raises(ValueError, match="unknown"):
        Policy(3, frozenset({"bogus"}))
    with pytest.raises(ValueError, match=">= 0"):
        Policy(-1)


def test_no_retry_on_stops_even_a_retriable_class():
    decision = decide([diag("nccl", True, 5)], Policy.parse(3, no_retry_on="nccl"))
    assert decision == Stop("nccl is in --no-retry-on", "FAILED")


def test_a_class_the_policy_does_not_retry_stops_failed():
    decision = decide([diag("gpu_oom", False, 12)], Policy(3))
    assert isinstance(decision, Stop) and decision.status == "FAILED" and "gpu_oom is not retriable" in decision.reason


def test_retry_on_forces_a_non_retriable_class():
    decision = decide([diag("gpu_oom", False, 12)], Policy.parse(3, retry_on="gpu_oom"))
    assert isinstance(decision, Retry) and "forced by --retry-on" in decision.reason


def test_same_class_at_the_same_step_twice_stops():
    failures = [diag("node_lost", True, 40), diag("node_lost", True, 40)]
    decision = decide(failures, Policy(5))
    assert isinstance(decision, Stop) and decision.status == "FAILED" and "twice in a row at step 40" in decision.reason
    # before any step, twice, counts as the same step
    decision = decide([diag("host_oom", True, None), diag("host_oom", True, None)], Policy(5))
    assert isinstance(decision, Stop) and "before the first step" in decision.reason
    # --retry-on lifts it
    assert isinstance(decide(failures, Policy.parse(5, retry_on="node_lost")), Retry)


def test_an_unknown_cause_twice_is_not_called_a_repeat():
    """Undiagnosed (the log could not be read, nothing matched): not known to repeat, so it
    spends the budget instead of ending the run FAILED."""
    failures = [Failure("unknown", True, None), Failure("unknown", True, None)]
    assert isinstance(decide(failures, Policy(5)), Retry)
    decision = decide([*failures, Failure("unknown", True, None)], Policy(2))
    assert isinstance(decision, Stop) and decision.status == "GAVE_UP"


def test_same_class_at_another_step_or_another_class_retries():
    assert isinstance(decide([diag("nccl", True, 40), diag("nccl", True, 41)], Policy(5)), Retry)
    assert isinstance(decide([diag("nccl", True, 40), diag("node_lost", True, 40)], Policy(5)), Retry)
    assert isinstance(decide([diag("nccl", True, 40), diag("node_lost", True, 40), diag("nccl", True, 40)], Policy(5)), Retry)


def test_retries_used_up_gives_up():
    failures = [diag("nccl", True, 1), diag("nccl", True, 2), diag("nccl", True, 3)]
    assert decide(failures, Policy(2)) == Stop("2 automatic resumes used of 2", "GAVE_UP")
    assert isinstance(decide(failures, Policy(3)), Retry)
    assert decide([diag("nccl", True, 1)], Policy(0)).status == "GAVE_UP"


def test_a_non_retriable_failure_reads_failed_even_with_no_retries_left():
    assert decide([diag("nccl", True, 1), diag("config", False, None)], Policy(1)).status == "FAILED"


def test_a_stall_is_a_retriable_class_of_its_own():
    decision = decide([stalled(7)], Policy(2))
    assert decision == Retry("stall at step 7 is retriable: resume 1 of 2")
    assert decide([stalled(7)], Policy.parse(2, no_retry_on="stall")).status == "FAILED"
    assert decide([stalled(7), stalled(7)], Policy(5)).status == "FAILED"  # stuck at the same step again
    assert isinstance(decide([stalled(7), diag("nccl", True, 7)], Policy(5)), Retry)


def test_failure_records_and_empty_input():
    assert Failure.of(diag("vllm", True, 3)) == Failure("vllm", True, 3)
    assert isinstance(decide([Failure("weight_sync", True, 9)], Policy(1)), Retry)
    with pytest.raises(ValueError):
        decide([], Policy(1))


def test_an_unknown_failure_after_progress_is_retried_once():
    """The diagnosis could not say why (not retriable by its own reading), but the attempt
    got further than before: one retry; a second unknown in a row stops."""
    first = decide([diag("unknown", False, 12)], Policy(3))  # a fresh run that reached step 12
    assert isinstance(first, Retry) and "after progress" in first.reason
    again = decide([diag("unknown", False, 12), diag("unknown", False, 30)], Policy(3))
    assert isinstance(again, Stop) and again.status == "FAILED" and "--retry-on unknown" in again.reason
    # another class in between starts a new streak
    assert isinstance(decide([diag("unknown", False, 12), diag("nccl", True, 20), diag("unknown", False, 30)], Policy(5)), Retry)
    # the knob: two in a row allowed, or none
    assert isinstance(decide([diag("unknown", False, 12), diag("unknown", False, 30)], Policy(3, unknown_retries=2)), Retry)
    assert isinstance(decide([diag("unknown", False, 12)], Policy(3, unknown_retries=0)), Stop)
    with pytest.raises(ValueError, match="unknown_retries"):
        Policy(3, unknown_retries=-1)


def test_an_unknown_failure_without_progress_is_not_retried():
    for failures in (
        [diag("unknown", False, None)],  # before the first step
        [diag("nccl", True, 40), diag("unknown", False, 40)],  # no step beyond the previous failure
        [Failure("unknown", False, 25, resumed_from=25)],  # no step beyond the resume step
        [Failure("nccl", True, 20), Failure("unknown", False, 24, resumed_from=25)],
    ):
        decision = decide(failures, Policy(5))
        assert isinstance(decision, Stop) and decision.status == "FAILED", failures
        assert "same way" not in decision.reason and "would fail" not in decision.reason
    # one step beyond either is progress
    assert isinstance(decide([Failure("unknown", False, 26, resumed_from=25)], Policy(5)), Retry)
    assert isinstance(decide([diag("nccl", True, 40), diag("unknown", False, 41)], Policy(5)), Retry)
    # --retry-on unknown overrides; --no-retry-on unknown stops even after progress
    assert isinstance(decide([diag("unknown", False, None)], Policy.parse(5, retry_on="unknown")), Retry)
    assert decide([diag("unknown", False, 9)], Policy.parse(5, no_retry_on="unknown")).status == "FAILED"


def test_an_unknown_failure_spends_the_budget_like_any_other():
    assert decide([diag("nccl", True, 3), diag("unknown", False, 9)], Policy(1)) == Stop("1 automatic resume used of 1", "GAVE_UP")
