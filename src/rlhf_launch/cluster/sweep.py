"""Run the sweep (cluster/probes/sweep.py) on every node: as a short probe job from
anywhere, or as tasks from a process that is itself a Ray driver (the supervisor).
Both kill the actors that would still start the jobs' entrypoints, end the processes that
carry the run or job markers, and return the processes left alive."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rlhf_launch.cluster import probe
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterRefused, ClusterTimeout

GRACE = 5.0
PROBE_DEADLINE = 120.0


def _left(nodes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**proc, "node": entry.get("ip") or node_id[:8]} for node_id, entry in nodes.items() for proc in entry.get("left", [])]


def by_probe_job(jobs: Jobs, runs: Sequence[str], job_ids: Sequence[str], grace: float = GRACE) -> list[dict[str, Any]]:
    spec = {"runs": list(runs), "jobs": list(job_ids), "grace": grace}
    ran = probe.run(jobs, "sweep.py", json.dumps(spec), PROBE_DEADLINE, "sweep")
    if not ran.result:
        raise ClusterRefused(f"the sweep job {ran.job_id} ended {ran.status} without a result")
    return _left(ran.result["nodes"])


def by_tasks(runs: Sequence[str], job_ids: Sequence[str], grace: float = GRACE) -> list[dict[str, Any]]:
    """From a connected Ray driver: no job to start, so it answers in well under a second.
    A node that does not answer (dead but not yet declared so, a task that cannot be placed)
    makes the result unknown (ClusterTimeout), never "nothing left"."""
    from rlhf_launch.cluster.probes import sweep

    try:
        sweep.kill_entrypoint_actors(list(job_ids))
        return _left(sweep.sweep_every_node(list(runs), list(job_ids), grace))
    except Exception as exc:  # noqa: BLE001 - ray's GetTimeoutError, NodeDiedError, TaskUnschedulableError, ...
        raise ClusterTimeout(f"the sweep did not complete on every node ({type(exc).__name__}: {str(exc)[:200]})") from None
