"""The supervisor against a fake job API: it never acts on unknown, resubmits only what is
proven gone, keeps the W&B key where it was, and one attempt number is one job."""

from __future__ import annotations

import pytest
from support.fakes import FakeJobs, running_run

from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.errors import ClusterTimeout
from rlhf_launch.runs import gone, jobmeta, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.status import AttemptStatus, RunStatus

KEY = "0123456789abcdef0123456789abcdef01234567"
# What a survivor prints when a node died under the run (corpus: node_lost), at a given step.
NODE_LOST = (
    "\u2728 Global step {step}: {{'policy_loss': 0.01, 'reward': 0.5}}\n"
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: PolicyModelActor\n"
    "The actor died because its node has died. Node Id: 2b7c\n"
)


def trainers(jobs: FakeJobs) -> list[str]:
    return [j for j in jobs.submitted() if jobs.jobs[j].metadata.get("rlhf_launch_role") == "trainer"]


class Ticks(Exception):
    """Raised by the fake sleep after the given number of polls."""


class Ready:
    """A doctor report with nothing failing."""

    ok = True

    def failed(self):
        return []


def ready(_launch):
    return Ready()


def supervise(jobs: FakeJobs, run_id: str, *, polls: int, on_tick=lambda n: None, left=(), gpus=64.0, monkeypatch=None, node_checks=None):
    monkeypatch.setattr(supervisor.snapshot, "alive_gpus", lambda *a, **k: gpus)
    proofs = []

    def wait_gone(_jobs, _dashboard, job_ids, _sweeper, _timeout, **_):
        proofs.append(list(job_ids))
        return list(left)

    monkeypatch.setattr(supervisor.gone, "wait_gone", wait_gone)
    count = [0]

    def sleep(_seconds):
        count[0] += 1
        on_tick(count[0])
        if count[0] >= polls:
            raise Ticks()

    said: list[str] = []
    try:
        final = supervisor.Supervisor(
            run_id, jobs, dashboard=None, sweeper=lambda r, j: [], say=said.append, sleep=sleep, node_checks=node_checks or ready
        ).run()
    except Ticks:
        final = None
    return final, said, proofs


def test_a_timeout_is_never_a_reason_to_resubmit(home, jobs, monkeypatch):
    run = running_run(jobs)
    jobs.fail_with = ClusterTimeout("the dashboard did not answer within 10s")
    final, said, proofs = supervise(jobs, run.run_id, polls=20, monkeypatch=monkeypatch)
    assert final is None and proofs == []
    assert jobs.submitted() == [run.current.job_id]
    assert runs.load(run.run_id).current.status is AttemptStatus.RUNNING
    assert sum("not acting" in line for line in said) == 1  # said once, not every poll


def test_a_failed_attempt_is_resubmitted_once_proven_gone_with_the_same_environment(home, jobs, monkeypatch):
    run = running_run(jobs)
    first = run.current.job_id
    env = jobs.jobs[first].runtime_env
    env.setdefault("env_vars", {})["WANDB_API_KEY"] = KEY  # as Ray holds it for the attempt
    jobs.set(first, JobStatus.FAILED, "exit 1", log=NODE_LOST.format(step=3))

    def tick(n):
        second = jobmeta.attempt_job_id(run.run_id, 2)
        if second in jobs.jobs:
            jobs.set(second, JobStatus.SUCCEEDED)

    final, _, proofs = supervise(jobs, run.run_id, polls=50, on_tick=tick, monkeypatch=monkeypatch)
    assert final is RunStatus.SUCCEEDED
    assert proofs == [[first]]
    second = jobs.jobs[jobmeta.attempt_job_id(run.run_id, 2)]
    assert second.entrypoint.endswith("--ckpt.load_enable")
    assert second.runtime_env["env_vars"]["WANDB_API_KEY"] == KEY
    assert second.runtime_env["env_vars"][jobmeta.JOB_VAR] == second.job_id
    assert second.runtime_env["env_vars"]["WANDB_RUN_ID"] == supervisor.lifecycle.wandb_run_id(run.run_id)
    assert second.metadata["rlhf_launch_reason"] == "auto-resume"
    record = runs.load(run.run_id)
    assert [a.status for a in record.attempts] == [AttemptStatus.FAILED, AttemptStatus.SUCCEEDED]


def test_an_attempt_not_proven_gone_is_never_resubmitted(home, jobs, monkeypatch):
    run = running_run(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED, log=NODE_LOST.format(step=3))
    left = [
        gone.Leftovers(run.current.job_id, status="FAILED", processes=[{"pid": 4242, "node": "127.0.0.3", "cmd": "python3 -m openrlhf"}])
    ]
    final, said, proofs = supervise(jobs, run.run_id, polls=10, left=left, monkeypatch=monkeypatch)
    assert final is None and len(proofs) >= 2
    assert jobs.submitted() == [run.current.job_id]
    assert any("not proven gone" in line and "4242" in line for line in said)


def test_an_attempt_submitted_elsewhere_is_followed_not_duplicated(home, jobs, monkeypatch):
    run = running_run(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED, log=NODE_LOST.format(step=3))
    other = jobmeta.attempt_job_id(run.run_id, 2)
    # another supervisor got there first, between this one's look and its submission
    real_submit = jobs.submit

    def racing_submit(entrypoint, runtime_env, job_id, metadata):
        if job_id == other and other not in jobs.jobs:
            real_submit(entrypoint, runtime_env, job_id, metadata)
        return real_submit(entrypoint, runtime_env, job_id, metadata)

    monkeypatch.setattr(jobs, "submit", racing_submit)
    final, said, _ = supervise(jobs, run.run_id, polls=5, monkeypatch=monkeypatch)
    assert final is None
    assert sorted(j for j in jobs.jobs if j.startswith(run.run_id)) == [run.current.job_id, other]
    assert any("already submitted elsewhere" in line for line in said)
    assert [a.job_id for a in runs.load(run.run_id).attempts] == [run.current.job_id, other]


def test_it_gives_up_when_the_resumes_are_used(home, jobs, monkeypatch):
    run = running_run(jobs)

    def fail_everything(n):
        for job_id, info in list(jobs.jobs.items()):
            if not info.status.is_terminal():  # each attempt gets further: a retry helps
                jobs.set(job_id, JobStatus.FAILED, log=NODE_LOST.format(step=2 * len(jobs.jobs)))

    fail_everything(0)
    final, _, _ = supervise(jobs, run.run_id, polls=100, on_tick=fail_everything, monkeypatch=monkeypatch)
    assert final is RunStatus.GAVE_UP
    assert len(trainers(jobs)) == 3  # the first attempt and two automatic resumes
    assert runs.load(run.run_id).status is RunStatus.GAVE_UP


def test_a_trainer_stopped_by_someone_ends_the_run_stopped(home, jobs, monkeypatch):
    run = running_run(jobs)
    jobs.set(run.current.job_id, JobStatus.STOPPED)
    final, _, _ = supervise(jobs, run.run_id, polls=5, monkeypatch=monkeypatch)
    assert final is RunStatus.STOPPED and trainers(jobs) == [run.current.job_id]
    assert jobmeta.stop_marker_id(run.run_id, 1) in jobs.jobs  # every machine sees the stop


def test_too_few_gpus_for_two_polls_supersedes_the_attempt_without_counting_it(home, jobs, monkeypatch):
    run = running_run(jobs)
    final, said, _ = supervise(jobs, run.run_id, polls=4, gpus=4.0, monkeypatch=monkeypatch)
    record = runs.load(run.run_id)
    assert record.attempts[0].status is AttemptStatus.SUPERSEDED
    assert any("wait forever at placement" in line for line in said)
    assert record.auto_resumes_used == 0


@pytest.mark.parametrize("line", ["RLHF_LAUNCH_STATE not json", "noise"])
def test_latest_state_skips_what_is_not_a_state_line(line):
    good = supervisor.state_line({"status": "WAITING", "attempt": 2})
    assert supervisor.latest_state(f"{good}\n{line}\n") == {"status": "WAITING", "attempt": 2}


def test_a_failure_that_will_repeat_is_not_retried(home, jobs, monkeypatch):
    """A config error is not retriable: no resubmission, the run FAILED with its diagnosis."""
    run = running_run(jobs)
    log = "usage: train_ppo_ray.py [-h] ...\ntrain_ppo_ray.py: error: unrecognized arguments: --actor.lr 1e-6\n"
    jobs.set(run.current.job_id, JobStatus.FAILED, log=log)
    final, said, proofs = supervise(jobs, run.run_id, polls=10, monkeypatch=monkeypatch)
    assert final is RunStatus.FAILED and proofs == [] and jobs.submitted() == [run.current.job_id]
    record = runs.load(run.run_id)
    assert record.diagnosis["class"] == "config" and record.diagnosis["retriable"] is False
    assert record.attempts[0].diagnosis == record.diagnosis


def test_the_same_failure_at_the_same_step_stops_the_retries(home, jobs, monkeypatch):
    run = running_run(jobs, auto_resume=5)

    def fail_at_step_7(n):
        for job_id, info in list(jobs.jobs.items()):
            if not info.status.is_terminal():
                jobs.set(job_id, JobStatus.FAILED, log=NODE_LOST.format(step=7))

    fail_at_step_7(0)
    final, said, _ = supervise(jobs, run.run_id, polls=100, on_tick=fail_at_step_7, monkeypatch=monkeypatch)
    assert final is RunStatus.FAILED and len(trainers(jobs)) == 2
    assert any("twice in a row at step 7" in line for line in said)


class Failing:
    """A doctor report whose shm check fails on one node."""

    ok = False

    def failed(self):
        from rlhf_launch.doctor.checks import NodeFinding, Status

        return [NodeFinding("shm", "127.0.0.3", Status.FAIL, "/dev/shm is 64.0 MiB", "at least 10 GiB")]


def test_a_resubmission_waits_while_a_node_check_fails_saying_which(home, jobs, monkeypatch):
    run = running_run(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED, log=NODE_LOST.format(step=3))
    looks = []

    def node_checks(launch):
        looks.append(launch.cfg.name)
        return Failing() if len(looks) < 3 else Ready()

    def tick(n):
        second = jobmeta.attempt_job_id(run.run_id, 2)
        if second in jobs.jobs:
            jobs.set(second, JobStatus.SUCCEEDED)

    final, said, _ = supervise(jobs, run.run_id, polls=50, on_tick=tick, monkeypatch=monkeypatch, node_checks=node_checks)
    assert final is RunStatus.SUCCEEDED and len(looks) == 3
    waiting = [line for line in said if line.startswith("waiting to resubmit")]
    assert waiting == ["waiting to resubmit: a node check fails: shm on 127.0.0.3: /dev/shm is 64.0 MiB; wanted at least 10 GiB"]
    assert trainers(jobs) == [run.attempts[0].job_id, jobmeta.attempt_job_id(run.run_id, 2)]


def test_no_resubmission_once_another_run_claimed_the_checkpoint_directory(home, jobs, monkeypatch):
    from rlhf_launch.runs import claim

    run = running_run(jobs)
    claim.acquire(jobs, run.ckpt_path, run.run_id)
    jobs.set(run.current.job_id, JobStatus.FAILED, log=NODE_LOST.format(step=3))
    claim.acquire(jobs, run.ckpt_path, "another-run")  # the failed run is not live: another run took the path
    final, said, _ = supervise(jobs, run.run_id, polls=20, monkeypatch=monkeypatch)
    assert final is RunStatus.FAILED
    assert any("was claimed by run another-run" in line for line in said)
    assert trainers(jobs) == [run.attempts[0].job_id]
