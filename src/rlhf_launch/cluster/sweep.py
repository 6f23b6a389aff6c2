"""Run the sweep (cluster/probes/sweep.py) on every node: as a short probe job from
anywhere, or directly from a process that is itself a Ray driver (the supervisor). Either
way each node's sweep runs in that node's sweeper agent, a small detached actor.
Both kill the actors that would still start the jobs' entrypoints, end the processes that
carry the run or job markers, and return the processes left alive."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlhf_launch.cluster import probe
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterRefused, ClusterTimeout

GRACE = 5.0
PROBE_DEADLINE = 120.0
MIN_PROBE_DEADLINE = 15.0  # a probe job takes seconds to start, plus the settle and the grace
STOP_SETTLE = 8.0  # Ray gives a stopped job 3 s (RAY_JOB_STOP_WAIT_TIME_S) to end on SIGTERM


@functools.cache
def agent_version() -> str:
    """The sweep code's version: agents started by another version are not reused."""
    return hashlib.sha1((Path(__file__).parent / "probes" / "sweep.py").read_bytes()).hexdigest()[:12]


def _left(nodes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**proc, "node": entry.get("ip") or node_id[:8]} for node_id, entry in nodes.items() for proc in entry.get("left", [])]


def by_probe_job(
    jobs: Jobs,
    runs: Sequence[str],
    job_ids: Sequence[str],
    grace: float = GRACE,
    settle: float = 0.0,
    deadline: float = PROBE_DEADLINE,
) -> list[dict[str, Any]]:
    """`settle`: seconds the probe gives Ray to end the jobs before it kills what would still
    start their entrypoints (a probe started while Ray still stops them). `deadline`: seconds
    the probe job may take (a caller with a bound of its own passes what is left of it)."""
    spec = {"runs": list(runs), "jobs": list(job_ids), "grace": grace, "settle": settle, "version": agent_version()}
    ran = probe.run(jobs, "sweep.py", json.dumps(spec), max(MIN_PROBE_DEADLINE, deadline), "sweep")
    if not ran.result:
        raise ClusterRefused(f"the sweep job {ran.job_id} ended {ran.status} without a result")
    return _left(ran.result["nodes"])


class NodeAgents:
    """The sweeper of a connected Ray driver (the supervisor): no job to start; the nodes'
    sweeper agents (probes/sweep.py `agents`, started once, shared with the probe job) answer
    in well under a second. A node that does not answer (dead but not yet declared so, an
    agent that cannot be placed) makes the result unknown (ClusterTimeout), never "nothing
    left"."""

    def __init__(self, grace: float = GRACE) -> None:
        self.grace = grace

    def warm(self) -> None:
        """Start the agents now, in the background, not when a trainer fails."""
        threading.Thread(target=self._warm_quietly, daemon=True).start()

    def _warm_quietly(self) -> None:
        try:
            self([], [])
        except ClusterTimeout:
            pass  # the first real sweep says it

    def __call__(self, runs: Sequence[str], job_ids: Sequence[str]) -> list[dict[str, Any]]:
        from rlhf_launch.cluster.probes import sweep

        try:
            sweep.kill_entrypoint_actors(list(job_ids))
            return _left(sweep.sweep_every_node(list(runs), list(job_ids), self.grace, agent_version()))
        except Exception as exc:  # noqa: BLE001 - ray's GetTimeoutError, ActorDiedError, ActorUnschedulableError, ...
            raise ClusterTimeout(f"the sweep did not complete on every node ({type(exc).__name__}: {str(exc)[:200]})") from None
