"""The layouts worth trying on a cluster: per-role sizes, vLLM engines x TP, colocation mode,
Adam offload. Pure: numbers in, `Layout` records out; nothing here knows whether one is valid
(search.py asks the launcher) or fast (the estimate does).

Sizes a role can take on nodes of G GPUs: 1, 2, 4, ... up to G on one node, then whole nodes
(2G, 3G, ...): OpenRLHF's `num_nodes x num_gpus_per_node`, packed. Colocated roles take the
size of the role they share with (OpenRLHF asserts it): ref = actor under actor_ref,
reward = critic under critic_reward, everything = actor under all, where the vLLM engines
fill the actor's GPUs (engines x TP = actor GPUs) and both sleep between phases.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

MODES: tuple[tuple[str, ...], ...] = ((), ("actor_ref",), ("critic_reward",), ("actor_ref", "critic_reward"), ("all",))


@dataclass(frozen=True)
class Size:
    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Layout:
    """One layout: sizes of the enabled roles (None: the role is off), vLLM, colocation."""

    actor: Size
    critic: Size | None
    ref: Size | None
    reward: Size | None
    engines: int
    tp: int
    colocate: tuple[str, ...] = ()
    adam_offload: bool = False
    gpu_memory_utilization: float = 0.85
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def gpus(self) -> int:
        """GPUs the layout takes (colocated roles counted once)."""
        if "all" in self.colocate:
            return self.actor.gpus
        total = self.actor.gpus + self.engines * self.tp
        if self.ref is not None and "actor_ref" not in self.colocate:
            total += self.ref.gpus
        if self.critic is not None:
            total += self.critic.gpus
        if self.reward is not None and "critic_reward" not in self.colocate:
            total += self.reward.gpus
        return total

    def overrides(self) -> list[str]:
        """The `key=value` overrides that put this layout into a config."""
        out = [f"placement.actor.nodes={self.actor.nodes}", f"placement.actor.gpus_per_node={self.actor.gpus_per_node}"]
        for role in ("critic", "ref", "reward"):
            size = getattr(self, role)
            if size is not None:
                out += [f"placement.{role}.nodes={size.nodes}", f"placement.{role}.gpus_per_node={size.gpus_per_node}"]
        out += [
            f"placement.vllm.engines={self.engines}",
            f"placement.vllm.tensor_parallel_size={self.tp}",
            f"placement.vllm.gpu_memory_utilization={self.gpu_memory_utilization:g}",
            f"placement.colocate=[{', '.join(self.colocate)}]",
            f"deepspeed.adam_offload={'true' if self.adam_offload else 'false'}",
        ]
        sleep = "true" if "all" in self.colocate else "false"
        out += [f"placement.vllm.enable_sleep={sleep}", f"deepspeed.enable_sleep={sleep}"]
        return out

    def describe(self) -> str:
        """E.g. 'actor 8 + critic 8 + ref 4 + reward 4 + vLLM 2x4' or 'all on 16, vLLM 2x8'."""
        offload = " (Adam offload)" if self.adam_offload else ""
        if "all" in self.colocate:
            return f"all on {self.actor.gpus}, vLLM {self.engines}x{self.tp}{offload}"
        parts = [f"actor{'+ref' if 'actor_ref' in self.colocate and self.ref else ''} {self.actor.gpus}"]
        if self.critic is not None:
            parts.append(f"critic{'+reward' if 'critic_reward' in self.colocate and self.reward else ''} {self.critic.gpus}")
        if self.ref is not None and "actor_ref" not in self.colocate:
            parts.append(f"ref {self.ref.gpus}")
        if self.reward is not None and "critic_reward" not in self.colocate:
            parts.append(f"reward {self.reward.gpus}")
        parts.append(f"vLLM {self.engines}x{self.tp}")
        return " + ".join(parts) + offload


def sizes(nodes: int, gpus_per_node: int, at_least: int = 1) -> list[Size]:
    """Every size a role can take on `nodes` nodes of `gpus_per_node` GPUs, smallest first."""
    out = []
    g = 1
    while g < gpus_per_node:
        out.append(Size(1, g))
        g *= 2
    # whole nodes: each count up to 8, then powers of two and the whole cluster (a 256-GPU
    # search stays in seconds; a role on 24 of 32 nodes is rarely what a user wants)
    counts = sorted({n for n in range(1, nodes + 1) if n <= 8 or n & (n - 1) == 0} | {nodes})
    out += [Size(n, gpus_per_node) for n in counts]
    return [s for s in out if s.gpus >= at_least]


def engine_counts(room: int, tp: int) -> list[int]:
    """Engine counts worth trying in `room` GPUs at TP `tp`: all of it, then halves (fewer
    engines only win when another phase dominates; ties go to fewer GPUs)."""
    most = room // tp
    out: list[int] = []
    while most >= 1 and len(out) < 4:  # all, a half, a quarter, an eighth
        out.append(most)
        most //= 2
    return out


@dataclass(frozen=True)
class Space:
    """What the search may vary. roles: which of critic/ref/reward are on; minimal sizes per
    role (smaller ones were refused for memory alone); tps: TP sizes vLLM accepts."""

    nodes: int
    gpus_per_node: int
    critic: bool
    ref: bool
    reward: bool
    tps: Sequence[int]
    minimum: dict[str, int] = field(default_factory=dict)  # role -> fewest GPUs that fit
    offloads: Sequence[bool] = (False,)
    utilization: float = 0.85
    colocated_utilization: float = 0.5
    modes: Sequence[tuple[str, ...]] = MODES

    @property
    def total(self) -> int:
        return self.nodes * self.gpus_per_node

    def _sizes(self, role: str) -> list[Size]:
        return sizes(self.nodes, self.gpus_per_node, self.minimum.get(role, 1))

    def layouts(self) -> Iterator[Layout]:
        """Every candidate within the cluster's GPUs, colocation modes the roles allow."""
        for mode in self.modes:
            if ("actor_ref" in mode and not self.ref) or ("critic_reward" in mode and not (self.critic and self.reward)):
                continue
            for offload in self.offloads:
                yield from self._mode(mode, offload)

    def _mode(self, mode: tuple[str, ...], offload: bool) -> Iterator[Layout]:
        if "all" in mode:
            need = max(self.minimum.get(r, 1) for r in ("actor", "critic", "ref", "reward", "vllm"))
            for actor in sizes(self.nodes, self.gpus_per_node, need):
                for tp in self.tps:
                    if actor.gpus % tp == 0 and tp <= self.gpus_per_node:
                        yield Layout(
                            actor,
                            actor if self.critic else None,
                            actor if self.ref else None,
                            actor if self.reward else None,
                            actor.gpus // tp,
                            tp,
                            mode,
                            offload,
                            self.colocated_utilization,
                        )
            return
        for actor in self._sizes("actor"):
            refs: list[Size | None] = [None]
            if self.ref:
                refs = [actor] if "actor_ref" in mode else _few(self._sizes("ref"), actor)
            critics: list[Size | None] = [None]
            if self.critic:  # the critic trains a model of its own: the actor's size, half of it, or the fewest that fit
                options = [s for s in self._sizes("critic") if s.gpus <= actor.gpus]
                critics = [s for s in options if s == actor or s.gpus * 2 == actor.gpus or s == options[0]]
            for critic in critics:
                rewards: list[Size | None] = [None]
                if self.reward:
                    rewards = [critic] if "critic_reward" in mode and critic else _few(self._sizes("reward"), critic or actor)
                for ref in refs:
                    for reward in rewards:
                        base = Layout(actor, critic, ref, reward, 0, 1, mode, offload, self.utilization)
                        room = self.total - base.gpus
                        for tp in self.tps:
                            if tp > self.gpus_per_node or tp * 1 > room or tp < self.minimum.get("vllm", 1):
                                continue
                            for engines in engine_counts(room, tp):
                                yield Layout(actor, critic, ref, reward, engines, tp, mode, offload, self.utilization)


def _few(options: list[Size], partner: Size) -> list[Size | None]:
    """A forward-only role's sizes worth trying: the smallest that fits, and its partner's."""
    if not options:
        return []
    picked: list[Size | None] = [options[0]]
    if partner in options and partner != options[0]:
        picked.append(partner)
    return picked
