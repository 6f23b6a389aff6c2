"""A ckpt_path's listing on every alive node, in about a second on a warm cluster.

Each node's doctor agent (probes/doctor.py), once asked for a path by a probe job, keeps
looking at it every second and prints `RLHF_LAUNCH_CKPT {"path", "at", "listing"}` to its
stdout when the listing changes and every 10 s anyway. The dashboard serves an actor's
stdout (`/api/v0/logs/file?actor_id=...&suffix=out`), so reading a listing is three kinds
of HTTP call (alive nodes, agents, each agent's log tail) and no Ray job. When a node has no
agent of this launcher's version, or its newest line for the path is older than FRESH
seconds (a watch not started, expired, or hung on a dead mount), the probe job asks the
agents directly (seconds) and starts their watch."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from rlhf_launch.cluster import doctor, probe
from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.cluster.probes.doctor import AGENT_PREFIX, CKPT_MARKER, WATCH_HEARTBEAT
from rlhf_launch.cluster.state import _rows
from rlhf_launch.errors import ClusterError, ClusterRefused

__all__ = ["FRESH", "by_probe_job", "from_logs", "latest_line", "read"]

FRESH = 3 * WATCH_HEARTBEAT  # seconds: a newer line than this proves the watch is alive
TAIL_LINES = 400  # of an agent's stdout: every watched path prints at least once per heartbeat
USES = ("ckpt.py", "doctor.py")


def latest_line(log: str, path: str) -> dict[str, Any] | None:
    """Pure: the newest watch line for `path` in an agent's stdout, or None."""
    for line in reversed(log.splitlines()):
        if not line.startswith(CKPT_MARKER + " "):
            continue
        try:
            data = json.loads(line[len(CKPT_MARKER) + 1 :])
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("path") == path and isinstance(data.get("listing"), dict):
            return data
    return None


def from_logs(
    nodes: list[dict[str, Any]], actors: list[dict[str, Any]], logs: dict[str, str], path: str, version: str, now: float
) -> dict[str, dict[str, Any]] | None:
    """Pure: {node_id: {"ip", "listing"}} for every alive node from its agent's log, or None
    when any node lacks a fresh answer (then ask by a probe job)."""
    prefix = f"{AGENT_PREFIX}{version}-"
    agent_of = {str(a.get("name"))[len(prefix) :]: str(a.get("actor_id")) for a in actors if str(a.get("name") or "").startswith(prefix)}
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        node_id = str(node.get("node_id") or "")
        actor_id = agent_of.get(node_id)
        found = latest_line(logs.get(actor_id, ""), path) if actor_id else None
        if found is None or not isinstance(found.get("at"), (int, float)) or now - float(found["at"]) > FRESH:
            return None
        out[node_id] = {"ip": node.get("node_ip", ""), "listing": found["listing"]}
    return out or None


def read(dashboard: Dashboard, path: str, version: str | None = None) -> dict[str, dict[str, Any]] | None:
    """The agents' watched listing of `path` on every alive node; None: not known fresh."""
    version = version or doctor.agent_version()
    try:
        nodes = _rows(dashboard, "nodes", {"state": "ALIVE"})
        actors = [a for a in _rows(dashboard, "actors", {"state": "ALIVE"}) if str(a.get("name") or "").startswith(AGENT_PREFIX + version)]
        wanted = [str(a.get("actor_id")) for a in actors]

        def tail(actor_id: str) -> str:
            text = dashboard.get(f"/api/v0/logs/file?actor_id={quote(actor_id)}&suffix=out&lines={TAIL_LINES}")
            return text if isinstance(text, str) else ""

        with ThreadPoolExecutor(max_workers=max(1, min(16, len(wanted)))) as pool:
            logs = dict(zip(wanted, pool.map(tail, wanted), strict=True))
    except ClusterError:
        return None
    return from_logs(nodes, actors, logs, path, version, time.time())


def by_probe_job(jobs: Jobs, path: str, deadline: float = 120.0) -> dict[str, dict[str, Any]]:
    """Ask every alive node's agent by a probe job (and start its watch of `path`)."""
    spec = {"path": path, "version": doctor.agent_version(), "timeout": min(60.0, deadline / 2)}
    ran = probe.run(jobs, "ckptwatch.py", json.dumps(spec), deadline, "ckpt", uses=USES)
    if not ran.result:
        raise ClusterRefused(f"could not list {path} on the cluster (probe job {ran.job_id} ended {ran.status})")
    failed = {entry.get("ip") or node_id[:8]: entry["error"] for node_id, entry in ran.result.items() if "error" in entry}
    if failed:
        raise ClusterRefused(f"could not list {path} on every node: " + "; ".join(f"{ip}: {why}" for ip, why in sorted(failed.items())))
    return dict(ran.result)
