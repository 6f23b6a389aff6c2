"""Ray's state API, served by the dashboard: actors, placement groups and driver-log tails.

What is alive for a Ray job (by its driver's hex job id), and whether the supervisor actor
Ray starts for a submitted job (which sets up its runtime env and then runs the entrypoint)
is still alive: while it is, the entrypoint may still start, whatever the job's status says.
Reads only; raises ClusterError like every dashboard call (unknown is not dead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.probes.sweep import AGENT_PREFIX  # each node's sweeper agent: an actor of no run

LIMIT = 10000
DEAD_ACTOR = "DEAD"
REMOVED_GROUP = "REMOVED"


def supervisor_actor_name(job_id: str) -> str:
    """The name Ray gives the actor that runs a submitted job's entrypoint."""
    return f"_ray_internal_job_actor_{job_id}"


def _rows(dashboard: Dashboard, kind: str, filters: dict[str, str], detail: bool = False) -> list[dict[str, Any]]:
    query = f"limit={LIMIT}" + ("&detail=1" if detail else "")
    for key, value in filters.items():
        query += f"&filter_keys={quote(key)}&filter_predicates=%3D&filter_values={quote(value)}"
    data = dashboard.get(f"/api/v0/{kind}?{query}") or {}
    rows = (data.get("data") or {}).get("result") or {}
    return list(rows.get("result") or []) if isinstance(rows, dict) else []


@dataclass(frozen=True)
class Held:
    """What a Ray job still holds: live actors and placement groups not yet removed."""

    actors: list[dict[str, Any]]
    groups: list[dict[str, Any]]

    @property
    def empty(self) -> bool:
        return not self.actors and not self.groups

    def describe(self) -> list[str]:
        out = [
            f"actor {a.get('class_name', '?')} pid {a.get('pid')} on node {str(a.get('node_id', ''))[:8]} ({a.get('state')})"
            for a in self.actors
        ]
        out += [f"placement group {str(g.get('placement_group_id', ''))[:12]} ({g.get('state')})" for g in self.groups]
        return out


def held_by(dashboard: Dashboard, driver_job_id: str) -> Held:
    """Not the nodes' sweeper agents a supervisor started: they belong to no run."""
    actors = [
        a
        for a in _rows(dashboard, "actors", {"job_id": driver_job_id})
        if a.get("state") != DEAD_ACTOR and not str(a.get("name") or "").startswith(AGENT_PREFIX)
    ]
    groups = [g for g in _rows(dashboard, "placement_groups", {"creator_job_id": driver_job_id}) if g.get("state") != REMOVED_GROUP]
    return Held(actors, groups)


def supervisor_actor(dashboard: Dashboard, job_id: str) -> dict[str, Any] | None:
    """The newest state of the actor Ray runs a submitted job in, or None if there is none."""
    rows = _rows(dashboard, "actors", {"name": supervisor_actor_name(job_id)})
    alive = [r for r in rows if r.get("state") != DEAD_ACTOR]
    newest = alive or rows
    return newest[0] if newest else None


def dead_actors(dashboard: Dashboard, driver_job_id: str) -> list[dict[str, Any]]:
    """The job's dead actors with their death causes (for diagnosis)."""
    return [a for a in _rows(dashboard, "actors", {"job_id": driver_job_id}, detail=True) if a.get("state") == DEAD_ACTOR]


def pending_groups(dashboard: Dashboard, driver_job_id: str) -> list[dict[str, Any]]:
    return [g for g in _rows(dashboard, "placement_groups", {"creator_job_id": driver_job_id}, detail=True) if g.get("state") == "PENDING"]


def driver_log_tail(dashboard: Dashboard, job_id: str, node_id: str, lines: int = 2000) -> str:
    """The last `lines` lines of a submitted job's driver log, read on the node it runs on."""
    text = dashboard.get(f"/api/v0/logs/file?node_id={quote(node_id)}&submission_id={quote(job_id)}&lines={lines}")
    return text if isinstance(text, str) else ""
