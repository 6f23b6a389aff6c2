"""The search: every layout of space.py that the launcher itself accepts on the cluster, ranked.

Accepted means what `plan` accepts: OpenRLHF's start-up checks of the target release, the
launcher's rules, the memory estimate, and Ray PACK placement on the declared nodes (or, given
`nodes`, on the live cluster's free GPUs). Pruning before the full check: a role's sizes start
at the fewest GPUs on which its memory alone fits (probed once per role), so most candidates
that memory would refuse are never built.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.config import LaunchConfig, apply_overrides, validate
from rlhf_launch.core.findings import errors
from rlhf_launch.core.launch import Launch, extras, prepare
from rlhf_launch.core.placement import NodeFree, simulate
from rlhf_launch.core.plan import build_plan
from rlhf_launch.core.rules import deepspeed_batches
from rlhf_launch.core.shapes import attention_heads, tp_sizes
from rlhf_launch.errors import UserError
from rlhf_launch.fit.space import Layout, Space, sizes

Score = Callable[[Launch], float]  # seconds per step (lower is better)


def step_time(launch: Launch) -> float:
    """The default score: the estimate's seconds per step (unknown: last)."""
    return launch.estimate.step_s if launch.estimate is not None else float("inf")


@dataclass(frozen=True)
class Fitted:
    layout: Layout
    launch: Launch
    step_s: float

    @property
    def gpus(self) -> int:
        return self.launch.plan.gpus_required


@dataclass
class FitResult:
    layouts: list[Fitted]  # valid, best first
    tried: int = 0
    valid: int = 0
    seconds: float = 0.0
    refused: dict[str, int] = field(default_factory=dict)  # why candidates were refused: reason -> count
    truncated: bool = False  # the search stopped at its limit: some layouts were never tried


def changed(data: dict[str, Any], overrides: Sequence[str]) -> list[str]:
    """The overrides that change `data` (a config mapping): what a user must set."""
    from rlhf_launch.core.config import parse_override

    out = []
    for text in overrides:
        path, value = parse_override(text)
        node: Any = data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node != value and not (node is None and value in ([], False)):
            out.append(text)
    return out


def _config(base: dict[str, Any], overrides: Sequence[str]) -> LaunchConfig | None:
    try:
        return validate(apply_overrides(base, list(overrides)), "fit")
    except UserError:
        return None


def _memory_keys(launch: Launch) -> set[str]:
    return {f.key for f in errors(launch.findings) if f.reason == "memory"}


def _fewest(base: dict[str, Any], role: str, options: Sequence[int], shape: Callable[[int], list[str]]) -> int | None:
    """The fewest GPUs (or the smallest TP, for vllm) on which `role`'s memory alone fits."""
    for option in options:
        cfg = _config(base, shape(option))
        if cfg is None:
            continue
        launch = prepare(cfg)
        if not any(key == f"placement.{role}" or key.startswith(f"placement.{role}.") for key in _memory_keys(launch)):
            return option
    return None


def space_for(cfg: LaunchConfig, nodes: int, gpus_per_node: int) -> tuple[Space, dict[str, Any]]:
    """The search space of `cfg` on `nodes` x `gpus_per_node`, and the config as a mapping."""
    base = apply_overrides(cfg.model_dump(mode="json"), [f"cluster.nodes={nodes}", f"cluster.gpus_per_node={gpus_per_node}"])
    plan = build_plan(cfg)
    on = {r.role: r.enabled for r in plan.roles}
    heads = attention_heads(cfg.models)
    tps = tp_sizes(heads[0], heads[1], gpus_per_node) if heads else [t for t in (1, 2, 4, 8) if t <= gpus_per_node]
    tps = [t for t in tps if t & (t - 1) == 0]  # vLLM's custom all-reduce and OpenRLHF's examples: powers of two
    all_sizes = [s.gpus for s in sizes(nodes, gpus_per_node)]
    minimum: dict[str, int] = {}
    lone = ["placement.colocate=[]", "placement.vllm.enable_sleep=false", "deepspeed.enable_sleep=false", "deepspeed.adam_offload=true"]
    for role in ("actor", "critic", "ref", "reward"):
        if not on.get(role):
            continue

        def shaped(gpus: int, role: str = role) -> list[str]:
            n, g = (1, gpus) if gpus < gpus_per_node else (gpus // gpus_per_node, gpus_per_node)
            return [*lone, f"placement.{role}.nodes={n}", f"placement.{role}.gpus_per_node={g}"]

        fewest = _fewest(base, role, all_sizes, shaped)
        minimum[role] = fewest if fewest is not None else nodes * gpus_per_node + 1
    vllm_tp = _fewest(base, "vllm", tps, lambda tp: [*lone, "placement.vllm.engines=1", f"placement.vllm.tensor_parallel_size={tp}"])
    minimum["vllm"] = vllm_tp if vllm_tp is not None else gpus_per_node + 1
    offloads = (False, True)
    space = Space(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        critic=bool(on.get("critic")),
        ref=bool(on.get("ref")),
        reward=bool(on.get("reward")),
        tps=[t for t in tps if t >= minimum["vllm"]],
        minimum=minimum,
        offloads=offloads,
        utilization=cfg.placement.vllm.gpu_memory_utilization if not cfg.colocated("all") else 0.85,
        colocated_utilization=cfg.placement.vllm.gpu_memory_utilization if cfg.colocated("all") else 0.5,
    )
    return space, base


def search(
    cfg: LaunchConfig,
    nodes: int,
    gpus_per_node: int,
    score: Score,
    *,
    live: list[NodeFree] | None = None,
    keep: Callable[[Layout], bool] | None = None,
    limit: int = 8000,
) -> FitResult:
    """Every layout of `cfg` on the cluster that the launcher accepts, best (lowest score) first,
    ties to fewer GPUs. `keep` restricts the layouts tried (a re-plan keeps what a checkpoint
    allows); `live` places each on the live cluster's free GPUs too."""
    started = time.monotonic()
    space, base = space_for(cfg, nodes, gpus_per_node)
    settings = prepare(cfg).settings  # what OpenRLHF corrects does not depend on the layout
    seen: set[tuple[str, ...]] = set()
    result = FitResult(layouts=[])
    for layout in space.layouts():
        if layout.gpus > space.total or (keep is not None and not keep(layout)):
            continue
        overrides = tuple(layout.overrides())
        if overrides in seen:
            continue
        seen.add(overrides)
        if result.tried >= limit:
            result.truncated = True
            break
        result.tried += 1
        candidate = _config(base, overrides)
        if candidate is None:
            result.refused["config"] = result.refused.get("config", 0) + 1
            continue
        if settings is not None and errors(deepspeed_batches(candidate, build_plan(candidate, extras(settings)), settings)):
            result.refused["deepspeed_batch"] = result.refused.get("deepspeed_batch", 0) + 1  # cheap: before the full check
            continue
        launch = prepare(candidate)
        if not launch.ok:
            reason = next((f.reason or f.key for f in errors(launch.findings)), "rules")
            result.refused[reason] = result.refused.get(reason, 0) + 1
            continue
        if live is not None and simulate(launch.plan.groups, live).failed is not None:
            result.refused["placement (live)"] = result.refused.get("placement (live)", 0) + 1
            continue
        result.layouts.append(Fitted(layout, launch, score(launch)))
    result.valid = len(result.layouts)
    result.layouts.sort(key=lambda f: (round(f.step_s, 6), f.gpus, f.layout.describe()))
    result.seconds = time.monotonic() - started
    return result
