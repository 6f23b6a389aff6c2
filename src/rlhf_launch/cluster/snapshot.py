"""What the live cluster has: alive nodes with total and free GPUs/CPUs, host memory, Ray
version, running jobs, and the nodes that died (core.nodes). Read from the dashboard's REST API (no ray import, seconds at most)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.jobs import JobInfo, Jobs
from rlhf_launch.core import nodes as node_table
from rlhf_launch.core.nodes import DeadNode
from rlhf_launch.core.placement import NodeFree

GIB = 1024**3


@dataclass(frozen=True)
class Node:
    node_id: str
    ip: str
    is_head: bool
    gpus: float
    gpus_free: float
    cpus: float
    cpus_free: float
    memory_gb: float | None = None
    memory_free_gb: float | None = None

    def free(self) -> NodeFree:
        return NodeFree(self.node_id, self.ip, self.gpus_free, self.cpus_free)


@dataclass(frozen=True)
class Snapshot:
    address: str
    ray_version: str
    nodes: tuple[Node, ...]
    jobs: tuple[JobInfo, ...] = ()
    dead: tuple[DeadNode, ...] = ()  # the most recent death first

    @property
    def gpus(self) -> float:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpus_free(self) -> float:
        return sum(n.gpus_free for n in self.nodes)

    def free_nodes(self) -> list[NodeFree]:
        # Head first, then by address: the order Ray's views list nodes in does not matter to PACK.
        return [n.free() for n in sorted(self.nodes, key=lambda n: (not n.is_head, n.ip, n.node_id))]

    def as_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "ray_version": self.ray_version,
            "nodes": [asdict(n) for n in self.nodes],
            "alive_nodes": len(self.nodes),
            "dead_nodes": [n.as_json() for n in self.dead],
            "gpus": self.gpus,
            "gpus_free": self.gpus_free,
            "cpus": sum(n.cpus for n in self.nodes),
            "cpus_free": sum(n.cpus_free for n in self.nodes),
            "running_jobs": [
                {"submission_id": j.job_id, "status": j.status, "entrypoint": j.entrypoint, "metadata": j.metadata}
                for j in self.jobs
                if not j.status.is_terminal()
            ],
        }


def _usage(dashboard: Dashboard) -> dict[str, dict[str, list[float]]]:
    data = dashboard.get("/api/cluster_status?format=0") or {}
    report = data.get("data", {}).get("clusterStatus", {}).get("loadMetricsReport", {}) or {}
    return report.get("usageByNode") or {}


def _memory(dashboard: Dashboard) -> dict[str, tuple[float, float]]:
    """node_id -> (total GiB, available GiB) of host memory."""
    data = dashboard.get("/nodes?view=summary") or {}
    out = {}
    for entry in data.get("data", {}).get("summary", []) or []:
        mem = entry.get("mem") or []
        node_id = (entry.get("raylet") or {}).get("nodeId")
        if node_id and len(mem) >= 2:
            out[node_id] = (mem[0] / GIB, mem[1] / GIB)
    return out


def read(dashboard: Dashboard, *, memory: bool = True) -> Snapshot:
    version = dashboard.version()["ray_version"]
    jobs = tuple(Jobs(dashboard).list())  # first call that needs the token: fails fast if it is wrong
    raw_nodes = node_rows(dashboard)
    usage = _usage(dashboard)
    mem = _memory(dashboard) if memory else {}
    nodes = []
    for raw in raw_nodes:
        if raw.get("state") != "ALIVE":
            continue
        node_id = raw["node_id"]
        total = raw.get("resources_total") or {}
        used = usage.get(node_id, {})
        gpus, cpus = float(total.get("GPU", 0)), float(total.get("CPU", 0))
        gpus_used = float(used.get("GPU", [0, gpus])[0])
        cpus_used = float(used.get("CPU", [0, cpus])[0])
        total_mem, free_mem = mem.get(node_id, (None, None))
        nodes.append(
            Node(
                node_id=node_id,
                ip=raw.get("node_ip", ""),
                is_head=bool(raw.get("is_head_node")),
                gpus=gpus,
                gpus_free=max(0.0, gpus - gpus_used),
                cpus=cpus,
                cpus_free=max(0.0, cpus - cpus_used),
                memory_gb=total_mem,
                memory_free_gb=free_mem,
            )
        )
    dead = tuple(node_table.dead_nodes(raw_nodes))
    return Snapshot(address=dashboard.address, ray_version=version, nodes=tuple(nodes), jobs=jobs, dead=dead)


def node_rows(dashboard: Dashboard) -> list[dict[str, Any]]:
    """Ray's node table, alive and dead nodes, with each death's time and reason (detail)."""
    listing = dashboard.get("/api/v0/nodes?limit=10000&detail=1") or {}
    return list(listing.get("data", {}).get("result", {}).get("result", []) or [])


def alive_gpus(dashboard: Dashboard) -> float:
    """GPUs of the alive nodes: one state-API call (what the supervisor polls)."""
    return node_table.alive_gpus(node_rows(dashboard))


def dead_nodes(dashboard: Dashboard) -> list[DeadNode]:
    """The nodes that died, the most recent first: one state-API call."""
    return node_table.dead_nodes(node_rows(dashboard))
