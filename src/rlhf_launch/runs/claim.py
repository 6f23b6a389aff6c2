"""One writer per checkpoint directory: a run claims its ckpt_path on the cluster.

A claim is a Ray job that does nothing, `rlhf-launch-ckpt-<path hash>-<G>`, whose metadata
names the path and the run. The claim of a path is its highest generation G. To claim, a run
submits generation G+1; Ray refuses a second job with an id it has, so of two racing
submits exactly one wins, and the other reads the winner's claim and is refused.

Who may write is read from the whole job table at once (`scan`), not from claims alone: a
path is in use while any run other than the asking one has a live job (attempt or
supervisor) whose recorded ckpt_path is that path, or holds the newest claim and has not
yet submitted anything (a claim younger than CLAIM_GRACE, on the cluster's clock). So a
claim job deleted from the table, or attempt numbers that do not start at 1 (a run resumed
onto a restarted cluster), never hand a live run's directory to another. Nothing is ever
deleted: the claims stay in the job table as the path's history.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field

from rlhf_launch.cluster.jobs import JobInfo, Jobs
from rlhf_launch.errors import ClusterError, JobExists, JobNotFound, UserError

PREFIX = "rlhf-launch-ckpt-"
CLAIM_GRACE = 300.0  # seconds a claim whose run has no job yet still counts as live
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


@dataclass(frozen=True)
class Scan:
    """What the job table says of one path."""

    claims: tuple[Claim, ...] = ()  # oldest first
    live: dict[str, str] = field(default_factory=dict)  # run id -> why it counts as writing the path

    @property
    def newest(self) -> Claim | None:
        return self.claims[-1] if self.claims else None

    def live_other(self, run_id: str) -> tuple[str, str] | None:
        return next(((r, why) for r, why in self.live.items() if r != run_id), None)


def normalized(path: str) -> str:
    """The path as written, cleaned (`a//b/`, `a/./b`); `~` and relative paths stay as they
    are: they mean the trainer's home and working directory, on the cluster."""
    return os.path.normpath(path)


def claim_job_id(path: str, generation: int) -> str:
    digest = hashlib.sha256(normalized(path).encode()).hexdigest()[:16]
    return f"{PREFIX}{digest}-{generation}"


def _ckpt_of(info: JobInfo) -> str | None:
    try:
        record = json.loads(info.metadata.get("rlhf_launch_record") or "{}")
    except ValueError:
        return None
    value = record.get("ckpt_path") if isinstance(record, dict) else None
    return normalized(value) if isinstance(value, str) and value else None


def scan(jobs: Jobs, path: str) -> Scan:
    """One read of the job table (ClusterError: unknown, never "free")."""
    target = normalized(path)
    table = jobs.list()
    now = time.time()
    claims, live = [], {}
    runs_with_jobs: set[str] = set()
    prefix = claim_job_id(target, 0).rsplit("-", 1)[0] + "-"
    for info in table:
        meta = info.metadata
        if info.job_id.startswith(prefix) and meta.get("rlhf_launch_claim_path") == target:
            try:
                generation = int(info.job_id.rsplit("-", 1)[1])
            except ValueError:
                continue
            claims.append(Claim(target, generation, meta.get("rlhf_launch_claim_run", ""), info.job_id, info.start_time))
            continue
        run_id = meta.get("rlhf_launch_run")
        if run_id and _ckpt_of(info) == target:
            runs_with_jobs.add(run_id)
            if not info.status.is_terminal():
                live[run_id] = f"its job {info.job_id} is {info.status}"
    claims.sort(key=lambda c: c.generation)
    newest = claims[-1] if claims else None
    if newest is not None and newest.run_id not in runs_with_jobs and newest.run_id not in live:
        age = now - (newest.created or now)
        if age < CLAIM_GRACE:
            live[newest.run_id] = f"it claimed the path {age:.0f}s ago and has not submitted its first attempt yet"
    return Scan(tuple(claims), live)


def refuse_if_in_use(found: Scan, path: str, run_id: str) -> None:
    other = found.live_other(run_id)
    if other is not None:
        raise CheckpointClaimed(
            f"checkpoint.ckpt_path {path} is in use by run {other[0]} ({other[1]}): "
            "two trainers writing one checkpoint directory overwrite each other's steps",
            hint=f"choose another checkpoint.ckpt_path, or stop that run first (rlhf-launch stop {other[0]})",
        )


def current(jobs: Jobs, path: str) -> Claim | None:
    """The path's claim: its highest generation (ClusterError: unknown)."""
    return scan(jobs, path).newest


def acquire(jobs: Jobs, path: str, run_id: str, *, previous_ok: bool = False) -> Claim:
    """Claim `path` for `run_id` (its own newest claim is kept). Refused (CheckpointClaimed)
    while another run writes there; previous_ok=False also refuses when another run claimed
    it after this one did (a resume would load that run's checkpoints)."""
    for _ in range(5):  # each lost race means a newer claim to read
        found = scan(jobs, path)
        refuse_if_in_use(found, path, run_id)
        newest = found.newest
        if newest is not None and newest.run_id == run_id:
            return newest
        mine = [c for c in found.claims if c.run_id == run_id]
        if newest is not None and mine and not previous_ok:
            raise CheckpointClaimed(
                f"checkpoint.ckpt_path {path} was taken over by run {newest.run_id} after this run: "
                "its checkpoints there may be that run's",
                hint="pass --force to resume from what is there anyway",
            )
        generation = max((c.generation for c in found.claims), default=0) + 1
        job_id = claim_job_id(path, generation)
        meta = {"rlhf_launch": ROLE, "rlhf_launch_claim_path": normalized(path), "rlhf_launch_claim_run": run_id}
        try:
            jobs.submit("true", {}, job_id, meta)
        except JobExists:
            continue  # another submit claimed this generation a moment ago: read its claim
        except ClusterError:
            if not _landed(jobs, job_id, run_id):  # an answer lost on the way: did it land?
                raise
        return Claim(normalized(path), generation, run_id, job_id, None)
    raise UserError(f"could not claim checkpoint.ckpt_path {path}: other runs keep claiming it", hint="try again")


def _landed(jobs: Jobs, job_id: str, run_id: str) -> bool:
    try:
        return jobs.info(job_id).metadata.get("rlhf_launch_claim_run") == run_id
    except (JobNotFound, ClusterError):
        return False


def holds(jobs: Jobs, path: str, run_id: str) -> bool:
    """Is the run still the path's one writer (what the supervisor checks before each
    resubmission, and submit right after its first attempt)? A path no one claimed (a
    cluster restarted since) is claimed again."""
    found = scan(jobs, path)
    if found.live_other(run_id) is not None:
        return False
    if found.newest is None:
        acquire(jobs, path, run_id)
        return True
    return found.newest.run_id == run_id
