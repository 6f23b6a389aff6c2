"""Launch configs that target every start-up check of OpenRLHF's `train_ppo_ray.py`, per release.

A corpus row is a raw config mapping (what a YAML file would hold) for one release. Bases are
four everyday layouts; variations push one setting at a time across one check of the trainer
(each check seen failing and passing), or across one of the launcher's own refusals. Settings
that have no config key in older launchers are written as `extra_args` in the release's own
spelling (`via_extra`); the same settings written as the launcher's config keys are the
`keyed` variations. A variation returns None where the release lacks what it needs.

    for case in corpus("0.11.2"): case.name, case.data
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlhf_launch.openrlhf.flagset import FlagSet, load, version_key

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "configs"
DATA = Path(__file__).resolve().parent / "data"
REWARD_FUNC = DATA / "reward_func.py"
AGENT_FUNC = DATA / "agent_func.py"


@dataclass(frozen=True)
class Case:
    name: str
    data: dict[str, Any]
    keyed: bool = False  # uses config keys that older launchers do not have


def _models(actor: str = "org/actor", reward: str | None = "org/rm") -> dict[str, Any]:
    return {"actor": actor, **({"reward": reward} if reward else {})}


BASES: dict[str, dict[str, Any]] = {
    # actor 8 + critic 8 + ref 4 + reward 4 + vLLM 2x4 = 32 on 4 nodes
    "separate": {
        "cluster": {"nodes": 4, "gpus_per_node": 8},
        "models": _models(),
        "data": {"prompt_dataset": "org/prompts"},
        "placement": {
            "actor": {"nodes": 1, "gpus_per_node": 8},
            "critic": {"nodes": 1, "gpus_per_node": 8},
            "ref": {"nodes": 1, "gpus_per_node": 4},
            "reward": {"nodes": 1, "gpus_per_node": 4},
            "vllm": {"engines": 2, "tensor_parallel_size": 4},
        },
        "train": {"rollout_batch_size": 128, "micro_rollout_batch_size": 4, "train_batch_size": 64, "micro_train_batch_size": 2},
    },
    # everything on the same 8 GPUs, vLLM 4x2, both sleeps
    "colocate_all": {
        "cluster": {"nodes": 1, "gpus_per_node": 8},
        "models": _models(),
        "data": {"prompt_dataset": "org/prompts"},
        "placement": {
            "actor": {"nodes": 1, "gpus_per_node": 8},
            "vllm": {"engines": 4, "tensor_parallel_size": 2, "enable_sleep": True},
            "colocate": ["all"],
        },
        "deepspeed": {"enable_sleep": True},
        "train": {"rollout_batch_size": 64, "micro_rollout_batch_size": 4, "train_batch_size": 64, "micro_train_batch_size": 1},
    },
    # critic-free with a remote reward: actor+ref 8 + vLLM 4x2 = 16 on 2 nodes
    "critic_free": {
        "cluster": {"nodes": 2, "gpus_per_node": 8},
        "models": {"actor": "org/actor", "reward_remote_url": "http://rm:5000/get_reward"},
        "data": {"prompt_dataset": "org/prompts"},
        "placement": {
            "actor": {"nodes": 1, "gpus_per_node": 8},
            "vllm": {"engines": 4, "tensor_parallel_size": 2},
            "colocate": ["actor_ref"],
        },
        "train": {
            "advantage_estimator": "reinforce_baseline",
            "n_samples_per_prompt": 4,
            "rollout_batch_size": 32,
            "micro_rollout_batch_size": 4,
            "train_batch_size": 128,
            "micro_train_batch_size": 2,
        },
    },
    # actor+ref 2 + critic+reward 2 + vLLM 4x1 = 8
    "tiny": {
        "cluster": {"nodes": 1, "gpus_per_node": 8},
        "models": _models(),
        "data": {"prompt_dataset": "org/prompts"},
        "placement": {
            "actor": {"nodes": 1, "gpus_per_node": 2},
            "critic": {"nodes": 1, "gpus_per_node": 2},
            "vllm": {"engines": 4, "tensor_parallel_size": 1},
            "colocate": ["actor_ref", "critic_reward"],
        },
        "train": {"rollout_batch_size": 64, "micro_rollout_batch_size": 8, "train_batch_size": 32, "micro_train_batch_size": 4},
    },
}

# A setting outside the older launchers' schema -> its flag in each era (first present wins).
NAMES: dict[str, tuple[str, ...]] = {
    "async": ("train.async_enable", "async_train"),
    "partial_rollout": ("train.partial_rollout_enable", "partial_rollout"),
    "generate_batch": ("rollout.vllm_generate_batch_size", "vllm_generate_batch_size"),
    "eval_dataset": ("eval.dataset", "eval_dataset"),
    "agent": ("train.agent_func_path", "agent_func_path"),
    "dynamic_filtering": ("algo.dynamic_filtering_enable", "dynamic_filtering"),
    "dynamic_filtering_range": ("algo.dynamic_filtering_range", "dynamic_filtering_reward_range"),
    "dynamic_batch": ("train.dynamic_batch_enable", "use_dynamic_batch"),
    "train_tokens": ("train.max_tokens_per_gpu", "train_max_tokens_per_gpu"),
    "rollout_tokens": ("rollout.max_tokens_per_gpu", "rollout_max_tokens_per_gpu"),
    "ring": ("ds.ring_attn_size", "ring_attn_size"),
    "ds_tp": ("ds.tensor_parallel_size", "ds_tensor_parallel_size"),
    "images": ("data.max_images_per_prompt", "max_images_per_prompt"),
    "input_template": ("data.input_template", "input_template"),
    "is_threshold": ("algo.advantage.is_correction_threshold", "vllm_is_truncated_threshold"),
    "is_level": ("algo.advantage.is_correction_level",),
    "is_enable": ("algo.advantage.is_correction_enable", "enable_vllm_is_correction"),
}


def name(flags: FlagSet, setting: str) -> str | None:
    return next((n for n in NAMES[setting] if n in flags), None)


def extra(flags: FlagSet, **settings: Any) -> dict[str, Any] | None:
    """`extra_args` for these settings in the release's spelling; None if the release lacks one."""
    out = {}
    for setting, value in settings.items():
        flag = name(flags, setting)
        if flag is None:
            return None
        out[flag] = value
    return {"extra_args": out}


def _is_on(flags: FlagSet) -> dict[str, Any] | None:
    if "algo.advantage.is_correction_level" in flags:
        return {"is_level": "token"}
    return {"is_enable": True} if name(flags, "is_enable") else None


Variation = Callable[[FlagSet, str], "dict[str, Any] | None"]


def _with(*parts: dict[str, Any] | None) -> dict[str, Any] | None:
    """Merge override mappings (nested); None if any part is None."""
    out: dict[str, Any] = {}
    for part in parts:
        if part is None:
            return None
        _merge(out, part)
    return out


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


REMOTE = {"models": {"reward": None, "reward_remote_url": "http://rm:5000/get_reward"}}
CRITIC_FREE = {"train": {"advantage_estimator": "reinforce"}}
NO_VLLM = {"placement": {"vllm": {"engines": 0, "enable_sleep": False}}}
_DEFAULT = {"nodes": None, "gpus_per_node": None}  # the role's placement left to its default
ALL8 = {
    "placement": {"colocate": ["all"], "actor": {"nodes": 1, "gpus_per_node": 8}, "critic": _DEFAULT, "ref": _DEFAULT, "reward": _DEFAULT}
}


def _group_n1(flags: FlagSet, base: str) -> dict[str, Any] | None:
    return {"train": {"advantage_estimator": flags.group_estimators[-1], "n_samples_per_prompt": 1}}


def _newer_group_estimator_n1(flags: FlagSet, base: str) -> dict[str, Any] | None:
    """dr_grpo with one sample: an error from 0.11.0, accepted (a silent no-op) before."""
    choices = flags.get("algo.advantage.estimator") or flags.get("advantage_estimator")
    if choices is None or not choices.choices or "dr_grpo" not in choices.choices:
        return None
    return {"train": {"advantage_estimator": "dr_grpo", "n_samples_per_prompt": 1}}


def _clip_range(flags: FlagSet, base: str) -> dict[str, Any] | None:
    """Dynamic filtering with a decreasing reward_clip_range: what 0.8.1 checks (later releases do not)."""
    switch = name(flags, "dynamic_filtering")
    if switch is None or "reward_clip_range" not in flags:
        return None
    return _with(REMOTE, {"train": {"n_samples_per_prompt": 4}, "extra_args": {switch: True, "reward_clip_range": [1.0, -1.0]}})


def _vlm(flags: FlagSet, *parts: dict[str, Any] | None) -> dict[str, Any] | None:
    return _with(extra(flags, images=2), *parts)


# Each variation is (name, function of (flag set, base name) -> overrides or None).
VARIATIONS: list[tuple[str, Variation]] = [
    ("plain", lambda f, b: {}),
    ("no_vllm", lambda f, b: _with(NO_VLLM, {"deepspeed": {"packing_samples": False}})),
    ("kl0", lambda f, b: {"train": {"init_kl_coef": 0}}),
    # colocation asserts in train()
    ("actor_ref_mismatch", lambda f, b: {"placement": {"colocate": ["actor_ref"], "ref": {"nodes": 1, "gpus_per_node": 4}}}),
    (
        "actor_ref_mismatch_kl0",
        lambda f, b: {"placement": {"colocate": ["actor_ref"], "ref": {"nodes": 1, "gpus_per_node": 4}}, "train": {"init_kl_coef": 0}},
    ),
    (
        "critic_reward_mismatch",
        lambda f, b: {
            "placement": {
                "colocate": ["critic_reward"],
                "critic": {"nodes": 1, "gpus_per_node": 4},
                "reward": {"nodes": 1, "gpus_per_node": 2},
            }
        },
    ),
    (
        "critic_reward_mismatch_no_critic",
        lambda f, b: _with(
            {
                "placement": {
                    "colocate": ["critic_reward"],
                    "critic": {"nodes": 1, "gpus_per_node": 4},
                    "reward": {"nodes": 1, "gpus_per_node": 2},
                }
            },
            CRITIC_FREE,
        ),
    ),
    ("all_engines_mismatch", lambda f, b: _with(ALL8, {"placement": {"vllm": {"engines": 1, "tensor_parallel_size": 4}}})),
    (
        "all_engines_match",
        lambda f, b: _with(ALL8, {"placement": {"vllm": {"engines": 2, "tensor_parallel_size": 4, "enable_sleep": True}}}),
    ),
    ("all_async", lambda f, b: _with(ALL8, {"placement": {"vllm": {"enable_sleep": False}}}, extra(f, **{"async": True}))),
    ("all_async_vllm_sleep", lambda f, b: _with(ALL8, {"placement": {"vllm": {"enable_sleep": True}}}, extra(f, **{"async": True}))),
    ("all_smaller_critic", lambda f, b: _with(ALL8, {"placement": {"critic": {"nodes": 1, "gpus_per_node": 4}}})),
    ("all_smaller_reward", lambda f, b: _with(ALL8, {"placement": {"reward": {"nodes": 1, "gpus_per_node": 4}}})),
    ("all_smaller_ref", lambda f, b: _with(ALL8, {"placement": {"ref": {"nodes": 1, "gpus_per_node": 4}}})),
    ("all_larger_critic", lambda f, b: _with(ALL8, {"placement": {"critic": {"nodes": 2, "gpus_per_node": 8}}})),
    # estimators
    ("group_estimator_n1", _group_n1),
    ("group_estimator_n4", lambda f, b: {"train": {"advantage_estimator": f.group_estimators[0], "n_samples_per_prompt": 4}}),
    ("dr_grpo_n1", _newer_group_estimator_n1),
    ("unknown_estimator", lambda f, b: {"train": {"advantage_estimator": "no_such_estimator"}}),
    # batch arithmetic
    ("sample_batches_short", lambda f, b: {"train": {"rollout_batch_size": 2, "micro_rollout_batch_size": 2, "n_samples_per_prompt": 1}}),
    (
        "sample_batches_ring",
        lambda f, b: _with(
            {"train": {"rollout_batch_size": 4, "micro_rollout_batch_size": 2, "n_samples_per_prompt": 1}}, extra(f, ring=4)
        ),
    ),
    ("micro_rollout_not_dividing", lambda f, b: {"train": {"rollout_batch_size": 66, "micro_rollout_batch_size": 4}}),
    ("micro_train_not_dividing", lambda f, b: {"train": {"train_batch_size": 60, "micro_train_batch_size": 1}}),
    (
        "ds_batch_critic6",
        lambda f, b: {"placement": {"colocate": [], "critic": {"nodes": 1, "gpus_per_node": 6}}, "train": {"advantage_estimator": "gae"}},
    ),
    (
        "ds_batch_ref3",
        lambda f, b: {"placement": {"colocate": [], "ref": {"nodes": 1, "gpus_per_node": 3}, "reward": {"nodes": 1, "gpus_per_node": 3}}},
    ),
    # packing and what switches it on
    ("packing", lambda f, b: {"deepspeed": {"packing_samples": True}}),
    ("packing_no_vllm", lambda f, b: _with(NO_VLLM, {"deepspeed": {"packing_samples": True}})),
    ("packing_eager", lambda f, b: {"deepspeed": {"packing_samples": True, "flash_attn": False}}),
    ("ring", lambda f, b: extra(f, ring=2)),
    ("ring_no_vllm", lambda f, b: _with(NO_VLLM, {"deepspeed": {"packing_samples": False}}, extra(f, ring=2))),
    ("dynamic_batch", lambda f, b: extra(f, dynamic_batch=True, train_tokens=8192, rollout_tokens=16384)),
    ("dynamic_batch_no_vllm", lambda f, b: _with(NO_VLLM, {"deepspeed": {"packing_samples": False}}, extra(f, dynamic_batch=True))),
    # vLLM sleep and tensor parallelism
    (
        "vllm_sleep_not_colocated",
        lambda f, b: {"placement": {"colocate": [], "vllm": {"enable_sleep": True}}, "deepspeed": {"enable_sleep": False}},
    ),
    (
        "vllm_tp_over_a_node",
        lambda f, b: {
            "cluster": {"nodes": 4, "gpus_per_node": 8},
            "placement": {"colocate": [], "vllm": {"engines": 1, "tensor_parallel_size": 16, "enable_sleep": False}},
        },
    ),
    (
        "vllm_tp_not_dividing",
        lambda f, b: {
            "cluster": {"nodes": 4, "gpus_per_node": 8},
            "placement": {"colocate": [], "vllm": {"engines": 2, "tensor_parallel_size": 3, "enable_sleep": False}},
        },
    ),
    # async training
    ("partial_rollout", lambda f, b: extra(f, partial_rollout=True)),
    (
        "partial_rollout_async",
        lambda f, b: _with({"placement": {"vllm": {"enable_sleep": False}}}, extra(f, partial_rollout=True, **{"async": True})),
    ),
    ("generate_batch_over_rollout", lambda f, b: extra(f, generate_batch=1024)),
    (
        "generate_batch_over_rollout_async",
        lambda f, b: _with({"placement": {"vllm": {"enable_sleep": False}}}, extra(f, generate_batch=1024, **{"async": True})),
    ),
    ("generate_batch_under_rollout", lambda f, b: extra(f, generate_batch=16)),
    # reward sources, eval
    ("remote_reward", lambda f, b: REMOTE),
    ("remote_reward_critic_free", lambda f, b: _with(REMOTE, CRITIC_FREE)),
    ("agent", lambda f, b: _with({"models": {"reward": None, "reward_remote_url": None}}, CRITIC_FREE, extra(f, agent=str(AGENT_FUNC)))),
    (
        "eval_reward_model",
        lambda f, b: _with({"models": {"reward": "org/rm", "reward_remote_url": None}}, extra(f, eval_dataset="org/eval")),
    ),
    ("eval_remote", lambda f, b: _with(REMOTE, extra(f, eval_dataset="org/eval"))),
    ("no_reward_critic_free", lambda f, b: _with({"models": {"reward": None, "reward_remote_url": None}}, CRITIC_FREE)),
    ("no_reward_gae", lambda f, b: {"models": {"reward": None, "reward_remote_url": None}, "train": {"advantage_estimator": "gae"}}),
    ("no_prompts", lambda f, b: {"data": {"prompt_dataset": None}}),
    ("critic_given_critic_free", lambda f, b: _with({"models": {"critic": "org/critic"}}, CRITIC_FREE)),
    # dynamic filtering
    (
        "dynamic_filtering_reward_model",
        lambda f, b: _with(
            {"models": {"reward": "org/rm", "reward_remote_url": None}, "train": {"n_samples_per_prompt": 4}},
            extra(f, dynamic_filtering=True),
        ),
    ),
    (
        "dynamic_filtering_n1",
        lambda f, b: _with(
            REMOTE, {"train": {"n_samples_per_prompt": 1, "advantage_estimator": "reinforce"}}, extra(f, dynamic_filtering=True)
        ),
    ),
    (
        "dynamic_filtering_range",
        lambda f, b: _with(
            REMOTE, {"train": {"n_samples_per_prompt": 4}}, extra(f, dynamic_filtering=True, dynamic_filtering_range=[1.0, 0.0])
        ),
    ),
    (
        "dynamic_filtering_ok",
        lambda f, b: _with(
            REMOTE, {"train": {"n_samples_per_prompt": 4}}, extra(f, dynamic_filtering=True, dynamic_filtering_range=[0.0, 1.0])
        ),
    ),
    ("dynamic_filtering_clip_range", _clip_range),
    # VLM
    ("vlm_critic", lambda f, b: _vlm(f, {"train": {"advantage_estimator": "gae"}})),
    ("vlm_packing", lambda f, b: _vlm(f, CRITIC_FREE, {"deepspeed": {"packing_samples": True}})),
    ("vlm_ring", lambda f, b: _vlm(f, CRITIC_FREE, extra(f, ring=2))),
    ("vlm_ok", lambda f, b: _vlm(f, CRITIC_FREE, {"deepspeed": {"packing_samples": False}})),
    # DeepSpeed tensor parallelism
    ("ds_tp", lambda f, b: extra(f, ds_tp=2)),
    ("ds_tp_fp16", lambda f, b: _with({"deepspeed": {"bf16": False}}, extra(f, ds_tp=2))),
    # IS correction
    ("is_correction", lambda f, b: extra(f, **_is_on(f)) if _is_on(f) else None),
    (
        "is_threshold_3",
        lambda f, b: extra(f, is_level="token", is_threshold=[0.1, 2.0, 5.0]) if "algo.advantage.is_correction_level" in f else None,
    ),
    ("is_threshold_1", lambda f, b: extra(f, is_level="token", is_threshold=[3.0]) if "algo.advantage.is_correction_level" in f else None),
    # corrections without a check
    ("input_template_no_braces", lambda f, b: extra(f, input_template="Question: Answer:")),
    ("input_template_ok", lambda f, b: extra(f, input_template="Question: {} Answer:")),
    # the same features as the launcher's config keys (the release's error where it lacks one)
    (
        "keyed_async_partial",
        lambda f, b: {"placement": {"vllm": {"enable_sleep": False}}, "train": {"async_train": True, "partial_rollout": True}},
    ),
    ("keyed_partial_without_async", lambda f, b: {"train": {"partial_rollout": True}}),
    ("keyed_generate_batch", lambda f, b: {"train": {"vllm_generate_batch_size": 1024}}),
    (
        "keyed_generate_batch_async",
        lambda f, b: {"placement": {"vllm": {"enable_sleep": False}}, "train": {"async_train": True, "vllm_generate_batch_size": 1024}},
    ),
    (
        "keyed_dynamic_filtering",
        lambda f, b: _with(
            REMOTE, {"train": {"n_samples_per_prompt": 4, "dynamic_filtering": True, "dynamic_filtering_range": [0.0, 1.0]}}
        ),
    ),
    ("keyed_dynamic_filtering_reward_model", lambda f, b: {"train": {"n_samples_per_prompt": 4, "dynamic_filtering": True}}),
    (
        "keyed_reward_func",
        lambda f, b: _with({"models": {"reward": None, "reward_remote_url": None, "reward_func": str(REWARD_FUNC)}}, CRITIC_FREE),
    ),
    (
        "keyed_reward_urls",
        lambda f, b: {"models": {"reward": None, "reward_remote_url": ["http://rm1:5000/get_reward", "http://rm2:5000/get_reward"]}},
    ),
    (
        "keyed_agent",
        lambda f, b: _with({"models": {"reward": None, "reward_remote_url": None, "agent_func": str(AGENT_FUNC)}}, CRITIC_FREE),
    ),
    ("keyed_eval_remote", lambda f, b: _with(REMOTE, {"data": {"eval_dataset": "org/eval"}, "train": {"eval_steps": 10}})),
    ("keyed_eval_reward_model", lambda f, b: {"data": {"eval_dataset": "org/eval"}, "train": {"eval_steps": 10}}),
    (
        "keyed_dynamic_batch",
        lambda f, b: {"train": {"dynamic_batch": True, "train_max_tokens_per_gpu": 8192, "rollout_max_tokens_per_gpu": 16384}},
    ),
    ("keyed_ring", lambda f, b: {"deepspeed": {"ring_attn_size": 2}}),
    ("keyed_ds_tp", lambda f, b: {"deepspeed": {"tensor_parallel_size": 2, "param_dtype": "bf16"}}),
    ("keyed_ds_tp_fp16", lambda f, b: {"deepspeed": {"tensor_parallel_size": 2, "param_dtype": "fp16"}}),
    ("keyed_sdpa", lambda f, b: {"deepspeed": {"attn_implementation": "sdpa"}}),
    ("keyed_is_icepop", lambda f, b: {"train": {"is_correction": "icepop", "is_correction_threshold": [0.5, 5.0]}}),
    ("keyed_is_tis_high", lambda f, b: {"train": {"is_correction": "tis", "is_correction_threshold": [2.0]}}),
    # the launcher's own refusals: capacity and memory
    ("too_few_gpus", lambda f, b: {"cluster": {"nodes": 1, "gpus_per_node": 4}}),
    ("memory_70b", lambda f, b: {"models": {"actor": "meta-llama/Llama-2-70b-hf"}, "deepspeed": {"adam_offload": False, "zero_stage": 2}}),
]


def official_async_agent(flags: FlagSet) -> dict[str, Any] | None:
    """OpenRLHF's examples/scripts/train_reinforce_baseline_ray_agent_async.sh (v0.10.2 and v0.9.7):
    Qwen3-4B, agent, async + colocate all, ring attention 2, dynamic batching with token budgets."""
    data: dict[str, Any] = {
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory_gb": 80},
        "models": {"actor": "Qwen/Qwen3-4B-Thinking-2507"},
        "data": {
            "prompt_dataset": "zhuzilin/dapo-math-17k",
            "input_key": "prompt",
            "apply_chat_template": True,
            "prompt_max_len": 10240,
            "generate_max_len": 64000,
            "max_samples": 128000,
        },
        "placement": {
            "actor": {"nodes": 1, "gpus_per_node": 4},
            "ref": {"nodes": 1, "gpus_per_node": 4},
            "vllm": {"engines": 2, "tensor_parallel_size": 2, "gpu_memory_utilization": 0.95},
            "colocate": ["all"],
        },
        "deepspeed": {"zero_stage": 3, "gradient_checkpointing": True, "packing_samples": True, "enable_sleep": True},
        "train": {
            "advantage_estimator": "reinforce_baseline",
            "rollout_batch_size": 128,
            "n_samples_per_prompt": 8,
            "train_batch_size": 1024,
            "micro_train_batch_size": 1,
            "micro_rollout_batch_size": 8,
            "actor_learning_rate": 5e-7,
            "init_kl_coef": 1e-5,
        },
        "checkpoint": {"save_steps": 10, "max_num": 3, "save_hf": True},
    }
    settings = {
        "async": True,
        "agent": str(AGENT_FUNC),
        "dynamic_filtering": True,
        "dynamic_filtering_range": [0.0, 1.0],
        "dynamic_batch": True,
        "train_tokens": 16192,
        "rollout_tokens": 32768,
        "ring": 2,
    }
    if name(flags, "partial_rollout"):
        settings["partial_rollout"] = True
    return _with(data, extra(flags, **settings))


def presets() -> list[Case]:
    return [Case(f"preset:{p.stem}", yaml.safe_load(p.read_text())) for p in sorted(PRESETS.glob("*.yaml"))]


def corpus(version: str, keyed: list[tuple[str, Variation]] | None = None) -> list[Case]:
    """Every preset, every base x variation that the release can express, the official example."""
    flags = load(version)
    cases = presets()
    for base_name, base in BASES.items():
        for var_name, variation in [*VARIATIONS, *(keyed or [])]:
            overrides = variation(flags, base_name)
            if overrides is None:
                continue
            data = _with({"name": f"{base_name}-{var_name}".replace("_", "-")}, base, overrides)
            assert data is not None
            cases.append(Case(f"{base_name}:{var_name}", data, keyed=any(var_name == k for k, _ in keyed or [])))
    example = official_async_agent(flags)
    if example is not None and version_key(version) >= version_key("0.9.7"):
        cases.append(Case("official:async_agent", {"name": "official-async-agent", **example}))
    return cases
