"""Proof that an attempt's trainer is gone, the condition for any (re)submission and for
`stop` to return.

An attempt is gone when, all at once:
1. its Ray job is terminal (or the cluster answers that it has no such job);
2. the actor Ray runs its entrypoint in is dead or absent: while it lives, the entrypoint
   may still start (Ray does not cancel a job whose runtime env is being set up, #28221);
3. no actor and no placement group of its driver's Ray job is alive;
4. no process that carries its marker (RLHF_LAUNCH_JOB) is left on any node.
Anything the cluster does not answer is unknown, and unknown is not gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster import state
from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.jobs import Jobs, JobStatus
from rlhf_launch.errors import ClusterError, JobNotFound
from rlhf_launch.util.poll import poll_until

# Kills the actors that would still start the given jobs' entrypoints, ends every process of
# the given runs / jobs on every node, and returns the processes left alive, each
# {"node": ip, "pid": int, "cmd": str, "job": id}.
Sweeper = Callable[[Sequence[str], Sequence[str]], list[dict[str, Any]]]


@dataclass
class Leftovers:
    job_id: str
    status: str = ""  # the job's status, "GONE" when the cluster has no such job
    entrypoint_actor: str = ""  # state of the actor that runs its entrypoint, "" if none/dead
    held: state.Held = field(default_factory=lambda: state.Held([], []))
    processes: list[dict[str, Any]] = field(default_factory=list)
    unknown: str = ""  # why it could not be checked (the cluster did not answer)

    @property
    def gone(self) -> bool:
        terminal = self.status == "GONE" or (self.status != "" and JobStatus(self.status).is_terminal())
        return not self.unknown and terminal and not self.entrypoint_actor and self.held.empty and not self.processes

    def describe(self) -> list[str]:
        if self.unknown:
            return [f"{self.job_id}: unknown ({self.unknown})"]
        out = []
        if self.status not in ("GONE", "") and not JobStatus(self.status).is_terminal():
            out.append(f"{self.job_id}: job still {self.status}")
        if self.entrypoint_actor:
            out.append(f"{self.job_id}: the actor that starts its entrypoint is {self.entrypoint_actor}")
        out += [f"{self.job_id}: {line}" for line in self.held.describe()]
        out += [f"{self.job_id}: process {p['pid']} on {p.get('node', '?')}: {p.get('cmd', '')[:120]}" for p in self.processes]
        return out

    def as_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "gone": self.gone, "left": self.describe()}


def check(jobs: Jobs, dashboard: Dashboard, job_id: str) -> Leftovers:
    """What of one job is still on the cluster (processes are the sweeper's business)."""
    left = Leftovers(job_id)
    try:
        try:
            info = jobs.info(job_id)
        except JobNotFound:
            left.status = "GONE"
            return left
        left.status = info.status.value
        actor = state.supervisor_actor(dashboard, job_id)
        if actor is not None and actor.get("state") != state.DEAD_ACTOR:
            left.entrypoint_actor = str(actor.get("state"))
        if info.driver_job_id:
            left.held = state.held_by(dashboard, info.driver_job_id)
    except ClusterError as exc:
        left.unknown = exc.message
    return left


def wait_gone(
    jobs: Jobs,
    dashboard: Dashboard,
    job_ids: Sequence[str],
    sweeper: Sweeper,
    timeout: float,
    *,
    runs: Sequence[str] = (),
    interval: float = 0.5,
) -> list[Leftovers]:
    """Sweep the jobs' processes and wait until every job is gone, or `timeout` passes.
    Returns what is left of each job that is not gone (empty: all gone)."""
    report: list[Leftovers] = []
    proven: set[str] = set()  # gone in an earlier round: a gone job does not come back

    def all_gone() -> bool:
        nonlocal report
        failed = ""
        pending = [j for j in job_ids if j not in proven]
        try:
            left = sweeper(runs, pending)  # also kills actors that would still start an entrypoint
        except ClusterError as exc:
            left, failed = [], exc.message
        checked = [check(jobs, dashboard, job_id) for job_id in pending]
        by_id = {c.job_id: c for c in checked}
        for proc in left:
            owner = by_id.get(proc.get("job", "")) or (checked[0] if checked else None)
            if owner is not None:
                owner.processes.append(proc)
        for c in checked:
            c.unknown = c.unknown or (f"could not sweep the nodes: {failed}" if failed else "")
        proven.update(c.job_id for c in checked if c.gone)
        report = [c for c in checked if not c.gone]
        return not report

    poll_until(all_gone, timeout, interval)
    return report
