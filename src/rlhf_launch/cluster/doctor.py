"""Look at every alive node for `doctor` (cluster/probes/doctor.py): as a short probe job from
anywhere, or directly from a process that is itself a Ray driver (the supervisor). Either way
each node's look runs in that node's doctor agent, a small detached actor started once."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from rlhf_launch.cluster import probe
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterRefused, ClusterTimeout

USES = ("ckpt.py",)  # the probes whose functions the doctor probe calls
DEADLINE = 60.0  # the probe job: seconds to start, plus each node's look


@functools.cache
def agent_version() -> str:
    """The doctor code's version: agents started by another version are not reused."""
    text = probe.source("doctor.py", USES).encode()
    return hashlib.sha1(text).hexdigest()[:12]


def by_probe_job(jobs: Jobs, spec: dict[str, Any], deadline: float = DEADLINE) -> dict[str, Any]:
    """{node_id: facts} of every alive node (a node that did not answer: {"ip", "error"})."""
    ran = probe.run(jobs, "doctor.py", json.dumps({**spec, "version": agent_version()}), deadline, "doctor", uses=USES)
    if not ran.result:
        tail = ran.logs.strip().splitlines()[-1:] if ran.logs else []
        raise ClusterRefused(f"the doctor probe {ran.job_id} ended {ran.status} without a result" + (f": {tail[0][:300]}" if tail else ""))
    return dict(ran.result["nodes"])


def probe_code() -> dict[str, Any]:
    """The probe's source as it is shipped (its `uses` prepended), executed here: the functions
    a probe job would run, for a driver of its own (and the tests)."""
    namespace: dict[str, Any] = {"__name__": "rlhf_launch_doctor_probe"}
    exec(compile(probe.source("doctor.py", USES), str(Path(__file__).parent / "probes" / "doctor.py"), "exec"), namespace)  # noqa: S102
    return namespace


def in_driver(spec: dict[str, Any]) -> dict[str, Any]:
    """The same from a connected Ray driver. The probe's source is executed here once (it is
    standalone), so the agents run exactly the code a probe job would send."""
    try:
        return dict(probe_code()["every_node"]({**spec, "version": agent_version()}, agent_version(), float(spec.get("timeout", 30))))
    except Exception as exc:  # noqa: BLE001 - ray's GetTimeoutError, ActorDiedError, ...
        raise ClusterTimeout(f"the doctor's look did not complete on every node ({type(exc).__name__}: {str(exc)[:200]})") from None


def on_cluster(launch: Any, jobs: Any, snapshot: Any, *, deep: bool = False, skip: tuple[str, ...] = ()) -> Any:
    """doctor.examine through a probe job on the cluster of `jobs` (cluster.jobs.Jobs), placing
    the plan's host memory on the nodes of `snapshot` (cluster.snapshot.Snapshot)."""
    from rlhf_launch import doctor

    return doctor.examine(
        launch, lambda request: by_probe_job(jobs, request), deep=deep, skip=skip, nodes_free=doctor.free_nodes(snapshot.nodes)
    )
