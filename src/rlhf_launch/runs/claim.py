"""One writer per checkpoint directory: a run claims its ckpt_path on the cluster.

A claim is a Ray job that does nothing, `rlhf-launch-ckpt-<path hash>-<G>`, whose metadata
names the path and the run. The claim of a path is its highest generation G. To claim, a run
submits generation G+1; Ray refuses a second job with an id it has, so of two racing
submits exactly one wins, and the other reads the winner's claim and is refused. A claim
holds for as long as its run lives on the cluster (a live attempt or a live supervisor, or a
claim younger than CLAIM_GRACE whose first attempt may still be on its way); a new claim is
taken over an ended run's, never over a live one's. Nothing is ever deleted: the claims stay
in the job table as the path's history.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass

from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import JobExists, JobNotFound, UserError
from rlhf_launch.runs import jobmeta

PREFIX = "rlhf-launch-ckpt-"
CLAIM_GRACE = 300.0  # seconds a claim without any attempt yet still counts as live
ROLE = "ckpt-claim"


class CheckpointClaimed(UserError):
    """Another live run writes to this ckpt_path."""


@dataclass(frozen=True)
class Claim:
    path: str
    generation: int
    run_id: str
    job_id: str
    created: float | None


def normalized(path: str) -> str:
    return os.path.normpath(os.path.expanduser(path))


def claim_job_id(path: str, generation: int) -> str:
    digest = hashlib.sha256(normalized(path).encode()).hexdigest()[:16]
    return f"{PREFIX}{digest}-{generation}"


def current(jobs: Jobs, path: str) -> Claim | None:
    """The path's claim: its highest generation (ClusterError: unknown)."""
    found: Claim | None = None
    generation = 1
    while True:
        job_id = claim_job_id(path, generation)
        try:
            info = jobs.info(job_id)
        except JobNotFound:
            return found
        found = Claim(path, generation, info.metadata.get("rlhf_launch_claim_run", ""), job_id, info.start_time)
        generation += 1


def run_live(jobs: Jobs, run_id: str, since: float | None, now: float | None = None) -> bool:
    """Does the run still live on the cluster: an attempt or a supervisor not ended, or no
    attempt yet on a claim younger than CLAIM_GRACE (its submission may be on its way)?"""
    attempts = 0
    for make in (jobmeta.attempt_job_id, jobmeta.supervisor_job_id):
        number = 1
        while True:
            try:
                info = jobs.info(make(run_id, number))
            except JobNotFound:
                break
            if not info.status.is_terminal():
                return True
            attempts += make is jobmeta.attempt_job_id
            number += 1
    if attempts:
        return False
    return since is None or (now or time.time()) - since < CLAIM_GRACE


def acquire(jobs: Jobs, path: str, run_id: str, *, previous_ok: bool = False) -> Claim:
    """Claim `path` for `run_id` (its own claim is kept). Refused (CheckpointClaimed) while
    another live run holds it; previous_ok=False also refuses when an ended run claimed it
    after this one (a resume would load that run's checkpoints)."""
    for _ in range(5):  # each lost race means a newer claim to read
        claim = current(jobs, path)
        if claim is not None and claim.run_id == run_id:
            return claim
        if claim is not None and run_live(jobs, claim.run_id, claim.created):
            raise CheckpointClaimed(
                f"checkpoint.ckpt_path {path} is in use by run {claim.run_id} (still live on the cluster): "
                "two trainers writing one checkpoint directory overwrite each other's steps",
                hint=f"choose another checkpoint.ckpt_path, or stop that run first (rlhf-launch stop {claim.run_id})",
            )
        if claim is not None and not previous_ok and _claimed_before(jobs, path, run_id, claim.generation):
            raise CheckpointClaimed(
                f"checkpoint.ckpt_path {path} was taken over by run {claim.run_id} after this run: its checkpoints there may be that run's",
                hint="pass --force to resume from what is there anyway",
            )
        generation = claim.generation + 1 if claim else 1
        job_id = claim_job_id(path, generation)
        meta = {"rlhf_launch": ROLE, "rlhf_launch_claim_path": normalized(path), "rlhf_launch_claim_run": run_id}
        try:
            jobs.submit("true", {}, job_id, meta)
        except JobExists:
            continue  # another submit claimed this generation a moment ago: read its claim
        return Claim(path, generation, run_id, job_id, time.time())
    raise UserError(f"could not claim checkpoint.ckpt_path {path}: other runs keep claiming it", hint="try again")


def _claimed_before(jobs: Jobs, path: str, run_id: str, below: int) -> bool:
    for generation in range(below - 1, 0, -1):
        try:
            if jobs.info(claim_job_id(path, generation)).metadata.get("rlhf_launch_claim_run") == run_id:
                return True
        except JobNotFound:
            return False
    return False


def holds(jobs: Jobs, path: str, run_id: str) -> bool:
    """Is the run still the one claim of its path (what the supervisor checks before each
    resubmission)? A path no one claimed (a cluster restarted since) is claimed again."""
    claim = current(jobs, path)
    if claim is None:
        acquire(jobs, path, run_id)
        return True
    return claim.run_id == run_id
