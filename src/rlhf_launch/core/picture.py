"""The placement as a picture: one row per node, one cell per GPU, each cell the role (and
vLLM engine) that Ray's PACK placement puts there, in the order OpenRLHF asks. Pure.

Within a node the cells are handed to the groups in the order the groups are placed. A
group's bundles are numbered in node order (as OpenRLHF's get_bundle_indices sorts them), so
vLLM engine k holds bundles k*TP .. (k+1)*TP-1 of its group. Roles that share a group share
its cells: colocated actor+ref is `AR`, colocate-all `ACRMV0`.
"""

from __future__ import annotations

import math

from rlhf_launch.core.placement import NodeFree, declared_nodes, simulate
from rlhf_launch.core.plan import ROLE_ORDER, GroupPlan, Plan

IDLE = "."
CODES = {"actor": "A", "critic": "C", "ref": "R", "reward": "M", "vllm": "V"}
NAMES = {"actor": "actor", "critic": "critic", "ref": "ref", "reward": "reward"}
HEADER = "placement (Ray PACK, in OpenRLHF's order):"


def _group_code(group: GroupPlan) -> str:
    """The roles of a group other than vLLM, as letters in the usual role order."""
    roles = sorted((r for r in group.roles if r != "vllm"), key=ROLE_ORDER.index)
    return "".join(CODES.get(r, "?") for r in roles)


def _label(group: GroupPlan) -> str:
    return "+".join("vLLM" if r == "vllm" else r for r in group.roles)


def _cells(group: GroupPlan, per_node: dict[str, int], order: list[str]) -> dict[str, list[str]]:
    """node_id -> the cell text of each bundle of `group` on that node, in bundle order."""
    code = _group_code(group)
    vllm = "vllm" in group.roles
    chunk = max(1, group.chunk)
    out: dict[str, list[str]] = {}
    index = 0
    for node_id in order:
        cells = out.setdefault(node_id, [])
        for _ in range(per_node.get(node_id, 0)):
            cells.append(code + (f"V{index // chunk}" if vllm else ""))
            index += 1
    return out


def _node_labels(nodes: list[NodeFree]) -> list[str]:
    labels = [n.ip or n.node_id for n in nodes]
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    if all(count == 1 for count in seen.values()):
        return labels
    # Several raylets behind one address: tell them apart by node id.
    return [f"{label} ({n.node_id[:8]})" if seen[label] > 1 else label for label, n in zip(labels, nodes, strict=True)]


def draw(plan: Plan, nodes: list[NodeFree] | None = None) -> list[str]:
    """Lines of text: the header, a row per node, what could not be placed, and a legend."""
    if nodes is None:
        nodes = declared_nodes(plan.cluster_nodes, plan.cluster_gpus_per_node)
    order = [n.node_id for n in nodes]
    sim = simulate(plan.groups, nodes)
    rows: dict[str, list[str]] = {n.node_id: [] for n in nodes}
    for placement in sim.placements:
        if not placement.placed:
            continue
        for node_id, cells in _cells(placement.group, placement.per_node, order).items():
            rows[node_id].extend(cells)
    for node in nodes:
        total = max(0, int(math.floor(node.gpus + 1e-9)))
        rows[node.node_id].extend([IDLE] * (total - len(rows[node.node_id])))

    width = max((len(cell) for cells in rows.values() for cell in cells), default=1)
    labels = _node_labels(nodes)
    label_width = max((len(label) for label in labels), default=0)
    lines = [HEADER]
    for node, label in zip(nodes, labels, strict=True):
        cells = rows[node.node_id]
        body = " ".join(cell.ljust(width) for cell in cells).rstrip() if cells else "(no GPUs)"
        lines.append(f"  {label.ljust(label_width)}  {body}")
    if not nodes:
        lines.append("  (no nodes)")

    for placement in sim.placements:
        if placement.placed and placement.split_engines:
            lines.append(
                f"  {placement.split_engines} vLLM engine(s) of {_label(placement.group)} span nodes: "
                f"their TP {placement.group.chunk} workers talk across the network"
            )
    failed = sim.failed
    if failed is not None:
        group = failed.group
        lines.append(f"  {_label(group)}: {group.bundles} GPUs cannot be placed (would wait forever)")
        rest = plan.groups[len(sim.placements) :]
        if rest:
            names = ", ".join(_label(g) for g in rest)
            lines.append(f"  {names}: not reached (OpenRLHF waits on {_label(group)} first)")

    used = {r for g in plan.groups for r in g.roles}
    legend = [f"{CODES[r]} {NAMES[r]}" for r in ROLE_ORDER if r in used and r != "vllm"]
    if "vllm" in used:
        legend.append(f"Vn vLLM engine n (TP {plan.vllm_tp})")
    if any(IDLE in cells for cells in rows.values()):
        legend.append(f"{IDLE} idle")
    lines.append("  " + "  ".join(legend))
    return lines
