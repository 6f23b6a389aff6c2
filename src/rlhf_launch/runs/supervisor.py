"""Auto-resume: a watcher process on the launcher's machine that keeps a run going.

Why a local process (re-attachable with `rlhf-launch watch RUN`) and not a Ray job: the
run record, which is the source of truth, lives here; the W&B key stays in this
environment instead of sitting in a supervisor job's runtime_env; and the cluster image
needs nothing beyond OpenRLHF. The watcher polls the current attempt; on FAILED (or a job
the cluster lost) it waits for the cluster to have the GPUs again, backs off, and
resubmits with the checkpoint load flag, up to `auto_resume` times. It never resubmits
after SUCCEEDED or a user's stop, and never touches a checkpoint. One watcher per run
(a lock file); a second `watch` follows the first one's log instead.

Placement guard: Ray can take tens of seconds to declare a dead node dead, so an attempt
resubmitted right after a node loss may wait forever at placement. While an attempt is
pending or running, the watcher compares the alive nodes' GPUs with what the plan needs;
after two polls short it stops that attempt (SUPERSEDED, not counted as a resume), waits
for the GPUs, and submits again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rlhf_launch.cluster import snapshot
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterError, UserError
from rlhf_launch.runs import lifecycle
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.status import AttemptStatus, RunStatus
from rlhf_launch.util import filelock

POLL = 5.0
MAX_BACKOFF = 600.0
CAPACITY_WAIT = 3600.0


def log_path(run_id: str) -> Path:
    return runs.runs_dir() / f"{run_id}.watch.log"


def _lock_path(run_id: str) -> Path:
    return runs.runs_dir() / f".{run_id}.watch.lock"


def watcher_alive(run_id: str) -> bool:
    """True while some process holds the run's watch lock."""
    return filelock.is_locked(_lock_path(run_id))


def follow_log(run_id: str) -> Iterator[str]:
    """The running supervisor's log lines as they come, until it exits."""
    with open(log_path(run_id)) as log:
        while True:
            line = log.readline()
            if line:
                yield line
            elif not watcher_alive(run_id):
                return
            else:
                time.sleep(0.5)


def spawn(run_id: str, poll: float, token_file: str | None) -> int:
    """Start a detached watcher; its output goes to the run's watch log."""
    log = open(log_path(run_id), "a")  # noqa: SIM115 - handed to the child process
    args = [sys.executable, "-m", "rlhf_launch", "watch", run_id, "--poll", str(poll)]
    if token_file:
        args += ["--token-file", token_file]
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    runs.update(run_id, lambda r: setattr(r, "supervisor_pid", process.pid))
    return process.pid


def _capacity_ok(jobs: Jobs, gpus_needed: int) -> tuple[bool, float]:
    snap = snapshot.read(jobs.dashboard, memory=False)
    return snap.gpus >= gpus_needed, snap.gpus


def watch(
    run_id: str,
    *,
    poll: float = POLL,
    token_file: str | None = None,
    say: Callable[[str], None] = print,
    capacity_wait: float = CAPACITY_WAIT,
) -> str:
    """Supervise until the run ends; returns its final status."""
    handle = filelock.try_lock(_lock_path(run_id))
    if handle is None:
        raise UserError(f"run {run_id} already has a watcher", hint=f"its log: {log_path(run_id)}")
    try:
        runs.update(run_id, lambda r: setattr(r, "supervisor_pid", os.getpid()))
        return _loop(run_id, poll, token_file, say, capacity_wait)
    finally:
        handle.close()


def _supersede(run_id: str, jobs: Jobs, job_id: str, reason: str) -> None:
    try:
        jobs.stop(job_id)
    except ClusterError:
        pass

    def change(record: runs.Run) -> None:
        current = record.current
        if current is not None and current.job_id == job_id:
            current.status, current.message, current.ended = AttemptStatus.SUPERSEDED, reason, time.time()
            record.status = RunStatus.WAITING

    runs.update(run_id, change)


def _loop(run_id: str, poll: float, token_file: str | None, say: Callable[[str], None], capacity_wait: float) -> str:
    run = runs.load(run_id)
    jobs = _connect(run.address, token_file, say, poll)
    say(f"watching {run_id}: up to {run.auto_resume} automatic resumes, polling every {poll:g}s")
    needed = lifecycle.launch_for(run, load_checkpoint=True).plan.gpus_required
    last, short = None, 0
    while True:
        run = runs.load(run_id)
        if run.final:
            say(f"{run_id}: {run.status}")
            return run.status
        try:
            run = lifecycle.observe(run, jobs)
        except ClusterError as exc:
            say(f"cluster not answering ({exc.message}); retrying")
            time.sleep(poll)
            continue
        attempt = run.current
        if attempt is None:
            return run.status
        if (attempt.number, attempt.status) != last:
            say(f"attempt {attempt.number} ({attempt.job_id}): {attempt.status}")
            last = (attempt.number, attempt.status)
        if run.stopped_by_user:
            say(f"{run_id} was stopped by the user: not resuming")
            return "STOPPED"
        if attempt.status is AttemptStatus.SUCCEEDED:
            runs.update(run_id, lambda r: setattr(r, "status", RunStatus.SUCCEEDED))
            say(f"{run_id}: SUCCEEDED")
            return "SUCCEEDED"
        if attempt.status is AttemptStatus.STOPPED:
            lifecycle.mark_stopped(run_id)
            say(f"{run_id}: its job was stopped: not resuming")
            return "STOPPED"
        if attempt.status.is_live():
            try:
                enough, have = _capacity_ok(jobs, needed)
            except ClusterError:
                enough, have = True, 0.0
            short = 0 if enough else short + 1
            if short >= 2:
                reason = f"stopped by the watcher: alive nodes have {have:g} GPUs, the run needs {needed}"
                say(f"attempt {attempt.number}: {reason}; it would wait forever at placement")
                _supersede(run_id, jobs, attempt.job_id, reason)
                short = 0
                continue
            time.sleep(poll)
            continue
        if attempt.status.is_failure():
            free_retry = attempt.status is AttemptStatus.SUPERSEDED
            used = run.auto_resumes_used
            if used >= run.auto_resume and not free_retry:
                runs.update(run_id, lambda r: setattr(r, "status", RunStatus.GAVE_UP))
                say(f"{run_id}: attempt {attempt.number} {attempt.status}; {used} automatic resumes used, giving up")
                return "GAVE_UP"
            delay = 0 if free_retry else min(MAX_BACKOFF, run.backoff * (2**used))
            if delay:
                say(f"backing off {delay:g}s before resume {used + 1}/{run.auto_resume}")
                time.sleep(delay)
            if not _wait_capacity(run.run_id, needed, jobs, poll, say, capacity_wait):
                runs.update(run_id, lambda r: setattr(r, "status", RunStatus.GAVE_UP))
                return "GAVE_UP"
            try:
                launch = lifecycle.launch_for(runs.load(run_id), load_checkpoint=True)
                reason = "placement-retry" if free_retry else "auto-resume"
                new = lifecycle.submit_attempt(jobs, run_id, launch, reason, load_checkpoint=True)
            except (UserError, ClusterError) as exc:
                say(f"resubmit refused: {exc.message}")
                if runs.load(run_id).stopped_by_user:
                    return "STOPPED"
                time.sleep(poll)
                continue
            say(f"resubmitted as attempt {new.number} ({new.job_id}) with the checkpoint load flag")
            continue
        time.sleep(poll)


def _wait_capacity(run_id: str, needed: int, jobs: Jobs, poll: float, say: Callable[[str], None], limit: float) -> bool:
    end = time.monotonic() + limit
    told = False
    while True:
        try:
            ok, have = _capacity_ok(jobs, needed)
        except ClusterError as exc:
            ok, have = False, 0.0
            say(f"cluster not answering ({exc.message})")
        if ok:
            return True
        if not told:
            say(f"waiting for the cluster to have {needed} GPUs again (alive nodes have {have:g})")
            told = True
        if time.monotonic() > end or runs.load(run_id).stopped_by_user:
            say(f"gave up waiting for {needed} GPUs after {limit:g}s")
            return False
        time.sleep(poll)


def _connect(address: str, token_file: str | None, say: Callable[[str], None], poll: float) -> Jobs:
    while True:
        try:
            return Cluster.at(address, token_file).checked().jobs
        except ClusterError as exc:
            say(f"cannot reach the cluster yet ({exc.message}); retrying")
            time.sleep(poll)
