"""Which nodes of a Ray cluster died, when and why, told plainly. Pure: it reads rows of Ray's
node table as the state API lists them (`/api/v0/nodes?detail=1`: node_id, node_ip,
is_head_node, state ALIVE/DEAD, state_message from the GCS death info, resources_total,
start_time_ms, end_time_ms) and writes the sentences `status`, `runs`, `watch` and the
supervisor print ("node 127.0.0.4 (id 3f2a1b2c) died 12:03:41: Unexpected termination ...")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlhf_launch.util.when import moment

ID_CHARS = 8  # of a node id shown (Ray's ids are 56 hex characters; 8 tell nodes apart)
SHOWN = 3  # dead nodes named in one line


@dataclass(frozen=True)
class DeadNode:
    node_id: str
    ip: str
    is_head: bool = False
    gpus: float = 0.0
    died_at: float | None = None  # epoch seconds (Ray notes it up to ~30 s after an unexpected death)
    reason: str = ""  # Ray's state message: "Unexpected termination: health check failed ..."

    def text(self, now: float | None = None) -> str:
        """`node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died 12:03:41: <reason>`."""
        what = f"id {self.node_id[:ID_CHARS]}" + (f", {self.gpus:g} GPUs" if self.gpus else "") + (", head" if self.is_head else "")
        when = f" {moment(self.died_at, now)}" if self.died_at else ""
        why = f": {self.reason}" if self.reason else ""
        return f"node {self.ip or '?'} ({what}) died{when}{why}"

    def as_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "ip": self.ip,
            "is_head": self.is_head,
            "gpus": self.gpus,
            "died_at": self.died_at,
            "reason": self.reason,
        }


def _seconds(ms: Any) -> float | None:
    try:
        value = float(ms)
    except (TypeError, ValueError):
        return None
    return value / 1000 if value > 0 else None


def dead_nodes(rows: Iterable[Mapping[str, Any]]) -> list[DeadNode]:
    """The DEAD nodes among state-API node rows, the most recent death first."""
    out = []
    for row in rows:
        if str(row.get("state", "")).upper() != "DEAD":
            continue
        total = row.get("resources_total") or {}
        out.append(
            DeadNode(
                node_id=str(row.get("node_id") or ""),
                ip=str(row.get("node_ip") or ""),
                is_head=bool(row.get("is_head_node")),
                gpus=float(total.get("GPU", 0) or 0),
                died_at=_seconds(row.get("end_time_ms")),
                reason=" ".join(str(row.get("state_message") or "").split()),
            )
        )
    return sorted(out, key=lambda n: (-(n.died_at or 0.0), n.ip, n.node_id))


def alive_gpus(rows: Iterable[Mapping[str, Any]]) -> float:
    """GPUs of the ALIVE nodes among state-API node rows."""
    return sum(float((r.get("resources_total") or {}).get("GPU", 0) or 0) for r in rows if str(r.get("state", "")).upper() == "ALIVE")


def died_since(dead: Sequence[DeadNode], since: float | None) -> list[DeadNode]:
    """The nodes that died at or after `since` (epoch seconds; None: all). A death Ray has no
    time for counts (it may not have noted it yet)."""
    if since is None:
        return list(dead)
    return [n for n in dead if n.died_at is None or n.died_at >= since]


def deaths_text(dead: Sequence[DeadNode], now: float | None = None, shown: int = SHOWN) -> str:
    """`node A (...) died 12:03:41; node B ...` (the most recent `shown`, then how many more)."""
    text = "; ".join(n.text(now) for n in dead[:shown])
    more = len(dead) - shown
    return text + (f"; and {more} more dead node{'s' if more > 1 else ''}" if more > 0 else "")


def waiting_text(need: float, have: float, dead: Sequence[DeadNode], now: float | None = None) -> str:
    """What a run waiting for GPUs waits for, and why they are gone:
    `waiting for 16 GPUs (alive nodes have 8): node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died 12:03:41`."""
    head = f"waiting for {need:g} GPUs (alive nodes have {have:g})"
    return f"{head}: {deaths_text(dead, now)}" if dead else f"{head}: no node died since the attempt started"
