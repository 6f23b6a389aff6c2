"""What import keeps that a config once could not say: the load flag, flags the script leaves at
the release's default (max_new_tokens, vLLM engines) and a remote reward's 0-GPU placement;
and what `submit` then does with checkpoint.load (runs/submit.refuse_existing). Also: defaults
that changed between the releases that accept a script (read with the target release when it is
one of them), and a trainer command in a function the script calls more than once (`--call N`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.launch import prepare
from rlhf_launch.errors import UserError
from rlhf_launch.importer import import_script
from rlhf_launch.openrlhf.flagset import load
from rlhf_launch.runs import checkpoints
from rlhf_launch.runs.submit import refuse_existing

from conftest import run_cli

M = "openrlhf.cli.train_ppo_ray"


def imported(argv: str, version: str):
    im = import_script(f"python3 -m {M} {argv}\n", name="t", script_version=version)
    assert im.call is not None
    return im


def rendered(im, **kwargs) -> list[str]:
    return prepare(im.config, flags=load(im.target), environ={}, **kwargs).argv


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize(
    ("version", "flags", "load_flag"),
    [
        ("0.9.8", "--pretrain m --prompt_data d", "--load_checkpoint"),
        ("0.11.2", "--actor.model_name_or_path m --data.prompt_dataset d", "--ckpt.load_enable"),
    ],
)
def test_the_load_flag_becomes_checkpoint_load_and_renders_once(version, flags, load_flag):
    im = imported(f"{flags} {load_flag}", version)
    assert im.data["checkpoint"] == {"load": True}
    assert rendered(im).count(load_flag) == 1
    assert rendered(im, load_checkpoint=True).count(load_flag) == 1  # resume adds it: still once
    fresh = imported(flags, version)
    assert "checkpoint" not in fresh.data and load_flag not in rendered(fresh)


@pytest.mark.parametrize(
    ("version", "flags", "total", "new"),
    [
        ("0.9.8", "--pretrain m --prompt_data d --max_len 3000", "--max_len", "--max_new_tokens"),
        (
            "0.11.2",
            "--actor.model_name_or_path m --data.prompt_dataset d --data.max_len 3000",
            "--data.max_len",
            "--rollout.max_new_tokens",
        ),
    ],
)
def test_max_new_tokens_left_unset_stays_unset(version, flags, total, new):
    im = imported(flags, version)
    assert im.data["data"]["generate_to_max_len"] is True
    argv = rendered(im)
    assert value(argv, total) == "3000" and new not in argv
    assert not [f for f in im.findings if new in f.key]
    given = imported(f"{flags} {new} 500", version)  # set: kept as the script sets it
    assert value(rendered(given), new) == "500" and "generate_to_max_len" not in given.data.get("data", {})


def test_generation_up_to_max_len_is_refused_where_the_release_has_only_a_fixed_length():
    cfg = LaunchConfig.model_validate({"name": "t", "models": {"actor": "m"}, "data": {"generate_to_max_len": True}})
    launch = prepare(cfg, flags=load("0.9.7"), environ={})  # --prompt_max_len / --generate_max_len only
    assert any(f.key == "data.generate_to_max_len" and f.level == "error" for f in launch.findings)


@pytest.mark.parametrize("version", ["0.9.8", "0.11.2"])
def test_no_vllm_engines_renders_the_release_default(version):
    flags = "--pretrain m --prompt_data d" if version == "0.9.8" else "--actor.model_name_or_path m --data.prompt_dataset d"
    argv = rendered(imported(flags, version))
    assert not any("num_engines" in t for t in argv)


def test_a_remote_reward_on_0_gpus_places_no_reward_model():
    im = imported(
        "--pretrain m --prompt_data d --remote_rm_url http://rm:5000/get_reward --reward_num_nodes 0 --reward_num_gpus_per_node 0", "0.9.8"
    )
    assert im.data["placement"]["reward"] == {"nodes": 0, "gpus_per_node": 0}
    launch = prepare(im.config, flags=load("0.9.8"), environ={})
    assert value(launch.argv, "--reward_num_nodes") == "0" and value(launch.argv, "--reward_num_gpus_per_node") == "0"
    assert not launch.plan.role("reward").enabled
    assert "reward" not in "+".join(g.name for g in launch.plan.groups)


def test_0_reward_gpus_without_a_remote_reward_are_refused():
    with pytest.raises(ValueError, match="placement.reward"):
        LaunchConfig.model_validate({"name": "t", "placement": {"reward": {"nodes": 0, "gpus_per_node": 0}}})
    im = imported("--pretrain m --prompt_data d --reward_pretrain r --reward_num_nodes 0", "0.9.8")  # a local reward model
    assert "reward" not in im.data.get("placement", {})
    assert any(f.key == "placement.reward" for f in im.findings)


def _checkpoint(root: Path, latest: bool = True) -> checkpoints.CheckpointState:
    actor = root / "_actor"
    (actor / "global_step5").mkdir(parents=True)
    if latest:
        (actor / "latest").write_text("global_step5")
    return checkpoints.read_local(root)


def test_submit_refuses_existing_checkpoints_unless_the_config_loads_them(tmp_path: Path):
    state = _checkpoint(tmp_path)
    with pytest.raises(UserError, match="already holds checkpoints") as refused:
        refuse_existing(state, "run-a", str(tmp_path), loads=False, move_aside=False)
    assert "checkpoint.load" in refused.value.hint and "resume run-a" in refused.value.hint
    refuse_existing(state, "run-a", str(tmp_path), loads=True, move_aside=False)  # continues them
    refuse_existing(state, None, str(tmp_path), loads=False, move_aside=True)  # moved aside first
    refuse_existing(checkpoints.read_local(tmp_path / "none"), None, str(tmp_path / "none"), loads=False, move_aside=False)


def test_submit_with_checkpoint_load_refuses_a_broken_checkpoint(tmp_path: Path):
    state = _checkpoint(tmp_path, latest=False)
    with pytest.raises(UserError, match="broken checkpoint"):
        refuse_existing(state, None, str(tmp_path), loads=True, move_aside=False)


# -- defaults that changed between the releases that accept a script (issue 32)

FIELD = Path(__file__).parents[1] / "data" / "scripts" / "field"
# OpenRLHF's own 0.9.8 examples under --use_dynamic_batch that leave the micro batch sizes unset: 0.9.x's
# defaults are 4 (train) and 8 (rollout); from 0.10.0 they are 1. Every release 0.9.2 .. 0.10.1.post2 reads both.
DYNAMIC_0_9_8 = ["openrlhf-v0.9.8-train_ppo_ray_hybrid_engine.sh", "openrlhf-v0.9.8-train_prorlv2_math_hybrid_engine.sh"]


@pytest.mark.parametrize("name", DYNAMIC_0_9_8)
def test_a_0_9_8_example_imported_for_0_9_8_keeps_its_release_micro_batch_sizes(name: str):
    text = (FIELD / name).read_text()
    im = import_script(text, name="t", target_version="0.9.8")
    assert (im.source, im.target) == ("0.9.8", "0.9.8")  # the release that runs it reads it, with its defaults
    assert (im.data["train"]["micro_train_batch_size"], im.data["train"]["micro_rollout_batch_size"]) == (4, 8)
    argv = rendered(im)
    assert (value(argv, "--micro_train_batch_size"), value(argv, "--micro_rollout_batch_size")) == ("4", "8")
    assert "--use_dynamic_batch" in argv
    fs = load("0.9.8")
    script, plan = fs.parse(im.call.argv), fs.parse(argv)
    for dest in ("micro_train_batch_size", "micro_rollout_batch_size", "train_batch_size", "rollout_batch_size"):
        assert getattr(plan, dest) == getattr(script, dest), dest
    assert "the release the config is written for" in im.yaml(name)
    assert not [f for f in im.findings if "defaults differ" in f.message]


@pytest.mark.parametrize("name", DYNAMIC_0_9_8)
def test_a_detected_release_names_the_defaults_that_differ_among_the_releases_that_accept_the_script(name: str):
    im = import_script((FIELD / name).read_text(), name="t")
    assert im.source == "0.9.10"  # the newest of its flags' series (importer/argv.era): the 0.9 defaults, 4 and 8
    assert (im.data["train"]["micro_train_batch_size"], im.data["train"]["micro_rollout_batch_size"]) == (4, 8)
    drift = [f for f in im.findings if f.key == "openrlhf.version" and "defaults differ" in f.message]
    assert len(drift) == 1 and drift[0].level == "warning", im.findings
    assert re.search(
        r"the config keeps openrlhf 0\.9\.10's: --micro_train_batch_size 4 where 0\.10\.0 \.\. 0\.10\.1\.post2 default to 1;",
        drift[0].message,
    )
    assert re.search(r"--micro_rollout_batch_size 8 where 0\.10\.0 \.\. 0\.10\.1\.post2 default to 1$", drift[0].message)
    assert "--openrlhf-version" in drift[0].hint


def test_no_default_warning_when_the_script_sets_the_flags_or_names_its_release():
    flags = "--pretrain m --prompt_data d --use_dynamic_batch --train_max_tokens_per_gpu 8192 --vllm_num_engines 2"
    sized = import_script(f"python3 -m {M} {flags} --micro_train_batch_size 2 --micro_rollout_batch_size 2\n", name="t")
    assert not [f for f in sized.findings if "micro" in f.message]
    given = imported(flags, "0.9.8")
    assert not [f for f in given.findings if "defaults differ" in f.message]
    assert (value(rendered(given), "--micro_train_batch_size"), value(rendered(given), "--micro_rollout_batch_size")) == ("4", "8")


def test_a_default_the_trainer_start_up_overrides_is_not_named():
    """0.8.0 .. 0.8.9.post1 leave flash attention off unless --flash_attn, later releases default to it;
    packing switches it on at start-up (core/settings.py), so only a script without packing is told."""
    plain = "--pretrain m --prompt_data d --vllm_num_engines 2"
    im = import_script(f"python3 -m {M} {plain}\n", name="t")
    assert im.accepted_by[0] == "0.8.0" and im.source != "0.8.0"
    drift = [f for f in im.findings if "defaults differ" in f.message]
    assert len(drift) == 1 and re.search(r"--flash_attn True where 0\.8\.0 \.\. 0\.8\.\S+ default to False", drift[0].message)
    packed = import_script(f"python3 -m {M} {plain} --packing_samples\n", name="t")
    assert packed.accepted_by[0] == "0.8.0"
    assert not [f for f in packed.findings if "--flash_attn" in f.message]


# -- a function that runs the trainer, called more than once (issue 32)

TWICE = Path(__file__).parents[1] / "data" / "scripts" / "ours-function-called-twice.sh"


def test_cli_imports_the_first_call_of_a_function_called_twice_and_call_2_the_second(tmp_path: Path):
    first = run_cli("import", str(TWICE), "-o", str(tmp_path / "a.yaml"))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "called at lines 44 and 45; imported call 1 (line 44); --call 2 imports the other" in first.stdout
    assert "line 11 and line 11" not in first.stdout + first.stderr
    second = run_cli("import", str(TWICE), "--call", "2", "-o", str(tmp_path / "b.yaml"))
    assert second.returncode == 0, second.stdout + second.stderr
    a = LaunchConfig.model_validate(yaml.safe_load((tmp_path / "a.yaml").read_text()))
    b = LaunchConfig.model_validate(yaml.safe_load((tmp_path / "b.yaml").read_text()))
    for cfg, model, nodes, engines in ((a, "Qwen/Qwen2.5-7B-Instruct", "1", "4"), (b, "Qwen/Qwen2.5-32B-Instruct", "2", "8")):
        argv = prepare(cfg, environ={}).argv
        assert (value(argv, "--pretrain"), value(argv, "--actor_num_nodes"), value(argv, "--vllm_num_engines")) == (model, nodes, engines)
    assert b.checkpoint.save_path == "/ckpt/Qwen2.5-32B-Instruct"
    out_of_range = run_cli("import", str(TWICE), "--call", "3")
    assert out_of_range.returncode == 2
    assert "--call 3: the script runs the trainer twice (lines 44 and 45); pick 1..2" in out_of_range.stderr
    assert "Traceback" not in out_of_range.stderr


def test_flags_no_release_has_point_to_openrlhf_source():
    """A script of a fork imported without --openrlhf-source: its own flags are left out, and the
    import says how to read them (the renamed-flag hints alone send the user the wrong way)."""
    im = import_script(f"python3 -m {M} --pretrain m --reward_pretrain r --prompt_data d --freeze_prefix --frobnicate_cuts 3\n", name="t")
    said = [f for f in im.findings if "no OpenRLHF release has" in f.message]
    assert len(said) == 1 and "2 flags no OpenRLHF release has (--freeze_prefix, --frobnicate_cuts)" in said[0].message
    assert "--openrlhf-source DIR" in (said[0].hint or "")
    # a flag some release has is no sign of a fork
    stock = import_script(f"python3 -m {M} --pretrain m --reward_pretrain r --prompt_data d --micro_train_batch_size 2\n", name="t")
    assert not [f for f in stock.findings if "no OpenRLHF release has" in f.message]
