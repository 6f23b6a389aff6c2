"""The trainer's own phase timers (`timing/*`, OpenRLHF 0.9.6+) beside the plan's estimate:
parsed from the step lines, carried on the run record, shown by `runs`, `watch` and the
supervisor's state lines; the ETA from the estimate until a step's time is known. No Ray."""

from __future__ import annotations

import json

import pytest
from support.fakes import FakeJobs, running_run

from rlhf_launch.cli import report
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.overview import Overview, row
from rlhf_launch.runs.progress import Tracker, measured_phases, versus
from rlhf_launch.runs.supervisor import state_line

# OpenRLHF 0.11.0 trainer/ppo_trainer.py: train_step sets timing/make_experience, ppo_train and
# broadcast after the PPO status (:256-258), fit adds timing/generation and timing/step_total,
# their sum (:540-541), then logs the dict (:547). The same keys since 0.9.6 (:152-154, :340-347).
STEP = (
    "(PPOTrainer pid=4182) INFO 09-14 10:{minute:02d}:11 ppo_trainer.py:547] \u2728 Global step {n}: "
    "{{'policy_loss': 0.05, 'kl': 0.01, 'reward': 0.{n}, 'timing/make_experience': {exp}, "
    "'timing/ppo_train': {train}, 'timing/broadcast': 12.5, 'response_length': 812.0, "
    "'timing/generation': {gen}, 'timing/step_total': {total}}}"
)
ESTIMATE = {"step_s": 1280.0, "phases_s": {"generate": 137.0, "make_experience": 386.0, "train": 700.0, "weight_sync": 57.0}}


def step_line(n: int, gen: float = 120.0, exp: float = 380.0, train: float = 600.0) -> str:
    return STEP.format(minute=n, n=n, gen=gen, exp=exp, train=train, total=gen + exp + train + 12.5) + "\n"


def test_the_timers_are_read_by_phase_name():
    tracker = Tracker(total_steps=10)
    tracker.feed(step_line(1), 100.0)
    assert measured_phases(tracker.metrics) == {
        "generate": 120.0,
        "make_experience": 380.0,
        "train": 600.0,
        "weight_sync": 12.5,
        "step": 1112.5,
    }
    assert measured_phases({"policy_loss": 0.1, "reward": 0.3}) == {}  # before 0.9.6: no timers


def test_measured_is_the_median_of_the_recent_steps():
    tracker = Tracker(total_steps=10, window=3)
    for n, gen in ((1, 500.0), (2, 120.0), (3, 130.0), (4, 110.0)):
        tracker.feed(step_line(n, gen=gen), 100.0 * n)
    seen = tracker.measured()
    assert seen is not None and seen["steps"] == 3  # the window: steps 2-4
    assert seen["phases_s"]["generate"] == 120.0
    assert seen["step_s"] == pytest.approx(120.0 + 380 + 600 + 12.5)


def test_eta_from_the_estimate_until_a_step_is_done_then_from_the_measured_step():
    tracker = Tracker(total_steps=10, estimate=ESTIMATE)
    tracker.feed("(PPOTrainer pid=1) Episode [1/1]:   0%|          | 0/1280 [00:00<?, ?it/s]\n", 0.0)
    before = tracker.progress(0.0)
    assert before.eta_seconds == 10 * 1280 and before.eta_basis == "estimate"
    tracker.feed(step_line(1), 1100.0)  # one step: no pace between two steps yet, its timer says 1,112.5 s
    after = tracker.progress(1100.0)
    assert after.eta_basis == "measured"
    assert after.eta_seconds == round(9 * 1112.5)
    assert after.as_json()["estimated"] == ESTIMATE and after.as_json()["measured"]["steps"] == 1


def test_no_timers_and_one_step_is_no_eta_rather_than_the_estimate():
    tracker = Tracker(total_steps=10, estimate=ESTIMATE)
    tracker.feed("\u2728 Global step 1: {'policy_loss': 0.1, 'reward': 0.2}\n", 50.0)  # before 0.9.6
    assert tracker.progress(50.0).eta_seconds is None


def test_versus_and_its_text():
    tracker = Tracker(total_steps=10, estimate=ESTIMATE)
    tracker.feed(step_line(1, gen=120.0, exp=380.0, train=600.0), 10.0)
    data = tracker.progress(10.0).as_json()
    both = versus(data["measured"], data["estimated"])
    assert both is not None
    assert both["step_s"] == [1112.5, 1280.0]
    assert both["phases_s"]["generate"] == [120.0, 137.0]
    text = report.timing_text(both)
    assert text == (
        "step 1,112 s measured vs 1,280 s estimated (median of 1 step): generate 120/137, make_experience 380/386, "
        "train 600/700, weight_sync 12/57 s (measured/estimated)"
    )
    assert versus(None, ESTIMATE) is None and versus(data["measured"], None) is None


@pytest.fixture
def jobs():
    return FakeJobs()


def test_the_record_carries_the_plans_estimate_and_runs_compares(home, jobs):
    run = running_run(jobs)
    assert run.estimate is not None and set(run.estimate["phases_s"]) == {"generate", "make_experience", "train", "weight_sync"}
    tracker = Tracker(total_steps=run.total_steps, estimate=run.estimate)
    tracker.feed(step_line(1, gen=2.0, exp=1.0, train=3.0), 10.0)
    seen = tracker.progress(10.0).as_json()
    run = runs.update(run.run_id, lambda r: setattr(r, "progress", seen))
    shown = row(run, True)
    assert shown["timing"]["phases_s"]["generate"] == [2.0, run.estimate["phases_s"]["generate"]]
    text = report.runs_text(Overview([shown], []))
    assert f"{run.run_id}: step 18 s measured vs" in text and "generate 2.0/" in text
    assert "measured vs" not in report.run_line(run)  # watch's last line stays one line: its state lines said it


def test_a_record_of_an_older_supervisor_compares_with_the_records_estimate(home, jobs):
    run = running_run(jobs)
    tracker = Tracker(total_steps=run.total_steps)  # no estimate given: progress has none
    tracker.feed(step_line(1), 10.0)
    seen = tracker.progress(10.0).as_json()
    run = runs.update(run.run_id, lambda r: setattr(r, "progress", seen))
    assert seen["estimated"] is None and row(run, True)["timing"]["step_s"][1] == run.estimate["step_s"]


def test_watch_shows_the_comparison_once_per_change():
    tracker = Tracker(total_steps=10, estimate=ESTIMATE)
    tracker.feed(step_line(1), 10.0)
    state = {"status": "RUNNING", "attempt": 1, "attempt_status": "RUNNING", "progress": tracker.progress(10.0).as_json()}
    lines = list(report.supervisor_lines([state_line(state) + "\n", state_line(state) + "\n"]))
    timing = [line for line in lines if "measured vs" in line]
    assert len(timing) == 1 and "generate 120/137" in timing[0]
    assert json.dumps(state["progress"])  # the record's progress stays JSON


def test_the_log_reader_knows_the_estimate(home, jobs):
    run = running_run(jobs)
    read = report.progress_reader(run)
    assert read(step_line(1)) is not None


def test_watch_does_not_repeat_the_comparison_for_each_new_median():
    """A step a little slower or faster moves the median, not the picture: the line comes again
    only when the measured step time moved by a tenth or more."""
    tracker = Tracker(total_steps=10, estimate=ESTIMATE)
    states = []
    for n, train in ((1, 600.0), (2, 610.0), (3, 620.0), (4, 900.0), (5, 900.0), (6, 900.0)):
        tracker.feed(step_line(n, train=train), 10.0 * n)
        progress = tracker.progress(10.0 * n).as_json()
        states.append(state_line({"status": "RUNNING", "attempt": 1, "attempt_status": "RUNNING", "progress": progress}) + "\n")
    timing = [line for line in report.supervisor_lines(states) if "measured vs" in line]
    assert len(timing) == 2, timing  # the first, and once the median moved past a tenth
