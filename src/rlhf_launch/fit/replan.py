"""Re-plan a run onto the nodes that are left after one was lost. Pure: a config, the live
nodes and what the checkpoint pins in; a new layout (or a refusal saying why) out.

What a resumed OpenRLHF run can change (0.11.2 and DeepSpeed's loader):
- vLLM engines hold no training state: the trainer rebuilds them from the model path and
  broadcasts the actor's weights, so fewer or smaller engines need no checkpoint change;
- ref and reward load from their model paths: they may move and resize freely;
- the actor's and critic's ZeRO checkpoints pin their data-parallel size: DeepSpeed refuses
  one saved at another ("The checkpoint being loaded used a DP world size of X but the current
  world size is Y"). A new DP size needs the checkpoint converted to a universal one
  (deepspeed.checkpoint.ds_to_universal) and the trainer's universal-load flag.

So, in order of preference: (1) a layout that keeps the actor's and critic's DP sizes (and
Adam offload, and whether everything is colocated: under colocate_all the engines are tied to
the actor's GPUs); (2) one that changes them, converting the checkpoint first. Both keep the
global batch (train_batch_size, rollout_batch_size) as it is: only a micro batch may shrink,
where that is what makes the batch valid at the new DP size. The best of a tier is the one
`fit` ranks first (estimated step time, ties to fewer GPUs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rlhf_launch.core.config import LaunchConfig, apply_overrides, validate
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.errors import UserError
from rlhf_launch.fit.search import FitResult, Fitted, Score, search, step_time
from rlhf_launch.fit.space import Layout
from rlhf_launch.util.when import moment

TRAINED = ("actor", "critic")  # the roles whose ZeRO checkpoints pin a DP size


@dataclass(frozen=True)
class CheckpointFacts:
    """What the run's latest checkpoint pins: each trained role's DP size when it was saved
    (None: that role has no checkpoint, or the run none yet: any size loads)."""

    actor_dp: int | None
    critic_dp: int | None = None
    step: int | None = None

    def dp(self, role: str) -> int | None:
        return self.actor_dp if role == "actor" else self.critic_dp if role == "critic" else None


def data_parallel(launch: Launch, role: str) -> int | None:
    """A role's DP size in a launch: its GPUs / ring attention / DeepSpeed TP (None: off)."""
    rp = launch.plan.role(role)
    if not rp.enabled:
        return None
    extras = launch.plan.extras
    return rp.gpus // max(1, extras.ring_attn_size * extras.ds_tensor_parallel_size)


def facts_of(launch: Launch, step: int | None = None) -> CheckpointFacts:
    """The facts of a checkpoint the run saved with this launch's layout."""
    return CheckpointFacts(data_parallel(launch, "actor"), data_parallel(launch, "critic"), step)


@dataclass(frozen=True)
class Replan:
    """The new layout. `convert`: the roles whose checkpoint must become universal first."""

    fitted: Fitted
    overrides: tuple[str, ...]  # onto the run's config: cluster shape, layout, micro batch, universal load
    convert: tuple[str, ...]
    old: Launch
    tier: Literal["same_dp", "new_dp"]

    @property
    def launch(self) -> Launch:
        return self.fitted.launch

    def config(self, base: dict[str, Any]) -> LaunchConfig:
        return validate(apply_overrides(base, list(self.overrides)), "re-plan")


@dataclass(frozen=True)
class Refusal:
    reason: str


def _dp(layout: Layout, role: str, ring_tp: int) -> int | None:
    size = layout.actor if role == "actor" else layout.critic
    return size.gpus // ring_tp if size is not None else None


def _cluster_shape(live: Sequence[NodeFree]) -> tuple[int, int]:
    with_gpus = [n for n in live if n.gpus >= 1]
    return len(with_gpus), int(max((n.gpus for n in with_gpus), default=0))


def _micro_options(micro: int) -> list[int]:
    """The micro batch as it is, then its divisors, largest first (a smaller micro batch keeps
    the global batch and is what makes it divide at more DP sizes)."""
    return [m for m in range(micro, 0, -1) if micro % m == 0]


def _refused_text(result: FitResult) -> str:
    return ", ".join(f"{n} for {why}" for why, n in sorted(result.refused.items(), key=lambda kv: -kv[1])) or "none fitted"


def replan(
    cfg: LaunchConfig,
    live: Sequence[NodeFree],
    facts: CheckpointFacts,
    score: Score = step_time,
    *,
    version: str | None = None,
    allow_convert: bool = True,
) -> Replan | Refusal:
    """The run's best layout on the `live` nodes (their free GPUs) that its checkpoint allows."""
    nodes, per_node = _cluster_shape(live)
    if nodes == 0:
        return Refusal("no alive node has a GPU")
    old = prepare(cfg, version=version)
    extras = old.plan.extras
    ring_tp = max(1, extras.ring_attn_size * extras.ds_tensor_parallel_size)
    offload = cfg.deepspeed.adam_offload
    all_on = cfg.colocated("all")
    pinned = {role: facts.dp(role) for role in TRAINED}

    def compatible(layout: Layout) -> bool:
        return layout.adam_offload == offload and ("all" in layout.colocate) == all_on

    def same_dp(layout: Layout) -> bool:
        return compatible(layout) and all(dp is None or _dp(layout, role, ring_tp) == dp for role, dp in pinned.items())

    def new_dp(layout: Layout) -> bool:
        return compatible(layout) and not same_dp(layout)

    shape = [f"cluster.nodes={nodes}", f"cluster.gpus_per_node={per_node}"]
    tiers: list[tuple[Literal["same_dp", "new_dp"], Callable[[Layout], bool]]] = [("same_dp", same_dp)]
    if allow_convert and any(dp is not None for dp in pinned.values()):
        tiers.append(("new_dp", new_dp))
    elif all(dp is None for dp in pinned.values()):
        tiers = [("same_dp", compatible)]  # nothing saved yet: nothing pinned
    said: list[str] = []
    base = cfg.model_dump(mode="json")
    for tier, keep in tiers:
        for micro in _micro_options(cfg.train.micro_train_batch_size):
            extra = [] if micro == cfg.train.micro_train_batch_size else [f"train.micro_train_batch_size={micro}"]
            try:
                candidate = validate(apply_overrides(base, extra), "re-plan")
            except UserError as exc:  # pragma: no cover - a smaller micro batch is always a valid value
                said.append(exc.message)
                continue
            result = search(candidate, nodes, per_node, score, live=list(live), keep=keep)
            if result.layouts:
                best = result.layouts[0]
                convert = tuple(r for r, dp in pinned.items() if dp is not None and data_parallel(best.launch, r) != dp)
                overrides = [*shape, *best.layout.overrides(), *extra]
                if convert:
                    overrides.append("checkpoint.universal=true")
                return Replan(best, tuple(overrides), convert, old, tier)
            said.append(f"{tier} micro {micro}: {result.tried} tried ({_refused_text(result)})")
            if tier == "same_dp" and any(dp is not None for dp in pinned.values()):
                break  # the DP sizes are kept: a smaller micro batch changes nothing DeepSpeed checks there
    kept = ", ".join(f"{r} DP {dp}" for r, dp in pinned.items() if dp is not None)
    why = "; ".join(said)
    batch = f"train_batch_size {cfg.train.train_batch_size}, rollout_batch_size {cfg.train.rollout_batch_size}"
    if not allow_convert and kept:
        return Refusal(f"no layout on {nodes} node(s) x {per_node} GPUs keeps {kept} with {batch} ({why})")
    return Refusal(f"no layout of {cfg.name} on the {nodes} live node(s) x {per_node} GPUs keeps {batch} valid ({why})")


# ---------------------------------------------------------------- the plan revision


def _layout_parts(launch: Launch) -> dict[str, str]:
    """role -> what it is in a launch: 'actor 16', 'vLLM 4x2', 'all on 16'."""
    plan = launch.plan
    parts: dict[str, str] = {}
    for group in plan.groups:
        roles = list(group.roles)
        if roles == ["vllm"]:
            parts["vllm"] = f"{plan.vllm_engines}x{plan.vllm_tp}"
        else:
            parts["+".join(roles)] = str(group.bundles)
    return parts


def change_text(old: Launch, new: Launch) -> str:
    """E.g. 'vLLM 4x2 -> 2x2, ref 4 -> 2 on 12 GPUs; step time +30% by estimate'."""
    before, after = _layout_parts(old), _layout_parts(new)
    changes = []
    if set(before) != set(after):
        changes.append(f"{old.plan.breakdown()} -> {new.plan.breakdown()}")
    else:
        for key, value in before.items():
            if after[key] != value:
                name = "vLLM" if key == "vllm" else key
                changes.append(f"{name} {value} -> {after[key]}")
    for role in TRAINED:
        a, b = data_parallel(old, role), data_parallel(new, role)
        if a is not None and b is not None and a != b:
            changes.append(f"{role} DP {a} -> {b}")
    micro = (old.cfg.train.micro_train_batch_size, new.cfg.train.micro_train_batch_size)
    if micro[0] != micro[1]:
        changes.append(f"micro_train_batch_size {micro[0]} -> {micro[1]}")
    text = (", ".join(changes) or "the same layout") + f" on {new.plan.gpus_required} GPUs"
    if old.estimate is not None and new.estimate is not None and old.estimate.step_s > 0:
        delta = (new.estimate.step_s / old.estimate.step_s - 1) * 100
        text += f"; step time {delta:+.0f}% by estimate"
    return text


@dataclass(frozen=True)
class Revision:
    """One change of a run's layout: what it was, what it is, why, when."""

    number: int  # 1: the first re-plan (0 is the submitted plan)
    at: float
    reason: str  # node lost | grow | by hand
    lost: str  # which node was lost ('' when none named)
    old: str  # layouts as `plan` shows them
    new: str
    old_gpus: int
    new_gpus: int
    old_step_s: float | None
    new_step_s: float | None
    summary: str
    overrides: list[str] = field(default_factory=list)
    convert: list[str] = field(default_factory=list)  # roles whose checkpoint became universal
    from_step: int | None = None  # the checkpoint step it resumes from

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        when = moment(self.at)
        lost = f"{self.lost} lost; " if self.lost else ""
        return f"plan revision {self.number} ({self.reason}, {when}): {lost}{self.summary}"


def revision(plan: Replan, number: int, *, reason: str, at: float, lost: str = "", from_step: int | None = None) -> Revision:
    """Revision `number` of a run's plan, made at `at` (epoch seconds: the caller's clock; this package reads none)."""
    old, new = plan.old, plan.launch
    return Revision(
        number=number,
        at=at,
        reason=reason,
        lost=lost,
        old=old.plan.breakdown(),
        new=new.plan.breakdown(),
        old_gpus=old.plan.gpus_required,
        new_gpus=new.plan.gpus_required,
        old_step_s=old.estimate.step_s if old.estimate else None,
        new_step_s=new.estimate.step_s if new.estimate else None,
        summary=change_text(old, new),
        overrides=list(plan.overrides),
        convert=list(plan.convert),
        from_step=from_step,
    )
