"""Placement plan: which GPUs each role gets after colocation, and the placement requests
OpenRLHF's `train_ppo_ray` makes, in the order it makes them.

Mirrors the trainer's startup: with actor+ref (or all) colocated one PACK group of the
actor's size is made first; vLLM engines get one PACK group of engines x TP bundles (or
share the actor's under synchronous colocate-all); each role without a shared group makes
its own PACK group (or, with one GPU per node, single-GPU actors); critic+reward colocation
makes a group of the critic's size. Every bundle is {"GPU": 1, "CPU": 1}.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.config import LaunchConfig

# OpenRLHF's own defaults for num_nodes / num_gpus_per_node.
DEFAULT_NODES = 1
DEFAULT_GPUS_PER_NODE = 8
ROLE_ORDER = ("actor", "critic", "ref", "reward", "vllm")


@dataclass(frozen=True)
class TrainerExtras:
    """Trainer settings outside the config schema (from extra_args) that change the layout."""

    async_train: bool = False
    agent: bool = False
    ring_attn_size: int = 1
    ds_tensor_parallel_size: int = 1
    builtin_reward: bool = False  # an OpenRLHF fork without reward-model flags scores rollouts itself


@dataclass(frozen=True)
class RolePlan:
    role: str
    nodes: int
    gpus_per_node: int
    enabled: bool
    group: str = ""
    reason: str = ""

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class GroupPlan:
    """One placement request: `bundles` x {"GPU": 1, "CPU": 1}."""

    name: str
    bundles: int
    roles: tuple[str, ...]
    packed: bool = True  # a PACK placement group; False: separate single-GPU actors
    chunk: int = 1  # bundles that must share a node (vLLM tensor parallel workers)


@dataclass(frozen=True)
class Plan:
    roles: tuple[RolePlan, ...]
    groups: tuple[GroupPlan, ...]
    vllm_engines: int
    vllm_tp: int
    cluster_nodes: int
    cluster_gpus_per_node: int
    sync_colocate_all: bool
    extras: TrainerExtras = field(default_factory=TrainerExtras)

    def role(self, name: str) -> RolePlan:
        return next(r for r in self.roles if r.role == name)

    @property
    def vllm_gpus(self) -> int:
        return self.vllm_engines * self.vllm_tp

    @property
    def gpus_required(self) -> int:
        return sum(g.bundles for g in self.groups)

    @property
    def cluster_gpus(self) -> int:
        return self.cluster_nodes * self.cluster_gpus_per_node

    def colocated_with(self, role: str) -> list[str]:
        for group in self.groups:
            if role in group.roles:
                return [r for r in group.roles if r != role]
        return []

    def breakdown(self) -> str:
        """E.g. 'actor 8 + critic 8 + ref 8 + reward 8 + vLLM 2x4' (roles in that order)."""
        parts = []
        for group in sorted(self.groups, key=lambda g: min(ROLE_ORDER.index(r) for r in g.roles)):
            names = sorted(group.roles, key=ROLE_ORDER.index)
            if group.roles == ("vllm",):
                parts.append(f"vLLM {self.vllm_engines}x{self.vllm_tp}")
            else:
                shown = ["vLLM" if r == "vllm" else r for r in names]
                parts.append(f"{'+'.join(shown)} {group.bundles}")
        return " + ".join(parts)


def _placement(cfg: LaunchConfig, role: str, fallback: tuple[int, int] | None) -> tuple[int, int]:
    spec = getattr(cfg.placement, role)
    nodes_default, gpus_default = fallback or (DEFAULT_NODES, DEFAULT_GPUS_PER_NODE)
    return (
        spec.nodes if spec.nodes is not None else nodes_default,
        spec.gpus_per_node if spec.gpus_per_node is not None else gpus_default,
    )


def _scorer(cfg: LaunchConfig, extras: TrainerExtras) -> str:
    if extras.agent:
        return "agent function"
    if extras.builtin_reward:
        return "the fork itself (it has no reward model flag)"
    if cfg.models.reward_func:
        return "the reward function models.reward_func"
    urls = cfg.models.remote_urls
    if len(urls) == 1 and urls[0].endswith(".py"):  # OpenRLHF reads a .py remote_rm_url as a reward function
        return f"the reward function {urls[0]} (read on the nodes; models.reward_func ships a local file with the job)"
    return "the remote reward server"


def build_plan(cfg: LaunchConfig, extras: TrainerExtras | None = None) -> Plan:
    extras = extras or TrainerExtras()
    colocate_all = cfg.colocated("all")
    colocate_actor_ref = cfg.colocated("actor_ref") or colocate_all
    colocate_critic_reward = cfg.colocated("critic_reward")

    actor = _placement(cfg, "actor", None)
    ref = _placement(cfg, "ref", actor if colocate_actor_ref else None)
    critic = _placement(cfg, "critic", actor if colocate_all else None)
    reward = _placement(cfg, "reward", critic if colocate_critic_reward else actor if colocate_all else None)

    ref_on = cfg.train.init_kl_coef > 0
    critic_on = cfg.train.advantage_estimator == "gae"
    reward_on = not cfg.models.remote_reward and not extras.agent and not extras.builtin_reward
    engines, tp = cfg.placement.vllm.engines or 0, cfg.placement.vllm.tensor_parallel_size
    sync_all = colocate_all and not extras.async_train

    groups: list[dict[str, Any]] = []
    members: dict[str, str] = {}

    def new_group(name: str, bundles: int, packed: bool = True, chunk: int = 1) -> dict[str, Any]:
        group = {"name": name, "bundles": bundles, "roles": [], "packed": packed, "chunk": chunk}
        groups.append(group)
        return group

    def place(role: str, size: tuple[int, int], shared: dict[str, Any] | None) -> None:
        if shared is None:
            nodes, per_node = size
            shared = new_group(role, nodes * per_node, packed=per_node > 1)
        shared["roles"].append(role)

    pg = new_group("actor", actor[0] * actor[1]) if colocate_actor_ref else None
    if engines > 0:
        if sync_all and pg is not None:
            pg["roles"].append("vllm")
            pg["chunk"] = tp
        else:
            new_group("vllm", engines * tp, chunk=tp)["roles"].append("vllm")
    place("actor", actor, pg)
    if ref_on:
        place("ref", ref, pg)
    if not colocate_all:
        pg = None
    if critic_on and colocate_critic_reward:
        pg = new_group("critic", critic[0] * critic[1])
    if critic_on:
        place("critic", critic, pg)
    if reward_on:
        place("reward", reward, pg)

    for group in groups:
        for role in group["roles"]:
            members[role] = "+".join(group["roles"])
    frozen_groups = tuple(
        GroupPlan(
            name="+".join(g["roles"]),
            bundles=g["bundles"],
            roles=tuple(g["roles"]),
            packed=g["packed"],
            chunk=g["chunk"],
        )
        for g in groups
    )
    reasons = {
        "ref": "" if ref_on else "off: train.init_kl_coef is 0",
        "critic": "" if critic_on else f"off: advantage estimator {cfg.train.advantage_estimator} needs no critic",
        "reward": "" if reward_on else f"off: {_scorer(cfg, extras)} scores rollouts",
    }
    roles = tuple(
        RolePlan(role, n, g, enabled=role in members, group=members.get(role, ""), reason=reasons.get(role, ""))
        for role, (n, g) in (("actor", actor), ("critic", critic), ("ref", ref), ("reward", reward))
    )
    return Plan(
        roles=roles,
        groups=frozen_groups,
        vllm_engines=engines,
        vllm_tp=tp,
        cluster_nodes=cfg.cluster.nodes,
        cluster_gpus_per_node=cfg.cluster.gpus_per_node,
        sync_colocate_all=sync_all,
        extras=extras,
    )
