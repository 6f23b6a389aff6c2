"""`doctor`: is every node of the cluster ready for this run? One function, `examine`.

spec.py says what to look at (pure), cluster/doctor.py looks on every alive node at once (the
per-node agents), checks.py judges what came back (pure). `submit`, `resume` and the
supervisor run the same checks before they submit.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from rlhf_launch.core.launch import Launch
from rlhf_launch.core.memory import host_fix, host_sources_on
from rlhf_launch.doctor import checks, spec
from rlhf_launch.doctor.checks import NAMES, Node, Report
from rlhf_launch.errors import UserError

Look = Callable[[dict[str, Any]], dict[str, Any]]  # spec -> {node_id: facts}


def parse_skip(text: str | list[str] | None) -> tuple[str, ...]:
    """`--skip-check software,shm`: names from checks.NAMES (UserError naming the option)."""
    items = text if isinstance(text, list) else (text or "").split(",")
    names = tuple(sorted({i.strip() for item in items for i in item.split(",") if i.strip()}))
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise UserError(f"--skip-check: unknown check {', '.join(unknown)}", hint=f"the checks: {', '.join(NAMES)}")
    return names


def examine(launch: Launch, look: Look, *, deep: bool = False, skip: tuple[str, ...] = (), nodes_free: Any = None) -> Report:
    """Look at every alive node with `look` (cluster/doctor.by_probe_job or in_driver) and judge.
    nodes_free: the live snapshot's nodes (placement.NodeFree list) to place the plan's host
    memory on; default: the nodes that answered, with the GPUs Ray reported."""
    started = time.monotonic()
    request = spec.build(launch, nonce=uuid.uuid4().hex[:12], version="", deep=deep)
    facts = look(request)
    gpus = {n.node_id: n.gpus for n in nodes_free or []}
    nodes = [
        Node(node_id, str(entry.get("ip", "")), entry, gpus.get(node_id))
        for node_id, entry in sorted(facts.items(), key=lambda kv: str(kv[1].get("ip", "")))
    ]
    sources = host_sources_on(launch.memory, launch.plan, nodes_free) if launch.memory is not None and nodes_free else {}
    host_need = {node: sum(parts.values()) for node, parts in sources.items()}
    fixes = {node: host_fix(parts) for node, parts in sources.items()}
    report = checks.judge(spec.needs(launch), nodes, host_need=host_need, host_fix=fixes, skip=skip, seconds=time.monotonic() - started)
    return report


def free_nodes(nodes: Any) -> list[Any]:
    """The live snapshot's nodes as placement sees an empty cluster: every GPU and CPU."""
    from rlhf_launch.core.placement import NodeFree

    ordered = sorted(nodes, key=lambda n: (not n.is_head, n.ip, n.node_id))
    return [NodeFree(n.node_id, n.ip, n.gpus, n.cpus) for n in ordered]


def skipped_findings(skip: tuple[str, ...]) -> list[Any]:
    """A warning for every check skipped on purpose (`--skip-check`)."""
    from rlhf_launch.core.findings import warning

    looks = {c.name: c.looks_at for c in checks.CHECKS}
    return [warning(f"doctor.{name}", f"check skipped (--skip-check): {looks[name]} not looked at") for name in skip]
