"""What a resumed attempt may change and still load the run's checkpoints. Pure.

What the checkpoint pins, read in the sources (DeepSpeed 0.19.5, OpenRLHF 0.11.0):

- the **data-parallel world size** of each trained model (actor; critic with `gae`):
  `DeepSpeedEngine._load_zero_checkpoint` raises "The checkpoint being loaded used a DP
  world size of N but the current world size is M. Automatic adjustment of ZeRO's optimizer
  state partitioning with a new world size is not currently supported." (runtime/engine.py),
  and `_get_zero_ckpt_name` names each rank's optimizer shard by its DP rank. The DP size is
  the role's GPUs over DeepSpeed's tensor parallel size (`deepspeed.tensor_parallel_size`);
- the **ZeRO stage** and the **precision** (bf16 / fp16): the files are named per stage
  (`zero_pp_rank_*` for ZeRO-3 module states) and per precision (`bf16_zero_pp_rank_*`), so
  another stage or precision looks for files that are not there;
- the **model** (actor, critic and their shape): DeepSpeed loads the module strictly
  (OpenRLHF's `load_ckpt(load_module_strict=True)`, utils/deepspeed/deepspeed.py);
- `checkpoint.ckpt_path`: another path is another checkpoint.

Not pinned by either: the micro batch sizes (DeepSpeed recomputes gradient accumulation
from `train_batch_size`, micro batch and DP size at start-up: engine.py
`_configure_train_batch_size`/`set_train_micro_batch_size`), gradient checkpointing, Adam or
ref/reward offload, vLLM (engines, tensor parallel, memory), the ref and reward models'
GPUs, colocation that keeps the trained roles' GPU counts, timeouts, logging.

The launcher also keeps the sizes OpenRLHF counts its resumed position in:
`train.train_batch_size` (the LR schedule's length, `max_steps` in prepare_datasets),
`train.rollout_batch_size` and `train.n_samples_per_prompt` (a global step is one rollout
batch; `checkpoint_states` resumes `global_step` and `total_consumed_prompts`): they load,
but the run would count its steps and schedule in other units (`--force` allows them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlhf_launch.core.launch import Launch

__all__ = ["Change", "refused_changes"]


@dataclass(frozen=True)
class Change:
    key: str
    before: Any
    after: Any
    why: str

    @property
    def text(self) -> str:
        return f"{self.key} ({self.before} -> {self.after}): {self.why}"


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


MODEL = "the checkpoint holds this model's weights and optimizer state (DeepSpeed loads the module strictly)"
PINNED: tuple[tuple[str, str], ...] = (
    ("models.actor", MODEL),
    *((f"models.{k}", MODEL) for k in ("params_billion", "layers", "hidden", "intermediate", "heads", "kv_heads", "vocab")),
    (
        "deepspeed.zero_stage",
        "DeepSpeed names a checkpoint's files per ZeRO stage (zero_pp_rank_* shards for ZeRO-3): another stage finds none",
    ),
    ("deepspeed.bf16", "DeepSpeed names the optimizer shards by precision (bf16_zero_pp_rank_*): another precision finds none"),
    ("deepspeed.param_dtype", "DeepSpeed names the optimizer shards by precision (bf16_zero_pp_rank_*): another precision finds none"),
    ("checkpoint.ckpt_path", "another path is another checkpoint (and another run's claim)"),
    ("train.train_batch_size", "OpenRLHF's LR schedule length (max_steps) is counted in it; it loads, but the schedule shifts"),
    ("train.rollout_batch_size", "a global step is one rollout batch: the resumed global_step and consumed prompts count in it"),
    ("train.n_samples_per_prompt", "a global step is one rollout batch of these samples: the resumed step counts in it"),
)


def _dp(launch: Launch, role: str) -> int | None:
    """The role's DeepSpeed data-parallel size (None: the role is not trained here)."""
    plan = launch.plan
    try:
        found = plan.role(role)
    except StopIteration:
        return None
    if not found.enabled:
        return None
    return found.gpus // max(1, plan.extras.ds_tensor_parallel_size)


def refused_changes(before: Launch, after: Launch, config: Callable[[Launch], dict[str, Any]]) -> list[Change]:
    """The changes from `before` (the run as recorded) to `after` (with the resume's
    overrides) that its checkpoints do not allow, each with why; [] when they load."""
    old, new = config(before), config(after)
    out = [Change(key, _get(old, key), _get(new, key), why) for key, why in PINNED if _get(old, key) != _get(new, key)]
    critic_before, critic_after = _dp(before, "critic"), _dp(after, "critic")
    if critic_before and critic_after and _get(old, "models.critic") != _get(new, "models.critic"):
        out.append(Change("models.critic", _get(old, "models.critic"), _get(new, "models.critic"), MODEL))
    tp = max(1, before.plan.extras.ds_tensor_parallel_size)
    for role in ("actor", "critic"):
        was, now = _dp(before, role), _dp(after, role)
        if was and now and was != now:
            out.append(
                Change(
                    f"placement.{role} (its data-parallel size)",
                    was,
                    now,
                    f"DeepSpeed refuses it: 'The checkpoint being loaded used a DP world size of {was} but the current world "
                    f"size is {now}'; keep the {role}'s GPUs (nodes x gpus_per_node) at {was * tp}",
                )
            )
    return out
