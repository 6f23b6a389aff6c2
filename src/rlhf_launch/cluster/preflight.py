"""Live preflight: can this plan be placed on this cluster right now? Pure: plan + snapshot.

Simulates Ray's PACK placement of each of OpenRLHF's groups, in the trainer's order, on the
GPUs and CPUs that are free now, so a layout that would wait forever at `pg.ready()` is
refused before submission, naming the role that does not fit and what is free.
"""

from __future__ import annotations

import math
from importlib import metadata

from rlhf_launch.cluster.snapshot import Snapshot
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.placement import NodeFree, simulate
from rlhf_launch.core.plan import Plan
from rlhf_launch.util import versions


def local_ray_version() -> str | None:
    """The Ray installed where the launcher runs (read from metadata, not imported)."""
    try:
        return metadata.version("ray")
    except metadata.PackageNotFoundError:
        return None


def _major(version: str) -> int | str:
    parsed = versions.maybe(version)
    return parsed.major if parsed is not None else version.split(".")[0]


def ray_versions(local: str | None, cluster: str, openrlhf_pin: str | None = None) -> list[Finding]:
    out = []
    if local and local != cluster:
        if _major(local) != _major(cluster):
            out.append(
                error("ray", f"this machine runs ray {local} but the cluster runs ray {cluster}", f"pip install 'ray[default]=={cluster}'")
            )
        else:
            out.append(
                warning("ray", f"this machine runs ray {local}, the cluster ray {cluster}", f"pip install 'ray[default]=={cluster}'")
            )
    if openrlhf_pin and openrlhf_pin != cluster:
        out.append(warning("ray", f"the target openrlhf release pins ray {openrlhf_pin}; the cluster runs {cluster}"))
    return out


def _free_by_node(snapshot: Snapshot) -> str:
    parts = [f"{n.ip}: {n.gpus_free:g}/{n.gpus:g} GPUs, {n.cpus_free:g} CPUs" for n in snapshot.nodes]
    return "; ".join(parts) or "no alive nodes"


def _running(snapshot: Snapshot) -> bool:
    return any(not j.status.is_terminal() for j in snapshot.jobs)


def _cpus_short(plan: Plan, snapshot: Snapshot) -> Finding | None:
    """The refusal when CPUs, not GPUs, are what is missing: every bundle is {"GPU": 1, "CPU": 1},
    so a node started with fewer CPUs than GPUs (ray start --num-cpus 4 on an 8-GPU node) leaves
    GPUs that no bundle can take. None when the plan would not fit with unlimited CPUs either."""
    unlimited = [NodeFree(n.node_id, n.ip, n.gpus, math.inf) for n in snapshot.free_nodes()]
    if simulate(plan.groups, unlimited).failed is not None:
        return None
    nodes = sorted(snapshot.nodes, key=lambda n: (not n.is_head, n.ip, n.node_id))
    few = [n for n in nodes if n.cpus < n.gpus]
    per_node = "; ".join(
        f"{n.ip}: {n.cpus:g} CPUs ({n.cpus_free:g} free) for {n.gpus:g} GPUs ({n.gpus_free:g} free)" for n in (few or nodes)
    )
    need = plan.gpus_required
    if few:
        most = max(int(math.ceil(n.gpus)) for n in few)
        return error(
            "placement.cpus",
            f"the layout needs {need} bundles of 1 GPU + 1 CPU, and the GPUs are there but the CPUs are not: "
            f"{len(few)} of {len(nodes)} nodes have fewer CPUs than GPUs ({per_node})",
            f"start Ray on each node with --num-cpus >= its GPUs (rlhf-launch up/join --num-cpus {most}, or ray start --num-cpus {most})",
        )
    return error(
        "placement.cpus",
        f"the layout needs {need} bundles of 1 GPU + 1 CPU, and the GPUs are free but too few CPUs are: {per_node}",
        "wait for the jobs holding CPUs to end (rlhf-launch runs), or shrink the layout",
    )


def placement(plan: Plan, snapshot: Snapshot) -> list[Finding]:
    out: list[Finding] = []
    if not snapshot.nodes:
        return [error("cluster", f"the cluster at {snapshot.address} has no alive nodes", "start workers with rlhf-launch join")]
    need = plan.gpus_required
    if need > snapshot.gpus:
        out.append(
            error(
                "placement",
                f"the layout needs {need} GPUs ({plan.breakdown()}) but the cluster has {snapshot.gpus:g} "
                f"in {len(snapshot.nodes)} alive nodes",
                "add nodes (rlhf-launch join) or shrink the layout",
            )
        )
    sim = simulate(plan.groups, snapshot.free_nodes())
    failed = sim.failed
    if failed is not None and not out:
        short = _cpus_short(plan, snapshot)
        if short is not None:
            return [*out, short]
        placed = sum(p.group.bundles for p in sim.placements if p.placed)
        free_now = sum(min(n.gpus, n.cpus) for n in sim.free_after)
        roles = "+".join(failed.group.roles)
        out.append(
            error(
                f"placement.{failed.group.roles[0]}",
                f"{roles} needs {failed.group.bundles} bundles of 1 GPU + 1 CPU but after the {placed} GPUs placed "
                f"before it only {free_now:g} can be placed; free now: {_free_by_node(snapshot)}",
                "wait for running jobs to end (rlhf-launch runs), or shrink the layout" if _running(snapshot) else "shrink the layout",
            )
        )
    for group in sim.placements:
        if group.placed and group.split_engines:
            out.append(
                warning(
                    "placement.vllm",
                    f"{group.split_engines} vLLM engine(s) would have TP workers on two nodes with the GPUs free now",
                )
            )
    declared = plan.cluster_gpus
    if abs(snapshot.gpus - declared) >= 1:
        out.append(
            warning(
                "cluster",
                f"the config declares {plan.cluster_nodes}x{plan.cluster_gpus_per_node} = {declared} GPUs; "
                f"the live cluster has {snapshot.gpus:g} in {len(snapshot.nodes)} nodes",
            )
        )
    return out


def check(plan: Plan, snapshot: Snapshot, local_ray: str | None, openrlhf_pin: str | None = None) -> list[Finding]:
    return [*ray_versions(local_ray, snapshot.ray_version, openrlhf_pin), *placement(plan, snapshot)]
