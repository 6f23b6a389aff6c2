"""Config keys -> the exact trainer flags of one OpenRLHF release.

Each config key lists its spellings, newest first; the first spelling whose flags all exist
in the target release's flag set is used, so era boundaries (flat -> dotted at v0.10.2,
`--flash_attn` -> `--attn_implementation`, `--bf16` -> `--param_dtype`, prompt/generate
lengths -> `--max_len`/`--max_new_tokens`) come from the data, not from version numbers.
A key with no spelling in the release is an error naming the release when its value is on.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable

from rlhf_launch.config import LaunchConfig
from rlhf_launch.findings import Finding, error
from rlhf_launch.openrlhf.flagset import FlagSet
from rlhf_launch.plan import Plan, TrainerExtras


@dataclass(frozen=True)
class Ctx:
    cfg: LaunchConfig
    plan: Plan


Getter = Callable[[Ctx], Any]
Spelling = tuple[tuple[str, Getter], ...]


@dataclass(frozen=True)
class Key:
    path: str
    spellings: tuple[Spelling, ...]
    value: Getter

    def is_on(self, ctx: Ctx) -> bool:
        value = self.value(ctx)
        return value not in (None, False, [], "")


def _key(path: str, *names: str | tuple[str, ...], value: Getter | None = None, each: Getter | None = None) -> Key:
    """A key whose spellings each set their flags to the same value (`each`, default `value`)."""
    getter = value or _attr(path)
    render = each or getter
    spellings = tuple(tuple((flag, render) for flag in ((n,) if isinstance(n, str) else n)) for n in names)
    return Key(path, spellings, getter)


def _attr(path: str) -> Getter:
    parts = path.split(".")

    def get(ctx: Ctx) -> Any:
        node: Any = ctx.cfg
        for part in parts:
            node = getattr(node, part)
        return node

    return get


def _role(role: str, field: str) -> Key:
    """Placement keys render the plan's resolved values (defaults and colocation applied)."""

    def get(ctx: Ctx) -> int:
        resolved = ctx.plan.role(role)
        return resolved.nodes if field == "nodes" else resolved.gpus_per_node

    flag = "num_nodes" if field == "nodes" else "num_gpus_per_node"
    return Key(f"placement.{role}.{field}", (((f"{role}.{flag}", get),), ((f"{role}_{flag}", get),)), get)


def _colocated(kind: str) -> Getter:
    return lambda ctx: ctx.cfg.colocated(kind)  # type: ignore[arg-type]


def _total_len(ctx: Ctx) -> int:
    return ctx.cfg.data.prompt_max_len + ctx.cfg.data.generate_max_len


def _dtype(ctx: Ctx) -> str:
    return "bf16" if ctx.cfg.deepspeed.bf16 else "fp16"


def _attn(ctx: Ctx) -> str:
    return "flash_attention_2" if ctx.cfg.deepspeed.flash_attn else "eager"


KEYS: tuple[Key, ...] = (
    _key("models.actor", "actor.model_name_or_path", "pretrain"),
    _key("models.reward", "reward.model_name_or_path", "reward_pretrain"),
    _key("models.critic", "critic.model_name_or_path", "critic_pretrain"),
    _key("models.reward_remote_url", "reward.remote_url", "remote_rm_url"),
    *(_role(role, field) for role in ("actor", "critic", "ref", "reward") for field in ("nodes", "gpus_per_node")),
    _key("placement.colocate.actor_ref", "train.colocate_actor_ref", "colocate_actor_ref", value=_colocated("actor_ref")),
    _key(
        "placement.colocate.critic_reward",
        "train.colocate_critic_reward",
        "colocate_critic_reward",
        value=_colocated("critic_reward"),
    ),
    _key("placement.colocate.all", "train.colocate_all", "colocate_all_models", value=_colocated("all")),
    _key("placement.vllm.engines", "vllm.num_engines", "vllm_num_engines"),
    _key("placement.vllm.tensor_parallel_size", "vllm.tensor_parallel_size", "vllm_tensor_parallel_size"),
    _key("placement.vllm.gpu_memory_utilization", "vllm.gpu_memory_utilization", "vllm_gpu_memory_utilization"),
    _key("placement.vllm.enable_sleep", "vllm.enable_sleep", "vllm_enable_sleep"),
    _key("deepspeed.zero_stage", "ds.zero_stage", "zero_stage"),
    Key(
        "deepspeed.bf16",
        (
            (("ds.param_dtype", _dtype),),
            (("param_dtype", _dtype),),
            (("bf16", _attr("deepspeed.bf16")),),
        ),
        _attr("deepspeed.bf16"),
    ),
    _key("deepspeed.adam_offload", "ds.adam_offload", "adam_offload"),
    _key("deepspeed.gradient_checkpointing", "actor.gradient_checkpointing_enable", "gradient_checkpointing"),
    Key(
        "deepspeed.flash_attn",
        (
            (("ds.attn_implementation", _attn),),
            (("attn_implementation", _attn),),
            (("flash_attn", _attr("deepspeed.flash_attn")),),
        ),
        _attr("deepspeed.flash_attn"),
    ),
    _key("deepspeed.packing_samples", "ds.packing_samples", "packing_samples"),
    _key("deepspeed.enable_sleep", "ds.enable_sleep", "deepspeed_enable_sleep"),
    _key("deepspeed.ref_reward_offload", ("ref.offload", "reward.offload"), "ref_reward_offload"),
    _key("data.prompt_dataset", "data.prompt_dataset", "prompt_data"),
    _key("data.input_key", "data.input_key", "input_key"),
    _key("data.apply_chat_template", "data.apply_chat_template", "apply_chat_template"),
    Key(
        "data.prompt_max_len",
        (
            (("data.max_len", _total_len), ("rollout.max_new_tokens", _attr("data.generate_max_len"))),
            (("max_len", _total_len), ("max_new_tokens", _attr("data.generate_max_len"))),
            (("prompt_max_len", _attr("data.prompt_max_len")), ("generate_max_len", _attr("data.generate_max_len"))),
        ),
        _attr("data.prompt_max_len"),
    ),
    _key("data.max_samples", "data.max_samples", "max_samples"),
    _key("train.micro_train_batch_size", "train.micro_batch_size", "micro_train_batch_size"),
    _key("train.train_batch_size", "train.batch_size", "train_batch_size"),
    _key("train.micro_rollout_batch_size", "rollout.micro_batch_size", "micro_rollout_batch_size"),
    _key("train.rollout_batch_size", "rollout.batch_size", "rollout_batch_size"),
    _key("train.n_samples_per_prompt", "rollout.n_samples_per_prompt", "n_samples_per_prompt"),
    _key("train.max_epochs", "train.max_epochs", "max_epochs"),
    _key("train.num_episodes", "train.num_episodes", "num_episodes"),
    _key("train.actor_learning_rate", "actor.adam.lr", "actor_learning_rate"),
    _key("train.critic_learning_rate", "critic.adam.lr", "critic_learning_rate"),
    _key("train.init_kl_coef", "algo.kl.init_coef", "init_kl_coef"),
    _key("train.normalize_reward", "reward.normalize_enable", "normalize_reward"),
    _key("train.advantage_estimator", "algo.advantage.estimator", "advantage_estimator"),
    _key("train.seed", "train.seed", "seed"),
    _key("checkpoint.save_path", "ckpt.output_dir", "save_path"),
    _key("checkpoint.ckpt_path", "ckpt.path", "ckpt_path"),
    _key("checkpoint.save_steps", "ckpt.save_steps", "save_steps"),
    _key("checkpoint.save_hf", "ckpt.save_hf", "save_hf_ckpt"),
    _key("checkpoint.universal", "ds.use_universal_ckpt", "use_ds_universal_ckpt"),
    _key("checkpoint.save_value_network", "critic.save_value_network", "save_value_network"),
    _key("checkpoint.max_num", "ckpt.max_num", "max_ckpt_num"),
    _key("logging.logging_steps", "logger.logging_steps", "logging_steps"),
    _key("logging.wandb.project", "logger.wandb.project", "wandb_project"),
    _key("logging.wandb.org", "logger.wandb.org", "wandb_org"),
    _key("logging.wandb.group", "logger.wandb.group", "wandb_group"),
    _key("logging.wandb.run_name", "logger.wandb.run_name", "wandb_run_name"),
)

# Flags the launcher itself sets (never from extra_args).
LOAD_FLAG = ("ckpt.load_enable", "load_checkpoint")
WANDB_KEY_FLAG = ("logger.wandb.key", "use_wandb")
WANDB_PLACEHOLDER = "env:WANDB_API_KEY"  # any value turns W&B on; the key itself comes from the env

# Trainer settings that change the layout, by spelling (see TrainerExtras).
_EXTRAS = {
    "async_train": ("train.async_enable", "async_train"),
    "agent": ("train.agent_func_path", "agent_func_path"),
    "ring_attn_size": ("ds.ring_attn_size", "ring_attn_size"),
    "ds_tensor_parallel_size": ("ds.tensor_parallel_size", "ds_tensor_parallel_size"),
}


def pick(flags: FlagSet, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in flags), None)


def spelling_for(key: Key, flags: FlagSet) -> Spelling | None:
    return next((s for s in key.spellings if all(flag in flags for flag, _ in s)), None)


def managed_flags(flags: FlagSet) -> dict[str, str]:
    """Flag name -> the config key (or launcher feature) that owns it in this release."""
    owned = {}
    for key in KEYS:
        for spelling in key.spellings:
            for flag, _ in spelling:
                owned[flag] = key.path
    for name in LOAD_FLAG:
        owned[name] = "resume (rlhf-launch resume adds it)"
    for name in WANDB_KEY_FLAG:
        owned[name] = "logging.wandb + WANDB_API_KEY in the environment"
    return {flag: path for flag, path in owned.items() if flag in flags}


def extras(cfg: LaunchConfig, flags: FlagSet) -> TrainerExtras:
    values: dict[str, Any] = {}
    for field, names in _EXTRAS.items():
        for name in names:
            if name in cfg.extra_args and name in flags:
                values[field] = cfg.extra_args[name]

    def size(field: str) -> int:
        value = values.get(field)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    return TrainerExtras(
        async_train=values.get("async_train") is True,
        agent=bool(values.get("agent")),
        ring_attn_size=size("ring_attn_size"),
        ds_tensor_parallel_size=size("ds_tensor_parallel_size"),
    )


def _tokens(flags: FlagSet, name: str, value: Any) -> list[str]:
    flag = flags.flags[name]
    if flag.action in ("store_true", "store_false"):
        wanted = flag.action == "store_true"
        if not isinstance(value, bool):
            raise TypeError(f"--{name} is a switch; got {value!r}")
        return [f"--{name}"] if value == wanted else []
    if value is None:
        return []
    if isinstance(value, bool):
        raise TypeError(f"--{name} takes a value, not a switch")
    if isinstance(value, (list, tuple)):
        return [f"--{name}", *(str(v) for v in value)]
    return [f"--{name}", str(value)]


def _similar(name: str, flags: FlagSet) -> str:
    names = list(flags.flags)
    normalized = {n.replace(".", "_"): n for n in names}
    tail = {n.rsplit(".", 1)[-1]: n for n in names}
    for guess in (normalized.get(name.replace(".", "_")), tail.get(name.rsplit(".", 1)[-1])):
        if guess:
            return guess
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else ""


@dataclass(frozen=True)
class Rendered:
    argv: list[str]
    findings: list[Finding]


def render(
    cfg: LaunchConfig, plan: Plan, flags: FlagSet, *, wandb: bool = False, load_checkpoint: bool = False
) -> Rendered:
    """The trainer's argv for this release, and errors for what the release cannot express."""
    ctx = Ctx(cfg, plan)
    argv: list[str] = []
    findings: list[Finding] = []
    for key in KEYS:
        spelling = spelling_for(key, flags)
        if spelling is None:
            if key.is_on(ctx):
                findings.append(
                    error(key.path, f"openrlhf {flags.version} has no flag for {key.path}", "remove it or pick a release that has it")
                )
            continue
        for name, getter in spelling:
            argv += _tokens(flags, name, getter(ctx))
    if wandb:
        name = pick(flags, WANDB_KEY_FLAG)
        if name:
            argv += [f"--{name}", WANDB_PLACEHOLDER]
    if load_checkpoint:
        name = pick(flags, LOAD_FLAG)
        if name is None:
            findings.append(error("resume", f"openrlhf {flags.version} has no checkpoint load flag"))
        else:
            argv.append(f"--{name}")
    argv_extra, extra_findings = _render_extra(cfg, flags)
    return Rendered(argv + argv_extra, findings + extra_findings)


def _render_extra(cfg: LaunchConfig, flags: FlagSet) -> tuple[list[str], list[Finding]]:
    argv: list[str] = []
    findings: list[Finding] = []
    owned = managed_flags(flags)
    for name, value in cfg.extra_args.items():
        key = f"extra_args.{name}"
        if name.startswith("-"):
            findings.append(error(key, f"write flag names without dashes: {name.lstrip('-')}"))
            continue
        if name not in flags:
            guess = _similar(name, flags)
            hint = f"openrlhf {flags.version} calls it {guess}" if guess else "see the release's train_ppo_ray flags"
            findings.append(error(key, f"openrlhf {flags.version} has no flag --{name}", hint))
            continue
        if name in owned:
            findings.append(error(key, f"--{name} is set by the launcher from {owned[name]}", f"set {owned[name]} instead"))
            continue
        try:
            argv += _tokens(flags, name, value)
        except TypeError as exc:
            findings.append(error(key, str(exc)))
    return argv, findings
