"""One writer per checkpoint directory (runs/claim.py) over a fake job API: the claim rules
without Ray. The real race is in test_doctor_cluster.py."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.runs import claim


def meta(run_id, path="/ckpt/a"):
    """What every job of a run carries: its id and its record (ckpt_path included)."""
    return {"rlhf_launch_run": run_id, "rlhf_launch_record": json.dumps({"ckpt_path": path})}


def live_attempt(jobs, run_id, status=JobStatus.RUNNING, number=1):
    jobs.submit("python3 -m openrlhf.cli.train_ppo_ray", {}, f"{run_id}-{number}", meta(run_id))
    jobs.set(f"{run_id}-{number}", status)


def test_a_path_is_claimed_once_and_kept_by_its_run(jobs):
    first = claim.acquire(jobs, "/ckpt/a", "run-a")
    assert first.generation == 1 and claim.current(jobs, "/ckpt/a").run_id == "run-a"
    again = claim.acquire(jobs, "/ckpt/a/", "run-a")  # the same path, written otherwise
    assert (again.job_id, again.generation, again.run_id) == (first.job_id, 1, "run-a")
    assert claim.holds(jobs, "/ckpt/a", "run-a")


def test_a_live_run_keeps_its_path(jobs):
    claim.acquire(jobs, "/ckpt/a", "run-a")
    live_attempt(jobs, "run-a")
    with pytest.raises(claim.CheckpointClaimed, match="in use by run run-a"):
        claim.acquire(jobs, "/ckpt/a", "run-b")
    assert not claim.holds(jobs, "/ckpt/a", "run-b")


def test_a_claim_without_attempts_is_live_for_a_while(jobs):
    claim.acquire(jobs, "/ckpt/a", "run-a")  # its first attempt may be on its way
    with pytest.raises(claim.CheckpointClaimed):
        claim.acquire(jobs, "/ckpt/a", "run-b")
    old = jobs.jobs[claim.claim_job_id("/ckpt/a", 1)]
    jobs.jobs[old.job_id] = replace(old, start_time=time.time() - claim.CLAIM_GRACE - 1)
    assert claim.acquire(jobs, "/ckpt/a", "run-b").generation == 2


def test_an_ended_run_hands_the_path_on_and_its_resume_is_then_refused(jobs):
    claim.acquire(jobs, "/ckpt/a", "run-a")
    live_attempt(jobs, "run-a", JobStatus.SUCCEEDED)
    taken = claim.acquire(jobs, "/ckpt/a", "run-b")
    assert (taken.generation, taken.run_id) == (2, "run-b")
    live_attempt(jobs, "run-b", JobStatus.FAILED)
    with pytest.raises(claim.CheckpointClaimed, match="taken over by run run-b"):
        claim.acquire(jobs, "/ckpt/a", "run-a")  # a resume of run-a would load run-b's steps
    assert claim.acquire(jobs, "/ckpt/a", "run-a", previous_ok=True).generation == 3  # --force


def test_a_live_supervisor_keeps_the_claim(jobs):
    claim.acquire(jobs, "/ckpt/a", "run-a")
    live_attempt(jobs, "run-a", JobStatus.FAILED)
    jobs.submit("python3 -m rlhf_launch supervise run-a", {}, "run-a-supervisor-1", meta("run-a"))
    jobs.set("run-a-supervisor-1", JobStatus.RUNNING)  # between attempts: it will resubmit
    with pytest.raises(claim.CheckpointClaimed):
        claim.acquire(jobs, "/ckpt/a", "run-b")


def test_a_lost_race_reads_the_winner(jobs, monkeypatch):
    """Two submits read "unclaimed" at once; the second one's submission of generation 1 is
    refused by Ray, and it is then refused naming the winner."""
    real_scan = claim.scan
    calls = []

    def stale_first(jobs_, path):
        calls.append(path)
        return claim.Scan() if len(calls) == 1 else real_scan(jobs_, path)

    claim.acquire(jobs, "/ckpt/a", "run-a")
    monkeypatch.setattr(claim, "scan", stale_first)
    with pytest.raises(claim.CheckpointClaimed, match="run-a"):
        claim.acquire(jobs, "/ckpt/a", "run-b")
    assert len(calls) == 2
    assert [j for j in jobs.jobs if j.startswith(claim.PREFIX)] == [claim.claim_job_id("/ckpt/a", 1)]


def test_a_deleted_claim_or_attempts_not_from_1_never_free_a_live_run(jobs):
    """The job table is read whole: a run resumed onto a restarted cluster has attempt 7 only,
    and its claim job may have been deleted; its live job still names the path."""
    live_attempt(jobs, "run-a", number=7)
    with pytest.raises(claim.CheckpointClaimed, match="run-a"):
        claim.acquire(jobs, "/ckpt/a/.", "run-b")
    assert not claim.holds(jobs, "/ckpt/a", "run-b")


def test_a_claim_whose_answer_was_lost_is_adopted(jobs, monkeypatch):
    from rlhf_launch.errors import ClusterTimeout

    real_submit = jobs.submit

    def lost_answer(*args, **kwargs):
        real_submit(*args, **kwargs)
        raise ClusterTimeout("the dashboard did not answer within 10s")

    monkeypatch.setattr(jobs, "submit", lost_answer)
    taken = claim.acquire(jobs, "/ckpt/a", "run-a")
    assert taken.generation == 1 and claim.current(jobs, "/ckpt/a").run_id == "run-a"


def test_claims_are_never_jobs_of_a_run(jobs):
    """Claim jobs carry no rlhf_launch_run: `runs` and the sweep never take them for a run's."""
    claim.acquire(jobs, "/ckpt/a", "run-a")
    meta = jobs.jobs[claim.claim_job_id("/ckpt/a", 1)].metadata
    assert "rlhf_launch_run" not in meta and meta["rlhf_launch_claim_run"] == "run-a"
