"""Simulate Ray placing a plan's bundles on nodes, in OpenRLHF's order. Pure.

Ray's PACK policy (raylet bundle_scheduling_policy): take the node that scores best for one
bundle (the least-used-resources score: for each requested resource, (free - asked)/free,
summed), put as many of the remaining bundles there as fit, drop that node, repeat. If the
bundles run out of nodes the group is not placed at all and `ray.get(pg.ready())` in the
trainer waits forever. Each of OpenRLHF's groups is placed only after the previous one is.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from rlhf_launch.core.plan import GroupPlan


@dataclass
class NodeFree:
    node_id: str
    ip: str
    gpus: float
    cpus: float = math.inf


@dataclass(frozen=True)
class GroupPlacement:
    group: GroupPlan
    per_node: dict[str, int]  # node_id -> bundles placed there
    placed: bool
    split_engines: int = 0  # vLLM engines whose TP workers would span nodes


@dataclass
class Simulation:
    placements: list[GroupPlacement] = field(default_factory=list)
    free_after: list[NodeFree] = field(default_factory=list)

    @property
    def failed(self) -> GroupPlacement | None:
        return next((p for p in self.placements if not p.placed), None)


def _units(node: NodeFree) -> int:
    """How many {"GPU": 1, "CPU": 1} bundles still fit on the node."""
    return max(0, int(math.floor(min(node.gpus, node.cpus) + 1e-9)))


def _score(node: NodeFree) -> float:
    if _units(node) < 1:
        return -1.0
    score = (node.gpus - 1) / node.gpus
    if math.isfinite(node.cpus):
        score += (node.cpus - 1) / node.cpus
    return score


def _pack(bundles: int, nodes: list[NodeFree]) -> dict[str, int] | None:
    """Ray's loop picks the best-scoring node, fills it and drops it. Nodes not picked keep
    their score while one group is placed, so visiting them once in score order (stable:
    ties in node order) is the same walk in O(n log n)."""
    order = sorted((n for n in nodes if _score(n) >= 0), key=_score, reverse=True)
    remaining, taken = bundles, {}
    for node in order:
        if not remaining:
            break
        count = min(remaining, _units(node))
        taken[node.node_id] = count
        remaining -= count
    return None if remaining else taken


def _one_by_one(bundles: int, nodes: list[NodeFree]) -> dict[str, int] | None:
    """Separate single-GPU actors, each on the best-scoring node at that moment."""
    heap = [(-_score(n), i, NodeFree(n.node_id, n.ip, n.gpus, n.cpus)) for i, n in enumerate(nodes) if _score(n) >= 0]
    heapq.heapify(heap)
    taken: dict[str, int] = {}
    for _ in range(bundles):
        if not heap:
            return None
        _, i, node = heapq.heappop(heap)
        node.gpus -= 1
        node.cpus -= 1
        taken[node.node_id] = taken.get(node.node_id, 0) + 1
        if _score(node) >= 0:
            heapq.heappush(heap, (-_score(node), i, node))
    return taken


def split_engines(per_node: dict[str, int], chunk: int, order: list[str]) -> int:
    """Engines whose `chunk` consecutive bundles (sorted by node, as OpenRLHF's
    get_bundle_indices does) land on more than one node."""
    if chunk <= 1:
        return 0
    owners = [node for node in order for _ in range(per_node.get(node, 0))]
    return sum(1 for start in range(0, len(owners), chunk) if len(set(owners[start : start + chunk])) > 1)


def simulate(groups: tuple[GroupPlan, ...] | list[GroupPlan], nodes: list[NodeFree]) -> Simulation:
    """Place each group in order on a copy of `nodes`; stop at the first that cannot be placed."""
    free = [NodeFree(n.node_id, n.ip, n.gpus, n.cpus) for n in nodes]
    by_id = {n.node_id: n for n in free}
    order = [n.node_id for n in free]
    result = Simulation()
    for group in groups:
        per_node = _pack(group.bundles, free) if group.packed else _one_by_one(group.bundles, free)
        if per_node is None:
            result.placements.append(GroupPlacement(group, {}, placed=False))
            break
        for node_id, used in per_node.items():
            by_id[node_id].gpus -= used
            by_id[node_id].cpus -= used
        result.placements.append(GroupPlacement(group, per_node, placed=True, split_engines=split_engines(per_node, group.chunk, order)))
    result.free_after = free
    return result


def declared_nodes(nodes: int, gpus_per_node: int) -> list[NodeFree]:
    """The cluster a preset is sized for: identical empty nodes, CPUs not limiting."""
    return [NodeFree(node_id=f"node{i}", ip=f"node{i}", gpus=float(gpus_per_node)) for i in range(nodes)]
