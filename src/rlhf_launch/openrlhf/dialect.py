"""What each release calls things: config keys -> trainer flag spellings, as data.

Each config key lists its spellings, newest first; a spelling is the tuple of flags that
together carry the key. The first spelling whose flags all exist in the target release's
flag set is the one used, so era boundaries (flat -> dotted at v0.10.2, `--flash_attn` ->
`--attn_implementation`, `--bf16` -> `--param_dtype`, prompt/generate lengths ->
`--max_len`/`--max_new_tokens`) come from the data, not from version numbers. Turning a
config into argv with these spellings is core/flags.py.
"""

from __future__ import annotations

import difflib

from rlhf_launch.openrlhf.flagset import FlagSet

Spelling = tuple[str, ...]


def _role(role: str, field: str) -> tuple[Spelling, ...]:
    flag = "num_nodes" if field == "nodes" else "num_gpus_per_node"
    return ((f"{role}.{flag}",), (f"{role}_{flag}",))


SPELLINGS: dict[str, tuple[Spelling, ...]] = {
    "models.actor": (("actor.model_name_or_path",), ("pretrain",)),
    "models.reward": (("reward.model_name_or_path",), ("reward_pretrain",)),
    "models.critic": (("critic.model_name_or_path",), ("critic_pretrain",)),
    "models.reward_remote_url": (("reward.remote_url",), ("remote_rm_url",)),
    **{f"placement.{r}.{f}": _role(r, f) for r in ("actor", "critic", "ref", "reward") for f in ("nodes", "gpus_per_node")},
    "placement.colocate.actor_ref": (("train.colocate_actor_ref",), ("colocate_actor_ref",)),
    "placement.colocate.critic_reward": (("train.colocate_critic_reward",), ("colocate_critic_reward",)),
    "placement.colocate.all": (("train.colocate_all",), ("colocate_all_models",)),
    "placement.vllm.engines": (("vllm.num_engines",), ("vllm_num_engines",)),
    "placement.vllm.tensor_parallel_size": (("vllm.tensor_parallel_size",), ("vllm_tensor_parallel_size",)),
    "placement.vllm.gpu_memory_utilization": (("vllm.gpu_memory_utilization",), ("vllm_gpu_memory_utilization",)),
    "placement.vllm.enable_sleep": (("vllm.enable_sleep",), ("vllm_enable_sleep",)),
    "deepspeed.zero_stage": (("ds.zero_stage",), ("zero_stage",)),
    "deepspeed.bf16": (("ds.param_dtype",), ("param_dtype",), ("bf16",)),
    "deepspeed.adam_offload": (("ds.adam_offload",), ("adam_offload",)),
    "deepspeed.gradient_checkpointing": (("actor.gradient_checkpointing_enable",), ("gradient_checkpointing",)),
    "deepspeed.flash_attn": (("ds.attn_implementation",), ("attn_implementation",), ("flash_attn",)),
    "deepspeed.packing_samples": (("ds.packing_samples",), ("packing_samples",)),
    "deepspeed.enable_sleep": (("ds.enable_sleep",), ("deepspeed_enable_sleep",)),
    "deepspeed.ref_reward_offload": (("ref.offload", "reward.offload"), ("ref_reward_offload",)),
    "data.prompt_dataset": (("data.prompt_dataset",), ("prompt_data",)),
    "data.input_key": (("data.input_key",), ("input_key",)),
    "data.apply_chat_template": (("data.apply_chat_template",), ("apply_chat_template",)),
    "data.prompt_max_len": (
        ("data.max_len", "rollout.max_new_tokens"),
        ("max_len", "max_new_tokens"),
        ("prompt_max_len", "generate_max_len"),
    ),
    "data.max_samples": (("data.max_samples",), ("max_samples",)),
    "train.micro_train_batch_size": (("train.micro_batch_size",), ("micro_train_batch_size",)),
    "train.train_batch_size": (("train.batch_size",), ("train_batch_size",)),
    "train.micro_rollout_batch_size": (("rollout.micro_batch_size",), ("micro_rollout_batch_size",)),
    "train.rollout_batch_size": (("rollout.batch_size",), ("rollout_batch_size",)),
    "train.n_samples_per_prompt": (("rollout.n_samples_per_prompt",), ("n_samples_per_prompt",)),
    "train.max_epochs": (("train.max_epochs",), ("max_epochs",)),
    "train.num_episodes": (("train.num_episodes",), ("num_episodes",)),
    "train.actor_learning_rate": (("actor.adam.lr",), ("actor_learning_rate",)),
    "train.critic_learning_rate": (("critic.adam.lr",), ("critic_learning_rate",)),
    "train.init_kl_coef": (("algo.kl.init_coef",), ("init_kl_coef",)),
    "train.normalize_reward": (("reward.normalize_enable",), ("normalize_reward",)),
    "train.advantage_estimator": (("algo.advantage.estimator",), ("advantage_estimator",)),
    "train.seed": (("train.seed",), ("seed",)),
    "checkpoint.save_path": (("ckpt.output_dir",), ("save_path",)),
    "checkpoint.ckpt_path": (("ckpt.path",), ("ckpt_path",)),
    "checkpoint.save_steps": (("ckpt.save_steps",), ("save_steps",)),
    "checkpoint.save_hf": (("ckpt.save_hf",), ("save_hf_ckpt",)),
    "checkpoint.universal": (("ds.use_universal_ckpt",), ("use_ds_universal_ckpt",)),
    "checkpoint.save_value_network": (("critic.save_value_network",), ("save_value_network",)),
    "checkpoint.max_num": (("ckpt.max_num",), ("max_ckpt_num",)),
    "logging.logging_steps": (("logger.logging_steps",), ("logging_steps",)),
    "logging.wandb.project": (("logger.wandb.project",), ("wandb_project",)),
    "logging.wandb.org": (("logger.wandb.org",), ("wandb_org",)),
    "logging.wandb.group": (("logger.wandb.group",), ("wandb_group",)),
    "logging.wandb.run_name": (("logger.wandb.run_name",), ("wandb_run_name",)),
    # OpenRLHF 0.9-0.11 features (SOFT below: unset, extra_args may still carry their flags)
    "models.agent_func": (("train.agent_func_path",), ("agent_func_path",)),
    "data.eval_dataset": (("eval.dataset",), ("eval_dataset",)),
    "data.label_key": (("data.label_key",), ("label_key",)),
    "train.eval_steps": (("eval.steps",), ("eval_steps",)),
    "train.async_train": (("train.async_enable",), ("async_train",)),
    "train.partial_rollout": (("train.partial_rollout_enable",), ("partial_rollout",)),
    "train.vllm_generate_batch_size": (("rollout.vllm_generate_batch_size",), ("vllm_generate_batch_size",)),
    "train.dynamic_filtering": (("algo.dynamic_filtering_enable",), ("dynamic_filtering",)),
    "train.dynamic_filtering_range": (("algo.dynamic_filtering_range",), ("dynamic_filtering_reward_range",)),
    "train.dynamic_batch": (("train.dynamic_batch_enable",), ("use_dynamic_batch",)),
    "train.train_max_tokens_per_gpu": (("train.max_tokens_per_gpu",), ("train_max_tokens_per_gpu",)),
    "train.rollout_max_tokens_per_gpu": (("rollout.max_tokens_per_gpu",), ("rollout_max_tokens_per_gpu",)),
    "train.is_correction": (
        ("algo.advantage.is_correction_level", "algo.advantage.is_correction_mode"),
        ("algo.advantage.is_correction_enable", "algo.advantage.is_correction_type"),
        ("enable_vllm_is_correction", "vllm_is_correction_type"),
        ("enable_vllm_is_correction",),
    ),
    "train.is_correction_threshold": (("algo.advantage.is_correction_threshold",), ("vllm_is_truncated_threshold",)),
    "deepspeed.ring_attn_size": (("ds.ring_attn_size",), ("ring_attn_size",)),
    "deepspeed.tensor_parallel_size": (("ds.tensor_parallel_size",), ("ds_tensor_parallel_size",)),
}

# Config keys that own their flags only when set: left unset (None), the flag may still be given
# in extra_args, as it could before the key existed.
SOFT = frozenset(
    {
        "models.agent_func",
        "data.eval_dataset",
        "data.label_key",
        "train.eval_steps",
        "train.async_train",
        "train.partial_rollout",
        "train.vllm_generate_batch_size",
        "train.dynamic_filtering",
        "train.dynamic_filtering_range",
        "train.dynamic_batch",
        "train.train_max_tokens_per_gpu",
        "train.rollout_max_tokens_per_gpu",
        "train.is_correction",
        "train.is_correction_threshold",
        "deepspeed.ring_attn_size",
        "deepspeed.tensor_parallel_size",
    }
)

# The trainer's settings that start-up checks read (core/settings.py), by the flags that hold
# them, newest spelling first. A setting the release has no flag for keeps its default.
TRAINER: dict[str, tuple[str, ...]] = {
    "actor_model": ("actor.model_name_or_path", "pretrain"),
    "reward_model": ("reward.model_name_or_path", "reward_pretrain"),
    "critic_model": ("critic.model_name_or_path", "critic_pretrain"),
    "remote_reward": ("reward.remote_url", "remote_rm_url"),
    "agent": ("train.agent_func_path", "agent_func_path"),
    "prompt_dataset": ("data.prompt_dataset", "prompt_data"),
    "eval_dataset": ("eval.dataset", "eval_dataset"),
    "input_template": ("data.input_template", "input_template"),
    "estimator": ("algo.advantage.estimator", "advantage_estimator"),
    "n_samples": ("rollout.n_samples_per_prompt", "n_samples_per_prompt"),
    "init_kl_coef": ("algo.kl.init_coef", "init_kl_coef"),
    "rollout_batch": ("rollout.batch_size", "rollout_batch_size"),
    "micro_rollout_batch": ("rollout.micro_batch_size", "micro_rollout_batch_size"),
    "train_batch": ("train.batch_size", "train_batch_size"),
    "micro_train_batch": ("train.micro_batch_size", "micro_train_batch_size"),
    "max_len": ("data.max_len", "max_len"),
    "prompt_max_len": ("prompt_max_len",),
    "generate_max_len": ("rollout.max_new_tokens", "max_new_tokens", "generate_max_len"),
    "packing": ("ds.packing_samples", "packing_samples"),
    "attn_implementation": ("ds.attn_implementation", "attn_implementation"),
    "flash_attn": ("flash_attn",),
    "param_dtype": ("ds.param_dtype", "param_dtype"),
    "bf16": ("bf16",),
    "ring_attn_size": ("ds.ring_attn_size", "ring_attn_size"),
    "ds_tensor_parallel_size": ("ds.tensor_parallel_size", "ds_tensor_parallel_size"),
    "dynamic_batch": ("train.dynamic_batch_enable", "use_dynamic_batch"),
    "train_max_tokens_per_gpu": ("train.max_tokens_per_gpu", "train_max_tokens_per_gpu"),
    "rollout_max_tokens_per_gpu": ("rollout.max_tokens_per_gpu", "rollout_max_tokens_per_gpu"),
    "async_train": ("train.async_enable", "async_train"),
    "partial_rollout": ("train.partial_rollout_enable", "partial_rollout"),
    "vllm_generate_batch_size": ("rollout.vllm_generate_batch_size", "vllm_generate_batch_size"),
    "dynamic_filtering": ("algo.dynamic_filtering_enable", "dynamic_filtering"),
    "dynamic_filtering_range": ("algo.dynamic_filtering_range", "dynamic_filtering_reward_range"),
    "reward_clip_range": ("reward_clip_range",),
    "max_images_per_prompt": ("data.max_images_per_prompt", "max_images_per_prompt"),
    "is_correction_level": ("algo.advantage.is_correction_level",),
    "is_correction_enable": ("algo.advantage.is_correction_enable", "enable_vllm_is_correction"),
    "is_correction_threshold": ("algo.advantage.is_correction_threshold", "vllm_is_truncated_threshold"),
    "vllm_engines": ("vllm.num_engines", "vllm_num_engines"),
    "vllm_tp": ("vllm.tensor_parallel_size", "vllm_tensor_parallel_size"),
    "vllm_sleep": ("vllm.enable_sleep", "vllm_enable_sleep"),
    "colocate_all": ("train.colocate_all", "colocate_all_models"),
}

# Flags the launcher itself sets (never from extra_args).
LOAD_FLAG = ("ckpt.load_enable", "load_checkpoint")
WANDB_KEY_FLAG = ("logger.wandb.key", "use_wandb")
WANDB_PLACEHOLDER = "env:WANDB_API_KEY"  # any value turns W&B on; the key itself comes from the env


def pick(flags: FlagSet, names: tuple[str, ...]) -> str | None:
    """The first of `names` the release has."""
    return next((n for n in names if n in flags), None)


def spelling_for(path: str, flags: FlagSet) -> Spelling | None:
    """How this release spells config key `path`, or None if it has no flag for it."""
    return next((s for s in SPELLINGS[path] if all(flag in flags for flag in s)), None)


def flag_for(path: str, flags: FlagSet) -> str | None:
    """The flag that carries config key `path` in this release (its first, if several)."""
    spelling = spelling_for(path, flags)
    return spelling[0] if spelling else None


def managed_flags(flags: FlagSet) -> dict[str, str]:
    """Flag name -> the config key (or launcher feature) that owns it in this release."""
    if flags.fork is None:
        owned = {flag: path for path, spellings in SPELLINGS.items() for spelling in spellings for flag in spelling}
    else:
        # A fork: a key owns the flags of the spelling the fork uses. Another era's spelling the fork
        # still has (WIST: --max_len beside --prompt_max_len/--generate_max_len) is a flag of its own.
        owned = {flag: path for path in SPELLINGS for flag in spelling_for(path, flags) or ()}
    owned.update({name: "checkpoint.load (rlhf-launch resume adds it too)" for name in LOAD_FLAG})
    owned.update({name: "logging.wandb + WANDB_API_KEY in the environment" for name in WANDB_KEY_FLAG})
    return {flag: path for flag, path in owned.items() if flag in flags}


def similar(name: str, flags: FlagSet) -> str:
    """The release's flag a mistyped or other-era name most likely means ('' if none)."""
    names = list(flags.flags)
    normalized = {n.replace(".", "_"): n for n in names}
    tail = {n.rsplit(".", 1)[-1]: n for n in names}
    for guess in (normalized.get(name.replace(".", "_")), tail.get(name.rsplit(".", 1)[-1])):
        if guess:
            return guess
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else ""
