"""Rendering the trainer argv for each release, checked against that release's real flag set."""

from __future__ import annotations

import pytest

from rlhf_launch.core.config import load_config, validate
from rlhf_launch.core.flags import render
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.plan import build_plan
from rlhf_launch.openrlhf import dialect
from rlhf_launch.openrlhf.flagset import Flag, FlagSet, load, supported_versions

from conftest import CONFIGS, PRESETS


def flags_in(argv):
    return [t[2:] for t in argv if t.startswith("--")]


@pytest.mark.parametrize("version", supported_versions())
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_renders_for_every_release_and_parses(preset, version):
    launch = prepare(load_config(CONFIGS / f"{preset}.yaml"), version=version, environ={"WANDB_API_KEY": "f" * 40})
    fs = load(version)
    assert launch.ok, [f for f in launch.findings if f.level == "error"]
    assert launch.flags.version == version
    for name in flags_in(launch.argv):
        assert name in fs.flags, f"--{name} is not an exact flag of {version}"
    ns = fs.parse(launch.argv)
    dest = lambda dotted, flat: getattr(ns, dotted if fs.dotted else flat)  # noqa: E731
    cfg = launch.cfg
    assert dest("actor.model_name_or_path", "pretrain") == cfg.models.actor
    assert dest("actor.num_gpus_per_node", "actor_num_gpus_per_node") == launch.plan.role("actor").gpus_per_node
    assert dest("vllm.num_engines", "vllm_num_engines") == cfg.placement.vllm.engines
    assert dest("ds.zero_stage", "zero_stage") == cfg.deepspeed.zero_stage
    assert dest("train.batch_size", "train_batch_size") == cfg.train.train_batch_size
    assert dest("ckpt.path", "ckpt_path") == cfg.checkpoint.ckpt_path
    assert dest("train.colocate_all", "colocate_all_models") is cfg.colocated("all")
    wandb_on = cfg.logging.wandb.project is not None
    assert dest("logger.wandb.key", "use_wandb") == (dialect.WANDB_PLACEHOLDER if wandb_on else None)


def test_0_11_2_uses_only_dotted_flags_and_0_8_11_only_flat():
    cfg = load_config(CONFIGS / "llama70b-4node.yaml")
    new = prepare(cfg, version="0.11.2", environ={}).argv
    old = prepare(cfg, version="0.8.11", environ={}).argv
    assert all("." in name for name in flags_in(new))
    assert not any("." in name for name in flags_in(old))
    assert "--actor.num_nodes" in new and "--actor_num_nodes" in old


ERAS = [
    # (version, present, absent)
    ("0.8.9.post1", ["--flash_attn", "--bf16", "--prompt_max_len"], ["--attn_implementation", "--param_dtype", "--max_new_tokens"]),
    ("0.8.10", ["--attn_implementation", "--bf16"], ["--flash_attn"]),
    ("0.9.1.post1", ["--bf16"], ["--param_dtype"]),
    ("0.9.2", ["--param_dtype"], ["--bf16"]),
    ("0.9.7", ["--prompt_max_len", "--generate_max_len"], ["--max_new_tokens"]),
    ("0.9.8", ["--max_len", "--max_new_tokens"], ["--prompt_max_len", "--generate_max_len"]),
    ("0.10.1", ["--pretrain", "--zero_stage"], ["--actor.model_name_or_path"]),
    ("0.10.2", ["--actor.model_name_or_path", "--ds.zero_stage", "--data.max_len"], ["--pretrain"]),
]


@pytest.mark.parametrize("version,present,absent", ERAS)
def test_flag_eras_follow_the_data(version, present, absent):
    argv = prepare(load_config(CONFIGS / "llama70b-4node.yaml"), version=version, environ={}).argv
    for flag in present:
        assert flag in argv
    for flag in absent:
        assert flag not in argv


def test_lengths_translate_between_eras():
    cfg = load_config(CONFIGS / "llama70b-4node.yaml", ["data.prompt_max_len=1000", "data.generate_max_len=500"])
    new = prepare(cfg, version="0.11.2", environ={}).argv
    assert new[new.index("--data.max_len") + 1] == "1500"
    assert new[new.index("--rollout.max_new_tokens") + 1] == "500"
    old = prepare(cfg, version="0.9.7", environ={}).argv
    assert old[old.index("--prompt_max_len") + 1] == "1000"


def test_bool_values_that_are_values_in_newer_releases():
    cfg = load_config(CONFIGS / "tiny-1node.yaml", ["deepspeed.bf16=false", "deepspeed.flash_attn=false"])
    new = prepare(cfg, version="0.11.2", environ={}).argv
    assert new[new.index("--ds.param_dtype") + 1] == "fp16"
    assert new[new.index("--ds.attn_implementation") + 1] == "eager"
    old = prepare(cfg, version="0.8.0", environ={}).argv
    assert "--bf16" not in old and "--flash_attn" not in old


def test_load_flag_per_dialect():
    cfg = load_config(CONFIGS / "tiny-1node.yaml")
    assert "--ckpt.load_enable" in prepare(cfg, version="0.11.2", environ={}, load_checkpoint=True).argv
    assert "--load_checkpoint" in prepare(cfg, version="0.8.11", environ={}, load_checkpoint=True).argv
    assert "--ckpt.load_enable" not in prepare(cfg, version="0.11.2", environ={}).argv


def test_extra_args_are_checked_against_the_release():
    base = load_config(CONFIGS / "tiny-1node.yaml")
    ok = prepare(
        base.model_copy(update={"extra_args": {"vllm.enforce_eager": True, "rollout.temperature": 0.7, "actor.adam.betas": [0.9, 0.99]}}),
        version="0.11.2",
        environ={},
    )
    assert ok.ok
    assert "--vllm.enforce_eager" in ok.argv and ok.argv[ok.argv.index("--actor.adam.betas") :][:3] == ["--actor.adam.betas", "0.9", "0.99"]
    flat_name = prepare(base.model_copy(update={"extra_args": {"enforce_eager": True}}), version="0.11.2", environ={})
    note = next(f for f in flat_name.findings if f.key == "extra_args.enforce_eager")  # the other era's spelling renders (renames.json)
    assert flat_name.ok and note.level == "warning" and "--vllm.enforce_eager" in flat_name.argv and "vllm.enforce_eager" in note.hint
    typo = prepare(base.model_copy(update={"extra_args": {"vllm.enforce_eagr": True}}), version="0.11.2", environ={})
    err = next(f for f in typo.findings if f.key == "extra_args.vllm.enforce_eagr")
    assert "has no flag --vllm.enforce_eagr" in err.message and "vllm.enforce_eager" in err.hint
    owned = prepare(base.model_copy(update={"extra_args": {"actor.num_nodes": 2}}), version="0.11.2", environ={})
    err = next(f for f in owned.findings if f.key == "extra_args.actor.num_nodes")
    assert "placement.actor.nodes" in err.message
    missing = prepare(base.model_copy(update={"extra_args": {"partial_rollout": True}}), version="0.8.0", environ={})
    assert any(f.key == "extra_args.partial_rollout" and "0.8.0" in f.message for f in missing.findings)
    switch = prepare(base.model_copy(update={"extra_args": {"vllm.enforce_eager": "yes"}}), version="0.11.2", environ={})
    assert any("switch" in f.message for f in switch.findings)


def test_a_key_the_release_lacks_is_an_error_naming_it():
    real = load("0.11.2")
    without_sleep = FlagSet(version="9.0", flags={k: v for k, v in real.flags.items() if k != "ds.enable_sleep"})
    cfg = validate(
        {"name": "t", "models": {"actor": "a", "reward": "r"}, "data": {"prompt_dataset": "p"}, "deepspeed": {"enable_sleep": True}}
    )
    rendered = render(cfg, build_plan(cfg), without_sleep)
    assert any(f.key == "deepspeed.enable_sleep" and "openrlhf 9.0 has no flag" in f.message for f in rendered.findings)
    off = cfg.model_copy(update={"deepspeed": cfg.deepspeed.model_copy(update={"enable_sleep": False})})
    assert render(off, build_plan(off), without_sleep).findings == []


def test_every_config_key_has_a_spelling_in_every_release():
    """Every key but the newer features' (dialect.SOFT), which exist from their first release on."""
    for version in supported_versions():
        fs = load(version)
        missing = [path for path in dialect.SPELLINGS if dialect.spelling_for(path, fs) is None]
        assert set(missing) <= dialect.SOFT, (version, sorted(set(missing) - dialect.SOFT))
        assert dialect.pick(fs, dialect.LOAD_FLAG) and dialect.pick(fs, dialect.WANDB_KEY_FLAG)


def test_feature_keys_exist_from_their_first_release_on():
    versions = supported_versions()
    for path in dialect.SOFT:
        present = [dialect.spelling_for(path, load(v)) is not None for v in versions]
        first = present.index(True)
        assert all(present[first:]), (path, [v for v, p in zip(versions, present, strict=True) if not p and versions.index(v) > first])


def test_unknown_synthetic_flag_type():
    fs = FlagSet(version="x", flags={"a": Flag(name="a", dest="a")})
    assert fs.parse(["--a", "1"]).a == "1"
