"""Checkpoint storage budget: the free space `checkpoint.ckpt_path` needs. Pure.

What OpenRLHF's PPO trainer writes there (`_save_checkpoint`, every `save_steps`):
  <ckpt_path>/_actor/global_step<N>/   DeepSpeed ZeRO checkpoint of the actor
  <ckpt_path>/_critic/global_step<N>/  the same for the critic, when the plan has one
  A ZeRO checkpoint with Adam state holds bf16 params (2 B/param), the fp32 master copy
  (4 B) and the two fp32 moments (8 B): about 14 bytes per parameter, whatever the sharding.
  Before each save the oldest is deleted so that at most `max_num` remain (max_ckpt_num).
  With save_hf, <ckpt_path>/global_step<N>_hf/ as well: the actor in bf16 (2 B/param), one
  per save, never rotated.
Parameter counts come from the shapes the memory estimate uses; unknown stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.core import memory
from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.shapes import Shape

ZERO_BYTES_PER_PARAM = 14.0  # bf16 params 2 + fp32 master 4 + Adam moments 8
HF_BYTES_PER_PARAM = 2.0  # bf16 safetensors
GIB = 1024**3
TIB = 1024**4


def _size(n_bytes: float, unit: str) -> str:
    return f"{n_bytes / TIB:.2f} TiB" if unit == "TiB" else f"{n_bytes / GIB:.1f} GiB"


def _gib(n_bytes: float | None) -> float | None:
    return None if n_bytes is None else round(n_bytes / GIB, 1)


@dataclass(frozen=True)
class StorageBudget:
    per_save: dict[str, float | None]  # role ("actor", "critic") -> bytes of one save; None: shape unknown
    max_num: int
    hf_export: float | None  # bytes of one HF export (0.0 when save_hf is off); None: unknown
    save_steps: int  # checkpoint.save_steps (-1: never saves)
    unknown: str = ""  # why a size is unknown, for people

    @property
    def per_save_total(self) -> float | None:
        sizes = list(self.per_save.values())
        if any(size is None for size in sizes):
            return None
        return sum(size for size in sizes if size is not None)

    @property
    def required(self) -> float | None:
        """Bytes ckpt_path must have free: max_num saves and one HF export; 0 if nothing is saved."""
        if self.save_steps <= 0:
            return 0.0
        total = self.per_save_total
        if total is None or self.hf_export is None:
            return None
        return total * self.max_num + self.hf_export

    def as_json(self) -> dict[str, Any]:
        return {
            "per_save_gib": {role: _gib(size) for role, size in self.per_save.items()},
            "per_save_total_gib": _gib(self.per_save_total),
            "max_num": self.max_num,
            "hf_export_gib": _gib(self.hf_export),
            "save_steps": self.save_steps,
            "required_gib": _gib(self.required),
        }

    def lines(self) -> list[str]:
        head = "checkpoint storage at ckpt_path:"
        if self.save_steps <= 0:
            return [f"{head} none (checkpoint.save_steps is {self.save_steps}: no checkpoints are saved)"]
        required = self.required
        if required is None:
            why = f" ({self.unknown})" if self.unknown else ""
            known = ", ".join(f"{role} {'unknown' if size is None else _size(size, 'GiB')}" for role, size in self.per_save.items())
            return [f"{head} unknown: model size unknown{why}; per save: {known}"]
        unit = "TiB" if required >= TIB else "GiB"
        parts = " + ".join(f"{role} {_size(size or 0.0, unit)}" for role, size in self.per_save.items())
        text = f"{head} {parts} per save x max_num {self.max_num} = {_size((self.per_save_total or 0.0) * self.max_num, unit)}"
        if self.hf_export:
            text += f", + HF export {_size(self.hf_export, unit)} per save (not rotated)"
        lines = [f"{text}; needs {_size(required, unit)} free"]
        if self.hf_export:
            lines.append(f"  HF exports are never deleted: each save every {self.save_steps} steps adds {_size(self.hf_export, unit)} more")
        return lines


def _params(cfg: LaunchConfig, role: str, shapes: dict[str, tuple[Shape | None, str]]) -> tuple[float | None, str]:
    """The role's parameter count, or (None, why not)."""
    shape, source = shapes[role]
    if shape is not None:
        return shape.params, ""
    m = cfg.models
    follows_actor = role == "actor" or (not m.critic and not (m.reward and not m.remote_reward))
    if follows_actor and m.params_billion is not None:
        return m.params_billion * 1e9, ""  # models.params_billion alone: enough for a size
    return None, source


def budget(cfg: LaunchConfig, plan: Plan) -> StorageBudget:
    shapes = memory.shapes_of(cfg)
    roles = ["actor"] + (["critic"] if plan.role("critic").enabled else [])
    per_save: dict[str, float | None] = {}
    unknown: dict[str, list[str]] = {}  # why -> the roles it is why for
    params: dict[str, float | None] = {}
    for role in roles:
        count, why = _params(cfg, role, shapes)
        params[role] = count
        per_save[role] = None if count is None else count * ZERO_BYTES_PER_PARAM
        if count is None:
            unknown.setdefault(why, []).append(role)
    actor = params["actor"]
    if not cfg.checkpoint.save_hf:
        hf: float | None = 0.0
    else:
        hf = None if actor is None else actor * HF_BYTES_PER_PARAM
    return StorageBudget(
        per_save=per_save,
        max_num=cfg.checkpoint.max_num,
        hf_export=hf,
        save_steps=cfg.checkpoint.save_steps,
        unknown="; ".join(f"{', '.join(names)}: {why}" for why, names in unknown.items()),
    )
