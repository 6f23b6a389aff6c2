"""Progress a person can read: M from the trainer's own episode bar first (the plan's
`max_samples` count only until a bar is seen), steps per hour as a plain number, ETA, the
last step of a finished attempt, and a run's past failures told as history."""

from __future__ import annotations

from dataclasses import replace

from support.fakes import FakeJobs, running_run

from rlhf_launch.cli import report
from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.core.config import load_config
from rlhf_launch.runs import history, lifecycle, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.progress import Tracker
from rlhf_launch.runs.record import Attempt
from rlhf_launch.runs.status import AttemptStatus, RunStatus

from conftest import CONFIGS

# tqdm's bar as OpenRLHF prints it (`Episode [1/1]` desc, ncols default), one redraw per `\r`.
BAR = "\rEpisode [1/1]:  38%|███▊      | {n}/{total} [00:11<00:18,  3.71s/it]"


def step_line(step: int) -> str:
    return f"✨ Global step {step}: {{'policy_loss': 0.01, 'reward': 0.{step}, 'kl': 0.002}}\n"


def test_the_episode_bar_wins_over_the_plans_bound():
    # 0.8.x: the bar counts rollout batches, i.e. global steps per episode
    tracker = Tracker(total_steps=100, release="0.8.11")
    assert tracker.total == 100  # nothing from the trainer yet: the plan's count
    tracker.feed(BAR.format(n=3, total=8), 1.0)
    assert tracker.total == 8


def test_a_new_era_bar_counts_prompts_and_the_recorded_batch_turns_them_into_steps():
    tracker = Tracker(total_steps=None, release="0.11.2", rollout_batch_size=128)
    tracker.feed(BAR.format(n=256, total=1000), 1.0)  # 1000 prompts, 128 per step: the last partial batch trains too
    assert tracker.total == 8
    older = Tracker(release="0.10.2", rollout_batch_size=128)
    older.feed(BAR.format(n=256, total=1000), 1.0)
    assert older.total == 7  # 0.9.1-0.10.x drop the partial batch


def test_the_plan_counts_steps_from_max_samples(home):
    cfg = load_config(CONFIGS / "tiny-1node.yaml")
    unbounded = cfg.model_copy(update={"data": cfg.data.model_copy(update={"max_samples": None})})
    assert lifecycle.planned_steps(unbounded, "0.11.2") is None  # no max_samples: the dataset decides
    bounded = cfg.model_copy(update={"data": cfg.data.model_copy(update={"max_samples": 1000})})
    train = bounded.train
    expected = -(-1000 // train.rollout_batch_size) * train.num_episodes
    assert lifecycle.planned_steps(bounded, "0.11.2") == expected


def test_progress_text_is_step_of_total_a_plain_rate_and_an_eta():
    tracker = Tracker(total_steps=400)
    for i in range(1, 11):  # the trainer's logger: one step every 2 s, 1,800 steps an hour
        tracker.feed(f"INFO 09-14 10:00:{2 * i:02d} ppo_trainer.py:551] " + step_line(i), 100.0)
    text = report.progress_text(tracker.progress(100.0).as_json())
    assert text.startswith("step 10/400, 1,800 steps/h, ETA 13m00s, reward 0.1")
    assert "e+" not in text
    assert report.plain_number(0.05) == "0.05" and report.plain_number(3.14159) == "3.1" and report.plain_number(42.4) == "42"
    assert report.progress_text({"step": 2, "eta_seconds": 3 * 86400 + 7200}).endswith("ETA 3d02h")


def finished_log(steps: int) -> str:
    return "".join(step_line(i) for i in range(1, steps + 1))


def test_a_finished_attempt_shows_its_last_step_not_the_polls(home, jobs: FakeJobs, monkeypatch):
    run = running_run(jobs, auto_resume=0)
    job = run.current.job_id
    jobs.jobs[job] = replace(jobs.jobs[job], driver_node_id="node-1")
    jobs.driver_logs[job] = finished_log(37)
    monkeypatch.setattr(supervisor.state, "driver_log_tail", lambda _d, job_id, _n, _l: jobs.driver_logs[job_id])
    monkeypatch.setattr(supervisor.snapshot, "alive_gpus", lambda *a, **k: 64.0)

    def sleep(_seconds):  # between the two looks the trainer made 3 more steps and ended
        jobs.set(job, JobStatus.SUCCEEDED, log=finished_log(40))

    final = supervisor.Supervisor(run.run_id, jobs, dashboard=None, sweeper=lambda r, j: [], say=lambda _: None, sleep=sleep).run()
    assert final is RunStatus.SUCCEEDED
    record = runs.load(run.run_id)
    assert record.progress["step"] == 40
    assert "ETA" not in report.run_line(record)  # a finished run has no time left


def with_history(run, step: int):
    """The run as it stands after attempt 1 failed (nccl_timeout at `step`) and attempt 2 succeeded."""
    first = run.attempts[0]
    found = {"class": "nccl_timeout", "retriable": True, "step": step, "evidence": [], "hint": "h"}
    first.status, first.diagnosis = AttemptStatus.FAILED, found
    second = Attempt(2, f"{run.run_id}-2", "auto-resume", True, first.submitted + 60, AttemptStatus.SUCCEEDED, first.submitted + 120)
    run.attempts.append(second)
    run.diagnosis, run.status = found, RunStatus.SUCCEEDED
    return run


def test_a_run_that_succeeded_tells_its_failures_as_history(home, jobs: FakeJobs):
    run = with_history(running_run(jobs), step=5)
    assert history.history_text(run) == "resumed after nccl_timeout at step 5"
    line = report.run_line(run)
    assert "SUCCEEDED" in line and line.endswith("resumed after nccl_timeout at step 5")
    assert "diagnosis" not in line and "not retriable" not in line
    text = report.diagnose_text(
        {
            "run_id": run.run_id,
            "attempt": 2,
            "job_id": "j",
            "job_status": "SUCCEEDED",
            "history": [p.as_json() for p in history.past_failures(run)],
        }
    )
    assert "nothing to diagnose: it succeeded" in text and "attempt 1 FAILED: nccl_timeout at step 5" in text


def test_a_run_failing_now_shows_its_diagnosis(home, jobs: FakeJobs):
    run = running_run(jobs)
    run.current.status = AttemptStatus.FAILED
    run.diagnosis = run.current.diagnosis = {"class": "cuda_oom", "retriable": False, "step": 3, "evidence": [], "hint": "h"}
    run.status = RunStatus.FAILED
    assert "diagnosis: cuda_oom (not retriable)" in report.run_line(run)


def test_the_supervisors_log_tells_each_diagnosis_once():
    import json

    state = {
        "status": "WAITING",
        "attempt": 1,
        "attempt_status": "FAILED",
        "diagnosis": {"class": "node_lost", "retriable": True, "evidence": ["x"]},
    }
    line = supervisor.STATE + " " + json.dumps(state) + "\n"
    shown = "".join(report.supervisor_lines([line, line, line]))
    assert shown.count("diagnosis: node_lost") == 1
    assert shown.count("[WAITING] attempt 1 FAILED") == 3


def test_each_attempts_diagnosis_reaches_this_machine_so_history_names_the_failure(home, jobs: FakeJobs):
    from rlhf_launch.runs import remote

    run = with_history(running_run(jobs), step=3)
    said = {"diagnosis": run.attempts[0].diagnosis, "diagnoses": {"1": run.attempts[0].diagnosis}, "progress": {"step": 30}}
    run.attempts[0].diagnosis = None  # what this machine knew: the run's diagnosis, not the attempt's
    remote._fold(run, said)
    assert history.history_text(run) == "resumed after nccl_timeout at step 3"
    assert run.progress == {"step": 30}


def test_a_waiting_state_shows_no_eta():
    import json

    state = {"status": "WAITING", "attempt": 1, "attempt_status": "FAILED", "progress": {"step": 3, "total_steps": 30, "eta_seconds": 26}}
    shown = "".join(report.supervisor_lines([supervisor.STATE + " " + json.dumps(state) + "\n"]))
    assert "step 3/30" in shown and "ETA" not in shown


def test_a_resumed_attempt_keeps_the_total_an_earlier_attempts_bar_told(home, jobs: FakeJobs):
    run = replace(running_run(jobs), total_steps=98, openrlhf_version="0.8.11")  # the plan's bound: 98
    read = report.progress_reader(run)
    read(f"--- {run.run_id} attempt 1 ({run.run_id}-1)\n")
    # the bar's meter: 3.71 s a rollout batch (a global step in 0.8.x), 5 steps left
    assert read(BAR.format(n=3, total=8) + "\n" + step_line(3)) == "step 3/8, 970 steps/h, ETA 0m19s, reward 0.3, kl 0.002"
    read(f"--- {run.run_id} attempt 2 ({run.run_id}-2)\n")
    shown = read("resumed from global_step2\n" + step_line(3))  # no bar drawn yet in this attempt
    assert shown is not None and shown.startswith("step 3/8")


def test_resume_follow_starts_from_the_total_the_run_last_told(home, jobs: FakeJobs):
    run = replace(running_run(jobs), total_steps=98, progress={"step": 15, "total_steps": 30})
    read = report.progress_reader(run)  # a fresh `resume --follow`: no bar of this attempt yet
    read(f"--- {run.run_id} attempt 2 ({run.run_id}-2)\n")
    shown = read("resumed from global_step18\n" + step_line(19))
    assert shown is not None and shown.startswith("step 19/30"), shown


def test_a_replayed_state_line_says_when_it_was_true():
    """`watch` replays the supervisor's log from its start: each state line carries the
    supervisor's own clock, so an hour-old line does not read as now."""
    import json
    import time as clock

    from rlhf_launch.util.when import moment

    earlier = clock.time() - 3600
    state = {"status": "RUNNING", "attempt": 1, "attempt_status": "RUNNING", "progress": {"step": 3}, "time": earlier}
    shown = "".join(report.supervisor_lines([supervisor.STATE + " " + json.dumps(state) + "\n"]))
    assert shown.startswith(f"{moment(earlier)} [RUNNING] attempt 1 RUNNING; ")
