"""Stop a run, for real: it returns when the trainer is gone and its GPUs are free, or says
exactly what is left.

1. Mark the run stopped, here and on the cluster (`<run>-stopped-<N>`, which every
   supervisor and every machine reads): nothing resubmits it past this point.
2. Ask Ray to stop its supervisor jobs and every attempt that is not terminal, all at once,
   again and again until Ray has it (a stop sent before Ray registered the job is a no-op
   for Ray; Ray gives each job up to 3 s to end on SIGTERM).
3. Sweep: kill the actors that would still start an entrypoint (a job stopped while its
   runtime env was set up still starts, ray-project/ray#28221), end every process with the
   run's marker on every node, and wait until every job of the run is proven gone
   (runs/gone.py): terminal, no entrypoint actor, no actor or placement group, no process.
   The first sweep starts with step 2 (a probe job takes seconds to start) and gives Ray
   time to end the jobs before it kills anything.
4. Look again: an attempt the supervisor submitted just before it died can reach Ray after
   step 3; it is stopped and swept the same way, until no new one appears.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterError, ClusterTimeout, JobNotFound
from rlhf_launch.runs import gone, jobmeta, lifecycle, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Run
from rlhf_launch.runs.status import RunStatus
from rlhf_launch.util.poll import poll_until

BOUND = 60.0


@dataclass
class Stopped:
    run_id: str
    job_id: str | None
    job_status: str
    bound: float
    seconds: float = 0.0
    left: list[gone.Leftovers] = field(default_factory=list)
    already: bool = False  # the run was stopped before this stop: this one only checked again
    stopped_at: float | None = None  # when it was first stopped (epoch seconds; None: unknown)
    finished: str | None = None  # the run had ended on its own (SUCCEEDED): kept so, only checked

    @property
    def gone(self) -> bool:
        return not self.left

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "job_status": self.job_status,
            "status": self.finished or "STOPPED",
            "gone": self.gone,
            "seconds": round(self.seconds, 2),
            "bound": self.bound,
            "left": [line for lo in self.left for line in lo.describe()],
            "already_stopped": self.already,
            "stopped_at": self.stopped_at,
        }


def _stop_until_terminal(jobs: Jobs, job_ids: list[str], deadline: float) -> None:
    """Ask Ray to stop each job until Ray reports it terminal (or the deadline)."""

    def all_ended() -> bool:
        ended = True
        for job_id in job_ids:
            try:
                if jobs.status(job_id).is_terminal():
                    continue
                jobs.stop(job_id)
            except JobNotFound:
                continue
            except ClusterError:
                pass  # unknown: ask again
            ended = False
        return ended

    poll_until(all_ended, max(0.0, deadline - time.monotonic()), 0.3)


def _in_background(work: Callable[[], list[dict[str, Any]]]) -> Future[list[dict[str, Any]]]:
    """Run `work` in a daemon thread: `stop` never waits for it past its bound (an executor
    would, at exit), and Ctrl-C is not held up by it."""
    result: Future[list[dict[str, Any]]] = Future()

    def target() -> None:
        try:
            result.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the result
            result.set_exception(exc)

    threading.Thread(target=target, daemon=True, name="rlhf-launch-first-sweep").start()
    return result


def _ahead(first: Future[list[dict[str, Any]]], covers: set[str], sweeper: gone.Sweeper, deadline: float) -> gone.Sweeper:
    """A sweeper whose first call, for jobs the sweep started ahead covers, is that sweep
    (waited for until the deadline: past it the result is unknown, not "nothing left"). No
    fresh sweep starts past the deadline (one takes seconds): what the last sweep left alive
    is what is left, and with no sweep at all that is unknown."""
    used = False
    last: list[dict[str, Any]] | None = None

    def sweep(run_ids: Sequence[str], job_ids: Sequence[str]) -> list[dict[str, Any]]:
        nonlocal used, last
        if not used and set(job_ids) <= covers:
            used = True
            try:
                last = first.result(timeout=max(0.1, deadline - time.monotonic()))
            except FutureTimeout:
                raise ClusterTimeout("the sweep did not finish within the bound") from None
            return last
        if deadline - time.monotonic() < 1:
            if last is None:
                raise ClusterTimeout("no time left in the bound for another sweep")
            return last
        last = sweeper(run_ids, job_ids)
        return last

    return sweep


def _late(job_ids: set[str]) -> list[gone.Leftovers]:
    why = "submitted while the run was stopped; not proven gone within the bound"
    return [gone.Leftovers(job_id, unknown=why) for job_id in sorted(job_ids)]


def first_stopped_at(jobs: Jobs, run: Run) -> float | None:
    """When a stopped run was stopped: its stop marker's start on the cluster, else the end of
    its last attempt. None: unknown."""
    number = max((a.number for a in run.attempts), default=0)
    try:
        start = jobs.info(jobmeta.stop_marker_id(run.run_id, number)).start_time
    except ClusterError:
        start = None
    if start:
        return start
    return run.current.ended if run.current else None


def stop(run: Run, jobs: Jobs, dashboard: Dashboard, sweeper: gone.Sweeper, bound: float = BOUND) -> Stopped:
    started = time.monotonic()
    requested = time.time()
    deadline = started + bound
    before = runs.load(run.run_id) if runs.path_of(run.run_id).exists() else run
    finished = str(before.status) if before.status is RunStatus.SUCCEEDED and not before.stopped_by_user else None
    already = finished is None and (before.stopped_by_user or before.status is RunStatus.STOPPED)
    stopped_at = first_stopped_at(jobs, before) if already else None
    if finished is None:  # a run that succeeded stays SUCCEEDED: it is only checked for leftovers
        run = lifecycle.mark_stopped(run.run_id)
        lifecycle.stop_on_cluster(jobs, run)
    else:
        stopped_at = before.current.ended if before.current else None
    supervisors = [info.job_id for info in supervisor.supervisor_jobs(run, jobs)]
    run = lifecycle.observe(runs.load(run.run_id), jobs)
    live = [a.job_id for a in run.attempts if not a.status.is_terminal()]
    for job_id in supervisors + live:  # all at once: Ray takes seconds to end each
        try:
            jobs.stop(job_id)
        except ClusterError:
            pass  # asked again below
    covers = set(supervisors) | {a.job_id for a in run.attempts}
    swept: set[str] = set()
    left: list[gone.Leftovers] = []
    first = _in_background(lambda: sweeper([run.run_id], sorted(covers)))
    sweep = _ahead(first, covers, sweeper, deadline)
    _stop_until_terminal(jobs, supervisors + live, deadline)
    rounds = 0
    while True:
        run = lifecycle.observe(runs.load(run.run_id), jobs)  # attempts submitted before the supervisor ended
        attempts = [a.job_id for a in run.attempts]
        if rounds and swept >= set(attempts):
            break
        if rounds and time.monotonic() >= deadline:  # one round always runs: nothing is gone unproven
            left += _late(set(attempts) - swept)
            break
        if finished is None:
            lifecycle.stop_on_cluster(jobs, run)  # the newest attempt is the stopped one
        _stop_until_terminal(jobs, [a.job_id for a in run.attempts if not a.status.is_terminal()], deadline)
        left = gone.wait_gone(jobs, dashboard, attempts + supervisors, sweep, max(1.0, deadline - time.monotonic()), runs=[run.run_id])
        swept |= set(attempts)
        rounds += 1
    current = run.current
    status = str(current.status) if current else "NONE"
    if stopped_at is None and finished is None and not already:  # stopped now: when it was asked
        stopped_at = requested
    return Stopped(
        run.run_id, current.job_id if current else None, status, bound, time.monotonic() - started, left, already, stopped_at, finished
    )
