"""OpenRLHF's start-up checks and silent corrections, and the releases that have each, as data.

Read from each release's `openrlhf/cli/train_ppo_ray.py` (the `__main__` block after parsing,
and `train()` up to the trainer actors) and from what `train()` calls on the driver
(`get_strategy`, `create_vllm_engines`). core/settings.py and core/rules.py reproduce them;
tests/fidelity/test_differential.py holds the reproduction to the real code of every release,
and docs/openrlhf-checks.md is this table in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rlhf_launch.openrlhf.flagset import version_key

Stage = Literal["checks", "train", "init"]  # after parsing; in train(); when the actors initialize
Kind = Literal["check", "correction", "crash"]


@dataclass(frozen=True)
class Check:
    id: str
    kind: Kind
    stage: Stage
    text: str  # what OpenRLHF does
    since: str = "0.8.0"
    until: str | None = None  # the last release that has it; None: every release since

    def applies(self, version: str) -> bool:
        key = version_key(version)
        return key >= version_key(self.since) and (self.until is None or key <= version_key(self.until))


CHECKS: tuple[Check, ...] = (
    # __main__, in the trainer's order
    Check("agent_is_remote", "correction", "checks", "an agent function sets the remote reward URL to 'agent': no reward model is loaded"),
    Check(
        "is_threshold_count",
        "check",
        "checks",
        "the IS-correction threshold takes HIGH or LOW HIGH (one value means 0..HIGH)",
        since="0.11.2",
    ),
    Check("critic_dropped", "correction", "checks", "an estimator other than gae drops the critic, even one given"),
    Check(
        "critic_from_reward",
        "correction",
        "checks",
        "gae without a critic model initializes the critic from the reward model (the actor with a remote reward)",
    ),
    Check(
        "gae_needs_reward",
        "crash",
        "checks",
        "gae without critic, reward model or remote reward: AttributeError on the missing reward model",
    ),
    Check(
        "group_estimator_samples",
        "check",
        "checks",
        "group estimators (rloo, reinforce_baseline, group_norm; dr_grpo from 0.11.0) need n_samples_per_prompt > 1",
    ),
    Check("vlm_no_critic", "check", "checks", "VLM training (max_images_per_prompt > 0) has no critic", since="0.10.0"),
    Check(
        "vlm_no_packing", "check", "checks", "VLM training does not pack samples (the value before the corrections below)", since="0.10.0"
    ),
    Check("input_template_reset", "correction", "checks", "an input template without '{}' is dropped"),
    Check("ring_forces_packing", "correction", "checks", "ring attention (ring_attn_size > 1) switches packing on", since="0.8.4"),
    Check("dynamic_batch_forces_packing", "correction", "checks", "dynamic batching switches packing on", since="0.8.6"),
    Check(
        "dynamic_batch_rollout_tokens",
        "correction",
        "checks",
        "dynamic batching without a rollout token budget uses the training one",
        since="0.8.6",
    ),
    Check("packing_forces_flash", "correction", "checks", "packing switches flash attention on"),
    Check("packing_needs_vllm", "check", "checks", "packing needs vLLM engines"),
    Check("vllm_sleep_off", "correction", "checks", "vLLM sleep is switched off unless all models are colocated"),
    Check(
        "async_colocate_all",
        "correction",
        "checks",
        "with async training, colocate-all colocates only the DeepSpeed models; vLLM gets its own GPUs",
    ),
    Check("async_no_vllm_sleep", "check", "checks", "async training does not support vLLM sleep"),
    Check("partial_rollout_needs_async", "check", "checks", "partial rollout needs async training", since="0.9.7"),
    Check("eval_needs_remote", "check", "checks", "an eval dataset needs a remote reward (or an agent, which sets one)"),
    Check(
        "generate_batch_default", "correction", "checks", "the vLLM generate batch size defaults to the rollout batch size", since="0.8.1"
    ),
    Check(
        "generate_batch_needs_async",
        "check",
        "checks",
        "a vLLM generate batch larger than the rollout batch needs async training",
        since="0.10.0",
    ),
    Check(
        "dynamic_filtering_range",
        "check",
        "checks",
        "dynamic filtering needs an increasing reward range (0.8.1 checks reward_clip_range instead)",
        since="0.8.1",
    ),
    Check("dynamic_filtering_remote", "check", "checks", "dynamic filtering needs a remote reward or an agent", since="0.8.1"),
    Check("dynamic_filtering_samples", "check", "checks", "dynamic filtering needs n_samples_per_prompt > 1", since="0.8.1"),
    Check("sample_batches", "check", "checks", "rollout x n_samples / micro rollout batch >= actor GPUs / ring size / DeepSpeed TP"),
    # train(), up to the trainer actors
    Check("ds_tp_bf16", "check", "train", "DeepSpeed tensor parallelism needs bf16 (get_strategy)"),
    Check("colocate_actor_ref_same", "check", "train", "actor and ref colocated (actor_ref or all) with KL > 0: the same nodes x GPUs"),
    Check("no_vllm_max_len", "crash", "train", "no vLLM engines: UnboundLocalError on max_len", since="0.9.8", until="0.10.4"),
    Check("colocate_all_vllm_gpus", "check", "train", "synchronous colocate-all: vLLM engines x TP = actor GPUs"),
    Check(
        "is_logprobs_vllm", "check", "train", "IS correction needs vLLM > 0.10.0 (checked against the release's pinned vLLM)", since="0.8.9"
    ),
    Check("colocate_critic_reward_same", "check", "train", "critic and reward colocated, with a critic: the same nodes x GPUs"),
    # when the actors initialize: past the start-up, reproduced by the launcher with a reason
    Check("deepspeed_batch", "check", "init", "DeepSpeed: train_batch = micro x grad-accum x data-parallel size, for every model group"),
)

BY_ID = {check.id: check for check in CHECKS}


def has(check_id: str, version: str) -> bool:
    """Whether release `version` has this check or correction."""
    return BY_ID[check_id].applies(version)
