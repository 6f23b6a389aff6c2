"""The trainer's settings as OpenRLHF's start-up leaves them, and the start-up checks on them. Pure.

`resolve(cfg, flags, argv)` reads the argv the launcher renders (config keys and extra_args
alike, in the release's own flag definitions and defaults), then replays the checks and silent
corrections of `train_ppo_ray.py` for that release, in the trainer's order: each correction
becomes a warning saying what the trainer will do, each check an error naming the key that
set the value. The releases that have each check are data (openrlhf/checks.py). Checks on the
layout (colocation, sample batches, GPU counts) stay in core/rules.py, which reads these
settings after the corrections.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.errors import UserError
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.checks import has
from rlhf_launch.openrlhf.flagset import FlagSet, version_key
from rlhf_launch.util import versions

FLASH = "flash_attention_2"


@dataclass(frozen=True)
class Settings:
    """What the trainer runs with (after the corrections, once `startup` has run)."""

    version: str
    actor_model: str | None = None
    reward_model: str | None = None
    critic_model: str | None = None
    remote_reward: tuple[str, ...] = ()  # URLs, a reward-function file, or ("agent",)
    agent: str | None = None
    prompt_dataset: str | None = None
    eval_dataset: str | None = None
    input_template: str | None = None
    estimator: str = "gae"
    n_samples: int = 1
    init_kl_coef: float = 0.0
    rollout_batch: int = 1
    micro_rollout_batch: int = 1
    train_batch: int = 1
    micro_train_batch: int = 1
    max_len: int = 0  # prompt + generated tokens
    packing: bool = False
    attention: str = FLASH
    param_dtype: str = "bf16"
    ring_attn_size: int = 1
    ds_tensor_parallel_size: int = 1
    dynamic_batch: bool = False
    train_max_tokens_per_gpu: int | None = None
    rollout_max_tokens_per_gpu: int | None = None
    async_train: bool = False
    partial_rollout: bool = False
    vllm_generate_batch_size: int | None = None
    dynamic_filtering: bool = False
    dynamic_filtering_range: tuple[float, float] = (0.0, 1.0)
    max_images_per_prompt: int = 0
    is_correction: bool = False
    is_correction_threshold: tuple[float, ...] = ()
    vllm_engines: int = 0
    vllm_sleep: bool = False
    colocate_all: bool = False
    keys: dict[str, str] = field(default_factory=dict, compare=False, repr=False)  # setting -> the key that set it

    def key(self, name: str) -> str:
        """The config key (or extra_args.<flag>) a finding about setting `name` should name."""
        return self.keys.get(name, name)


# ---------------------------------------------------------------- reading the argv


_PARSERS: dict[int, tuple[FlagSet, argparse.ArgumentParser]] = {}


def _parser(flags: FlagSet) -> argparse.ArgumentParser:
    """The release's parser, built once per flag set (a few ms each)."""
    cached = _PARSERS.get(id(flags))
    if cached is None or cached[0] is not flags:
        cached = _PARSERS[id(flags)] = (flags, flags.parser())
    return cached[1]


def _chunks(argv: list[str], flags: FlagSet) -> list[list[str]]:
    out: list[list[str]] = []
    for token in argv:
        if (token.startswith("--") and token[2:] in flags) or not out:
            out.append([token])
        else:
            out[-1].append(token)
    return out


def parse(flags: FlagSet, argv: list[str]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The release's values for every dest (defaults where argv says nothing), and the flags its
    parser refused, each with argparse's message. One refused flag leaves the others read."""
    parser = _parser(flags)
    namespace = parser.parse_args([])
    whole = argparse.Namespace(**vars(namespace))
    try:
        _, unknown = parser.parse_known_args(argv, namespace=whole)
        if not unknown:
            return vars(whole), []
    except UserError:
        pass  # find which flags, one at a time
    problems: list[tuple[str, str]] = []
    for chunk in _chunks(argv, flags):
        name = chunk[0][2:] if chunk[0].startswith("--") else chunk[0]
        try:
            _, unknown = parser.parse_known_args(chunk, namespace=namespace)
        except UserError as exc:
            message = exc.message.split(": ", 1)[-1]  # after the parser's name
            problems.append((name, message.split(": ", 1)[-1] if message.startswith("argument ") else message))
            continue
        if unknown:
            problems.append((name, f"unrecognized arguments: {' '.join(unknown)}"))
    return vars(namespace), problems


def _flag_keys(cfg: LaunchConfig, flags: FlagSet) -> dict[str, str]:
    """Flag -> the key the user wrote it under: an extra_args entry (in any era's spelling), else
    the config key that owns it."""
    keys = dict(dialect.managed_flags(flags))
    for raw, value in cfg.extra_args.items():
        try:
            pairs = renames.spelled_pairs(raw, value, flags)
        except (KeyError, TypeError, ValueError):
            pairs = ()
        for name, _ in pairs or ((raw, value),):
            keys[name] = f"extra_args.{raw}"
    return keys


def _keys(cfg: LaunchConfig, flags: FlagSet, by_flag: dict[str, str]) -> dict[str, str]:
    """Setting -> the key a finding about it names."""
    keys = {}
    for setting, names in dialect.TRAINER.items():
        flag = dialect.pick(flags, names)
        if flag is not None:
            keys[setting] = by_flag.get(flag, f"extra_args.{flag}")
    keys["remote_reward"] = "models.reward_func" if cfg.models.reward_func else keys.get("remote_reward", "models.reward_remote_url")
    for new_name, old_name in (
        ("attn_implementation", "flash_attn"),
        ("param_dtype", "bf16"),
        ("is_correction_level", "is_correction_enable"),
    ):
        if new_name not in keys and old_name in keys:
            keys[new_name] = keys[old_name]
    return keys


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def read(cfg: LaunchConfig, flags: FlagSet, argv: list[str]) -> tuple[Settings, list[Finding]]:
    """The settings as parsed from `argv`, before OpenRLHF's corrections; errors for refused flags."""
    values, problems = parse(flags, argv)
    by_flag = _flag_keys(cfg, flags)
    keys = _keys(cfg, flags, by_flag)
    findings = [error(by_flag.get(flag, f"extra_args.{flag}"), f"{flags.label} refuses --{flag}: {message}") for flag, message in problems]

    def get(name: str, default: Any = None) -> Any:
        flag = dialect.pick(flags, dialect.TRAINER[name])
        if flag is None:
            return default
        value = values.get(flags.flags[flag].dest)
        return default if value is None else value

    remote = get("remote_reward")
    max_len = _int(get("max_len"), 0) or _int(get("prompt_max_len"), 0) + _int(get("generate_max_len"), 0)
    attention = get("attn_implementation")
    if attention is None:
        attention = FLASH if get("flash_attn", False) else "eager"
    dtype = get("param_dtype")
    if dtype is None:
        dtype = "bf16" if get("bf16", False) else "fp16"
    if "algo.advantage.is_correction_level" in flags:
        is_correction = get("is_correction_level", "off") != "off"
    else:
        is_correction = bool(get("is_correction_enable", False))
    threshold = get("is_correction_threshold", ())
    if _is_0_8_1(flags.version):
        span = get("reward_clip_range", (-10.0, 10.0))  # 0.8.1 checks this range instead of its own
    else:
        span = get("dynamic_filtering_range", (0.0, 1.0))
    settings = Settings(
        version=flags.version,
        actor_model=get("actor_model"),
        reward_model=get("reward_model"),
        critic_model=get("critic_model"),
        remote_reward=tuple(remote.split(",")) if isinstance(remote, str) and remote else (),
        agent=get("agent") or None,
        prompt_dataset=get("prompt_dataset"),
        eval_dataset=get("eval_dataset") or None,
        input_template=get("input_template"),
        estimator=str(get("estimator", "gae")),
        n_samples=_int(get("n_samples"), 1),
        init_kl_coef=float(get("init_kl_coef", 0.0)),
        rollout_batch=_int(get("rollout_batch"), 1),
        micro_rollout_batch=_int(get("micro_rollout_batch"), 1),
        train_batch=_int(get("train_batch"), 1),
        micro_train_batch=_int(get("micro_train_batch"), 1),
        max_len=max_len,
        packing=bool(get("packing", False)),
        attention=str(attention),
        param_dtype=str(dtype),
        ring_attn_size=max(1, _int(get("ring_attn_size"), 1)),
        ds_tensor_parallel_size=max(1, _int(get("ds_tensor_parallel_size"), 1)),
        dynamic_batch=bool(get("dynamic_batch", False)),
        train_max_tokens_per_gpu=get("train_max_tokens_per_gpu"),
        rollout_max_tokens_per_gpu=get("rollout_max_tokens_per_gpu"),
        async_train=bool(get("async_train", False)),
        partial_rollout=bool(get("partial_rollout", False)),
        vllm_generate_batch_size=get("vllm_generate_batch_size"),
        dynamic_filtering=bool(get("dynamic_filtering", False)),
        dynamic_filtering_range=_span(span),
        max_images_per_prompt=_int(get("max_images_per_prompt"), 0),
        is_correction=is_correction,
        is_correction_threshold=tuple(threshold) if isinstance(threshold, (list, tuple)) else (threshold,),
        vllm_engines=_int(get("vllm_engines"), 0),
        vllm_sleep=bool(get("vllm_sleep", False)),
        colocate_all=bool(get("colocate_all", False)),
        keys=keys,
    )
    return settings, findings


def _is_0_8_1(version: str) -> bool:
    return version_key("0.8.1") <= version_key(version) < version_key("0.8.1.post1")


def _span(value: Any) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        return (0.0, 1.0)
    return (low, high)


# ---------------------------------------------------------------- the start-up, replayed


def startup(s: Settings, flags: FlagSet) -> tuple[Settings, list[Finding]]:
    """OpenRLHF's `__main__` checks and corrections after parsing, in its order, for this release."""
    out: list[Finding] = []
    v = flags.version

    def correct(name: str, message: str, hint: str = "") -> None:
        out.append(warning(s.key(name), f"openrlhf {v}: {message}", hint))

    if s.agent:
        if s.reward_model or s.remote_reward:
            given = s.reward_model or ",".join(s.remote_reward)
            correct(
                "agent", f"with an agent function the agent scores rollouts; {given} is not used", "remove the reward model or the agent"
            )
        s = replace(s, remote_reward=("agent",))

    if has("is_threshold_count", v):
        threshold = s.is_correction_threshold
        if len(threshold) == 1:
            s = replace(s, is_correction_threshold=(0.0, threshold[0]))
        elif len(threshold) != 2:
            out.append(
                error(
                    s.key("is_correction_threshold"),
                    f"openrlhf {v} takes HIGH or LOW HIGH for the IS-correction threshold, not {len(threshold)} values",
                    "give one or two values",
                )
            )

    if s.estimator != "gae":
        if s.critic_model:
            correct(
                "critic_model",
                f"the {s.estimator} estimator trains no critic: the critic {s.critic_model} is dropped",
                "remove models.critic",
            )
        s = replace(s, critic_model=None)
    elif s.critic_model is None:
        if s.remote_reward:
            s = replace(s, critic_model=s.actor_model)
        elif s.reward_model:
            s = replace(s, critic_model=s.reward_model.split(",")[0])

    if has("vlm_no_critic", v) and s.max_images_per_prompt > 0:
        if s.critic_model is not None:
            out.append(
                error(
                    s.key("max_images_per_prompt"),
                    f"openrlhf {v} trains vision-language models (max_images_per_prompt > 0) without a critic, and gae has one",
                    "use a critic-free estimator, e.g. train.advantage_estimator=reinforce_baseline",
                )
            )
        if s.packing:
            out.append(
                error(
                    s.key("packing"),
                    f"openrlhf {v} does not pack samples of vision-language models (max_images_per_prompt > 0)",
                    "set deepspeed.packing_samples: false",
                )
            )

    if s.input_template and "{}" not in s.input_template:
        correct(
            "input_template",
            f"the input template {s.input_template!r} has no '{{}}' for the prompt: it is dropped",
            "put {} where the prompt goes",
        )
        s = replace(s, input_template=None)

    forced_by = ""
    if has("ring_forces_packing", v) and s.ring_attn_size > 1 and not s.packing:
        correct("ring_attn_size", f"ring attention (ring_attn_size {s.ring_attn_size}) switches packing_samples on")
        s, forced_by = replace(s, packing=True), "ring_attn_size"
    if has("dynamic_batch_forces_packing", v) and s.dynamic_batch:
        if not s.packing:
            correct("dynamic_batch", "dynamic batching switches packing_samples on")
            s, forced_by = replace(s, packing=True), "dynamic_batch"
        if s.rollout_max_tokens_per_gpu is None:
            s = replace(s, rollout_max_tokens_per_gpu=s.train_max_tokens_per_gpu)

    if s.packing:
        if "flash_attention" not in s.attention:
            correct("attn_implementation", f"packing_samples switches attention from {s.attention} to {FLASH}")
            s = replace(s, attention=FLASH)
        if s.vllm_engines <= 0:
            why = f" ({'ring attention' if forced_by == 'ring_attn_size' else 'dynamic batching'} switches it on)" if forced_by else ""
            out.append(
                error(
                    s.key(forced_by or "packing"),
                    f"OpenRLHF supports packing_samples only with vLLM engines{why}",
                    "set placement.vllm.engines >= 1 or packing_samples: false",
                )
            )

    if s.vllm_sleep and not s.colocate_all:
        s = replace(s, vllm_sleep=False)  # reported by rules.colocation, which knows the config

    if s.partial_rollout and has("partial_rollout_needs_async", v) and not s.async_train:
        out.append(
            error(
                s.key("partial_rollout"), "partial rollout needs async training", "set train.async_train: true, or remove partial_rollout"
            )
        )

    if s.eval_dataset and not s.remote_reward:
        out.append(
            error(
                s.key("eval_dataset"),
                "an eval dataset needs a remote reward or an agent function: OpenRLHF scores evaluation samples remotely",
                "set models.reward_remote_url, models.reward_func or models.agent_func, or remove the eval dataset",
            )
        )

    if has("generate_batch_default", v) and not s.vllm_generate_batch_size:
        s = replace(s, vllm_generate_batch_size=s.rollout_batch)
    generate = s.vllm_generate_batch_size or s.rollout_batch
    if has("generate_batch_needs_async", v) and generate > s.rollout_batch and not s.async_train:
        out.append(
            error(
                s.key("vllm_generate_batch_size"),
                f"a vLLM generate batch of {generate} prompts, larger than the rollout batch of {s.rollout_batch}, needs async "
                "training (the extra samples wait in its queue)",
                "set train.async_train: true, or a generate batch <= train.rollout_batch_size",
            )
        )

    if s.dynamic_filtering and has("dynamic_filtering_remote", v):
        low, high = s.dynamic_filtering_range
        if low >= high:
            range_key = "reward_clip_range" if _is_0_8_1(v) else "dynamic_filtering_range"
            out.append(
                error(s.key(range_key), f"dynamic filtering needs an increasing reward range, got [{low:g}, {high:g}]", "e.g. [0.0, 1.0]")
            )
        if not s.remote_reward:
            out.append(
                error(
                    s.key("dynamic_filtering"),
                    "dynamic filtering needs a remote reward or an agent function",
                    "set models.reward_remote_url, models.reward_func or models.agent_func",
                )
            )
        if s.n_samples <= 1:
            out.append(
                error(s.key("n_samples"), "dynamic filtering compares the samples of a prompt and needs n_samples_per_prompt > 1", "e.g. 8")
            )
    return s, out


def trainer_checks(s: Settings, flags: FlagSet) -> list[Finding]:
    """What train() checks on the driver before the trainer actors, besides the layout (core/rules.py)."""
    out = []
    v = flags.version
    if s.ds_tensor_parallel_size > 1 and s.param_dtype != "bf16":
        out.append(
            error(
                s.key("ds_tensor_parallel_size"),
                f"DeepSpeed tensor parallelism (tensor_parallel_size {s.ds_tensor_parallel_size}) needs bf16, not {s.param_dtype}",
                "set deepspeed.bf16: true (or deepspeed.param_dtype: bf16)",
            )
        )
    if has("no_vllm_max_len", v) and s.vllm_engines <= 0:
        out.append(
            error(
                "placement.vllm.engines",
                f"openrlhf {v} fails at start-up without vLLM engines (train() reads max_len, set only when engines are asked for)",
                "use vLLM engines, or openrlhf 0.9.7 or 0.11.0 and later",
            )
        )
    pinned = flags.pins.get("vllm")
    if (
        has("is_logprobs_vllm", v)
        and s.is_correction
        and s.vllm_engines > 0
        and pinned
        and versions.base(pinned) <= versions.parse("0.10.0")
    ):
        out.append(
            error(
                s.key("is_correction_level" if "algo.advantage.is_correction_level" in flags else "is_correction_enable"),
                f"IS correction needs vLLM > 0.10.0 (its logprobs_mode), and openrlhf {v} pins vllm=={pinned}",
                "pick openrlhf 0.8.10 or later, or turn IS correction off",
            )
        )
    return out


def resolve(cfg: LaunchConfig, flags: FlagSet, argv: list[str]) -> tuple[Settings, list[Finding]]:
    """Settings after OpenRLHF's start-up corrections, and the findings of its start-up checks."""
    given, findings = read(cfg, flags, argv)
    settings, more = startup(given, flags)
    return settings, [*findings, *more, *trainer_checks(settings, flags)]
