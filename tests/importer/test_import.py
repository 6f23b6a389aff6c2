"""`rlhf-launch import`: a script that runs the trainer -> a config whose plan renders the same trainer.

Round trip: for every stored script (tests/data/scripts: OpenRLHF's own examples from four tags,
three third-party scripts, and ours), the imported config, read back from its YAML, renders an argv
that the script's release parses to the same namespace as the script's own argv: every flag the
script sets with an equal value, every other flag at that release's default. BY_DESIGN lists each
difference the config cannot avoid, and why; the importer must report each of them.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlhf_launch.core.config import validate
from rlhf_launch.core.launch import prepare
from rlhf_launch.errors import UserError
from rlhf_launch.importer import config_name, import_call, parse_script, written_flags
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.flagset import FlagSet, load, newest_version

from conftest import ROOT, run_cli

DATA = Path(__file__).parents[1] / "data" / "scripts"
SCRIPTS = sorted(DATA.glob("*.sh"))
NEWEST = newest_version()
M = "openrlhf.cli.train_ppo_ray"

# (script, flag as the script's release spells it) -> why the config renders another value there.
BY_DESIGN = {
    ("ours-import-edge-values.sh", "ds.attn_implementation"): "deepspeed.flash_attn chooses flash_attention_2 or eager only",
    ("ours-import-edge-values.sh", "ref.offload"): "deepspeed.ref_reward_offload sets ref.offload and reward.offload alike",
}
# The BY_DESIGN differences that must still show (a config that cannot hold the value); the others
# go away when the config schema gains a way to say them (then the importer writes that instead).
STRUCTURAL = {"remote_rm_url", "reward_num_nodes", "reward_num_gpus_per_node"}


def imported(path: Path, **kwargs):
    call = parse_script(path.read_text())
    return call, import_call(call, name=config_name(path.stem), **kwargs)


def config_from_yaml(im, path, call):
    """The config as `plan OUT.yaml` reads it: through the YAML text."""
    return validate(yaml.safe_load(im.yaml(str(path), call.line)))


def launcher_dests(fs: FlagSet) -> set[str]:
    """The flag the launcher owns: the W&B key (from the environment, never the script's)."""
    return {fs.flags[n].dest for n in (dialect.pick(fs, dialect.WANDB_KEY_FLAG),) if n}


def allowed(path: Path, name: str) -> bool:
    return (path.name, name) in BY_DESIGN


def mentioned(im, name: str) -> bool:
    return any(f"--{name}" in f.key or f"--{name}" in f.message for f in im.findings)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_round_trip(path: Path):
    call, im = imported(path)
    fs = load(im.source)
    cfg = config_from_yaml(im, path, call)
    assert cfg.openrlhf.version == im.source == im.target
    launch = prepare(cfg, environ={})
    assert [f for f in launch.findings if f.key.startswith("extra_args")] == []
    assert all(t[2:] in fs for t in launch.argv if t.startswith("--")), "only exact flag names"
    script_ns, rendered_ns = fs.parse(call.argv), fs.parse(launch.argv)
    skip = launcher_dests(fs)
    differ = {}
    for name, flag in fs.flags.items():
        want, got = getattr(script_ns, flag.dest), getattr(rendered_ns, flag.dest)
        if flag.dest not in skip and want != got:
            differ[name] = (want, got)
    unexplained = {n: v for n, v in differ.items() if not allowed(path, n)}
    assert unexplained == {}, f"the config renders these differently from {path.name}"
    for (script, name), _ in BY_DESIGN.items():
        if script == path.name and name in STRUCTURAL:
            assert name in differ, f"BY_DESIGN entry ({script}, {name}) no longer differs: drop it"
    for name in differ:
        assert mentioned(im, name) or any(name in f.message for f in im.findings), (name, im.findings)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_wandb_stays_on_when_the_script_used_it(path: Path):
    call, im = imported(path)
    fs = load(im.source)
    key_flag = dialect.pick(fs, dialect.WANDB_KEY_FLAG)
    written, _ = written_flags(call.argv, fs)
    launch = prepare(config_from_yaml(im, path, call), environ={"WANDB_API_KEY": "f" * 40})
    if key_flag in written:
        assert launch.argv[launch.argv.index(f"--{key_flag}") + 1] == dialect.WANDB_PLACEHOLDER
        assert any("export WANDB_API_KEY" in f.hint for f in im.findings)
    else:
        assert f"--{key_flag}" not in launch.argv


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_migrating_to_the_newest_release(path: Path):
    call, im = imported(path, target_version=NEWEST)
    src, new = load(im.source), load(NEWEST)
    cfg = config_from_yaml(im, path, call)
    assert cfg.openrlhf.version == NEWEST
    launch = prepare(cfg, environ={})
    assert [f for f in launch.findings if f.key.startswith("extra_args")] == []
    assert all(t[2:] in new for t in launch.argv if t.startswith("--")), "only exact flag names of the newest release"
    rendered = new.parse(launch.argv)  # the newest release's parser accepts every token
    script_ns = src.parse(call.argv)
    written, _ = written_flags(call.argv, src)
    managed = dialect.managed_flags(src)
    for name in written:
        if src.flags[name].dest in launcher_dests(src) or (path.name, name) in BY_DESIGN:
            continue
        value = getattr(script_ns, src.flags[name].dest)
        found = renames.resolve(name, value, new)
        assert found is not None, name
        if found.removed is not None:
            if name not in managed:  # a config key carries a managed one across (e.g. lengths -> max_len)
                err = next(f for f in im.findings if f.key == f"--{name}")
                assert err.level == "error" and all(f"--{r}" in err.message for r in found.replacement)
            continue
        for flag, expected in found.flags:
            assert getattr(rendered, new.flags[flag].dest) == expected, (name, flag)


def test_an_0_8_11_example_migrated_to_the_newest_release():
    path = DATA / "openrlhf-v0.8.11-train_reinforce_baseline_ray_agent_multiturn.sh"
    call, im = imported(path, target_version=NEWEST)
    assert im.source.startswith(("0.8.", "0.9.")) and im.target == NEWEST
    launch = prepare(config_from_yaml(im, path, call), environ={})
    assert all("." in t for t in launch.argv if t.startswith("--")), "dotted flags only"
    ns = load(NEWEST).parse(launch.argv)
    assert getattr(ns, "actor.adam.weight_decay") == getattr(ns, "critic.adam.weight_decay") == 0.01  # --l2 0.01
    assert getattr(ns, "train.colocate_all") and getattr(ns, "vllm.enforce_eager") and getattr(ns, "actor.eps_clip_low_high") == [0.2, 0.28]
    assert getattr(ns, "data.max_len") == 1024 + 10240 and getattr(ns, "rollout.max_new_tokens") == 10240
    # --enable_vllm_is_correction: 0.11.2 removed it; either a config key carries the setting across
    # (then 0.11.2's replacement flags say it) or the import reports it with its replacement
    removed = [f for f in im.findings if f.level == "error"]
    if removed:
        assert [f.key for f in removed] == ["--enable_vllm_is_correction"]
        assert "removed in 0.11.2" in removed[0].message and "--algo.advantage.is_correction_level" in removed[0].message
    else:
        assert im.ok and getattr(ns, "algo.advantage.is_correction_level") != "off"


def test_removed_flags_are_reported_with_their_replacement_when_migrating(tmp_path: Path):
    # 0.10.2 removed --perf; 0.11.2 removed the correction type (0.10.2 had renamed it), and a type
    # without the switch that turns it on is nothing a config key can say, so extra_args carries it
    path = tmp_path / "train.sh"
    path.write_text(
        f"python3 -m {M} --pretrain m --prompt_data d --max_len 2048 --max_new_tokens 512 --perf --vllm_is_correction_type icepop\n"
    )
    call = parse_script(path.read_text())
    same = import_call(call, name="t")
    # 0.9.8 to 0.10.1.post2 accept it; --vllm_is_correction_type first appeared in 0.9.8: read as 0.9.x's newest
    assert same.accepted_by[0] == "0.9.8" and same.accepted_by[-1] == "0.10.1.post2"
    assert same.ok and same.source == "0.9.10" and same.config.extra_args == {"perf": True, "vllm_is_correction_type": "icepop"}
    im = import_call(call, name="t", target_version=NEWEST)
    errors = {f.key: f.message for f in im.findings if f.level == "error"}
    assert set(errors) == {"--perf", "--vllm_is_correction_type"}
    assert "removed in 0.10.2 with no replacement" in errors["--perf"]
    assert "removed in 0.11.2 (as --algo.advantage.is_correction_type)" in errors["--vllm_is_correction_type"]
    assert "replaced by --algo.advantage.is_correction_level, --algo.advantage.is_correction_mode" in errors["--vllm_is_correction_type"]
    assert im.config.extra_args == {}
    load(NEWEST).parse(prepare(im.config, environ={}).argv)


def test_0_11_correction_flags_round_trip_for_0_11_and_migrate_or_are_reported_for_0_11_2():
    path = DATA / "openrlhf-v0.11.0-train_prorlv2_math_hybrid_engine.sh"
    call, same = imported(path)
    argv = prepare(same.config, environ={}).argv
    assert same.ok and argv[argv.index("--algo.advantage.is_correction_type") + 1] == "icepop"
    call, im = imported(path, target_version="0.11.2")
    ns = load("0.11.2").parse(prepare(im.config, environ={}).argv)
    errors = {f.key: f.message for f in im.findings if f.level == "error"}
    if errors:  # extra_args carried them: 0.11.2 has no such flags
        assert set(errors) == {"--algo.advantage.is_correction_enable", "--algo.advantage.is_correction_type"}
        assert all("replaced by --algo.advantage.is_correction_level" in m for m in errors.values())
    else:  # a config key carried the setting: 0.11.2 spells it with its replacement flags
        assert getattr(ns, "algo.advantage.is_correction_level") != "off"


def test_script_release_can_be_given():
    path = DATA / "openrlhf-v0.8.11-train_ppo_llama_ray.sh"
    call, im = imported(path, script_version="0.8.11")
    assert (im.source, im.target, im.detected) == ("0.8.11", "0.8.11", False)
    _, detected = imported(path)
    # 0.8.10 to 0.9.1.post1 accept it; written for 0.8.11 (its source), the newest of its flags' 0.8 series
    assert detected.detected and detected.source == "0.8.11" and detected.accepted_by[0] == "0.8.10"
    assert detected.accepted_by[-1] == "0.9.1.post1"
    dotted = DATA / "ours-import-dotted-0.11.sh"
    _, wrong = imported(dotted, script_version="0.8.11")
    assert not wrong.ok and any("0.8.11 does not accept" in f.message for f in wrong.findings if f.level == "error")


def test_what_the_config_holds_for_a_flat_script():
    path = DATA / "ours-import-flat-0.9.sh"
    call, im = imported(path)
    data = im.data
    assert list(data)[:2] == ["name", "openrlhf"] and data["name"] == "ours-import-flat-0.9"
    assert data["placement"]["colocate"] == ["actor_ref", "critic_reward"]
    assert data["placement"]["vllm"] == {"engines": 2, "tensor_parallel_size": 2, "gpu_memory_utilization": 0.6}
    assert data["data"]["prompt_max_len"] + data["data"]["generate_max_len"] == 6144
    assert data["train"]["micro_train_batch_size"] == 4  # given twice: the last one counts
    assert data["extra_args"] == {"l2": 0.01, "lr_warmup_ratio": 0.05, "kl_estimator": "k3", "eps_clip_low_high": [0.2, 0.28]}
    assert data["runtime_env"] == {"working_dir": "/openrlhf", "env_vars": {"NCCL_DEBUG": "WARN"}}
    assert data["cluster"] == {"nodes": 2}  # actor+ref 4 + critic+reward 4 + vLLM 2x2 = 12 GPUs on 8-GPU nodes
    keys = {f.key for f in im.findings}
    assert {"--actor_num_gpus", "--vllm_gpu_mem", "--micro_train_batch_size", "runtime_env.pip"} <= keys
    assert data["checkpoint"]["load"] is True and "load_checkpoint" not in json.dumps(data)  # the script resumes


def test_ray_address_of_a_direct_call_comes_from_RAY_ADDRESS():
    _, im = imported(DATA / "ours-import-dotted-0.11.sh")
    assert im.data["cluster"]["address"] == "http://10.1.0.5:8265"
    assert im.data["placement"]["actor"] == {"nodes": 2}  # ref follows the actor (colocated), 8 per node is the default


def test_layout_sets_the_cluster_size():
    _, im = imported(DATA / "ours-flat-vars-quotes.sh")  # actor 2x8 + ref 8 + critic 8 + reward 8 + vLLM 8x2
    assert im.data["cluster"] == {"nodes": 7}
    plan = prepare(im.config, environ={}).plan
    assert plan.gpus_required <= plan.cluster_gpus


# ----------------------------------------------------------------------------- the W&B key never shows


def _script_with_keys(tmp_path: Path, dotted: bool) -> tuple[Path, list[str]]:
    flag_key, env_key = secrets.token_hex(20), secrets.token_hex(20)
    flags = (
        "--actor.model_name_or_path m --data.prompt_dataset d --logger.wandb.project p --logger.wandb.key $KEY"
        if dotted
        else "--pretrain m --prompt_data d --wandb_project p --use_wandb $KEY"
    )
    text = (
        "#!/bin/bash\n"
        f"KEY={flag_key}\n"
        "ray job submit --address http://127.0.0.1:8265 "
        f"""--runtime-env-json='{{"working_dir": "/w", "env_vars": {{"WANDB_API_KEY": "{env_key}", "A": "1"}}}}' """
        f"-- python3 -m {M} {flags}\n"
    )
    path = tmp_path / "train.sh"
    path.write_text(text)
    return path, [flag_key, env_key]


@pytest.mark.parametrize("dotted", [False, True])
def test_wandb_key_is_never_written_or_shown(tmp_path: Path, dotted: bool):
    path, keys = _script_with_keys(tmp_path, dotted)
    call = parse_script(path.read_text())
    im = import_call(call, name="t")
    shown = im.yaml(str(path), call.line) + json.dumps([f.as_dict() for f in im.findings]) + repr(im.data) + repr(im.config)
    printed = run_cli("import", str(path))
    out = tmp_path / "out.yaml"
    written = run_cli("import", str(path), "-o", str(out))
    assert printed.returncode == 0 and written.returncode == 0, printed.stderr + written.stderr
    everything = shown + printed.stdout + printed.stderr + written.stdout + written.stderr + out.read_text()
    for key in keys:
        assert key not in everything
    assert "export WANDB_API_KEY" in printed.stderr and "export WANDB_API_KEY" in written.stdout
    assert yaml.safe_load(out.read_text())["runtime_env"]["env_vars"] == {"A": "1"}
    plan = run_cli("plan", str(out), "--json", env={"WANDB_API_KEY": "e" * 40})
    argv = json.loads(plan.stdout)["trainer_argv"]
    key_flag = "--logger.wandb.key" if dotted else "--use_wandb"
    assert argv[argv.index(key_flag) + 1] == dialect.WANDB_PLACEHOLDER


# ----------------------------------------------------------------------------- the CLI


def test_cli_writes_the_config_with_a_header_and_plan_reads_it(tmp_path: Path):
    script = DATA / "ours-import-dotted-0.11.sh"
    out = tmp_path / "sub" / "grpo.yaml"
    done = run_cli("import", str(script), "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith(f"# Imported by `rlhf-launch import` from {script}:10\n")
    assert f"wrote {out}" in done.stdout and f"rlhf-launch plan {out}" in done.stdout
    plan = run_cli("plan", str(out), "--json")
    argv = json.loads(plan.stdout)["trainer_argv"]
    assert argv == prepare(validate(yaml.safe_load(text)), environ={}).argv
    again = run_cli("import", str(script), "-o", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr
    assert run_cli("import", str(script), "-o", str(out), "--force").returncode == 0


def test_cli_prints_yaml_on_stdout_and_findings_on_stderr():
    done = run_cli("import", str(DATA / "openrlhf-v0.8.11-train_ppo_llama_ray.sh"))
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    assert data["openrlhf"]["version"] == "0.8.11" and data["models"]["actor"] == "OpenRLHF/Llama-3-8b-sft-mixture"
    assert "warning: --use_wandb" in done.stderr and not done.stderr.startswith("name:")
    assert data["checkpoint"]["load"] is True  # the script passes --load_checkpoint


def test_cli_migration_with_removed_flags_exits_1_and_still_writes(tmp_path: Path):
    out = tmp_path / "m.yaml"
    path = tmp_path / "train.sh"
    path.write_text(f"python3 -m {M} --pretrain m --prompt_data d --max_len 2048 --max_new_tokens 512 --vllm_is_correction_type icepop\n")
    done = run_cli("import", str(path), "--openrlhf-version", NEWEST, "-o", str(out))
    assert done.returncode == 1
    assert "error: --vllm_is_correction_type" in done.stdout and "replaced by --algo.advantage.is_correction_level" in done.stdout
    assert yaml.safe_load(out.read_text())["openrlhf"]["version"] == NEWEST
    assert "--vllm_is_correction_type" in out.read_text().split("\nname:")[0]  # named in the header


@pytest.mark.parametrize(
    "content,args,message",
    [
        (None, [], "not found"),
        (b"#!/bin/bash\npython3 -m openrlhf.cli.train_ppo_ray --pretrain \xff\xfe\n", [], "is not UTF-8"),
        (b"#!/bin/bash\necho nothing to see\n", [], "no"),
        (b"python3 -m openrlhf.cli.train_ppo_ray --pretrain m\n", ["--openrlhf-version", "9.9"], "not a supported OpenRLHF release"),
        (b"python3 -m openrlhf.cli.train_ppo_ray --pretrain m\n", ["--script-version", "0.1"], "not a supported OpenRLHF release"),
        (b"python3 -m openrlhf.cli.train_ppo_ray --pretrain m --actor_num_nodes $N\n", [], "no OpenRLHF release can read"),
        (b"python3 -m openrlhf.cli.train_ppo_ray --pretrain m\n", ["--var", "1X=2"], "is not NAME=VALUE"),
    ],
)
def test_cli_user_errors_exit_2_with_one_message(tmp_path: Path, content, args, message):
    path = tmp_path / "train.sh"
    if content is not None:
        path.write_bytes(content)
    done = run_cli("import", str(path), *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_cli_variables_the_script_does_not_set(tmp_path: Path):
    path = tmp_path / "train.sh"
    path.write_text(f"python3 -m {M} --pretrain m --actor_num_nodes $N --actor_num_gpus_per_node 4\n")
    done = run_cli("import", str(path), "--var", "N=3")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["placement"]["actor"] == {"nodes": 3, "gpus_per_node": 4}


def test_unknown_flags_are_reported_and_left_out(tmp_path: Path):
    path = tmp_path / "train.sh"
    path.write_text(f"python3 -m {M} --pretrain m --prompt_data d --no_such_flag 3 --zero_stage 3\n")
    call = parse_script(path.read_text())
    im = import_call(call, name="t")
    assert not im.ok
    err = next(f for f in im.findings if f.level == "error")
    assert "--no_such_flag 3" in err.message and "left out" in err.message
    assert im.data["deepspeed"] == {"zero_stage": 3}


def test_import_help_does_not_import_ray():
    code = (
        "import sys, json, io, contextlib\n"
        "from rlhf_launch.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    codes = [main(['import', '--help']), main(['import', {str(DATA / 'ours-import-flat-0.9.sh')!r}])]\n"
        "print(json.dumps({'codes': codes, 'ray': sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"codes": [0, 1], "ray": []}  # 1: the script's runtime_env.pip is not imported


def test_config_names_from_file_names():
    assert config_name("train_ppo llama (v2)") == "train_ppo-llama-v2"
    assert config_name("---") == "imported"
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", config_name("x" * 100))


def test_import_raises_user_error_when_no_release_reads_the_flags():
    call = parse_script(f"python3 -m {M} --pretrain m --zero_stage three\n")
    with pytest.raises(UserError, match="no OpenRLHF release can read"):
        import_call(call, name="t")


def test_an_older_target_gets_the_older_spelling():
    _, im = imported(DATA / "ours-import-dotted-0.11.sh", target_version="0.9.5")
    errors = [f for f in im.findings if f.level == "error"]
    assert [f.key for f in errors] == ["--actor.adam.betas"]  # one flag per role since 0.10.2: no single older flag
    fs = load("0.9.5")
    argv = prepare(im.config, environ={}).argv
    assert not any("." in t for t in argv if t.startswith("--"))
    ns = fs.parse(argv)
    assert (ns.zero_stage, ns.kl_estimator, ns.temperature, ns.async_train, ns.async_queue_size) == (3, "k3", 0.9, True, 2)
    assert (ns.prompt_max_len + ns.generate_max_len, ns.generate_max_len, ns.actor_num_nodes, ns.ref_num_nodes) == (10240, 8192, 2, 2)


def test_cli_a_runtime_env_key_left_out_exits_1_and_still_writes(tmp_path: Path):
    """README's exit codes: 1 for an import that could not carry everything over."""
    out = tmp_path / "p.yaml"
    path = tmp_path / "train.sh"
    path.write_text(
        "ray job submit --address=http://127.0.0.1:8265 "
        """--runtime-env-json='{"working_dir": "/openrlhf", "pip": ["math-verify"]}' """
        f"-- python3 -m {M} --pretrain m --prompt_data d\n"
    )
    done = run_cli("import", str(path), "-o", str(out))
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "error: runtime_env.pip" in done.stdout and "not imported" in done.stdout
    assert yaml.safe_load(out.read_text())["runtime_env"]["working_dir"] == "/openrlhf"
    printed = run_cli("import", str(path))
    assert printed.returncode == 1 and yaml.safe_load(printed.stdout)["runtime_env"]["working_dir"] == "/openrlhf"


@pytest.mark.parametrize(
    "name",
    [
        "openrlhf-v0.8.11-train_ppo_llama_ray.sh",  # 0.8.10 to 0.9.1.post1 accept it
        "openrlhf-v0.8.11-train_reinforce_baseline_ray_agent_multiturn.sh",  # 0.8.9 to 0.9.1.post1
        "openrlhf-v0.9.10-train_reinforce_baseline_hybrid_engine.sh",  # 0.9.8 to 0.10.1.post2
    ],
)
def test_a_real_example_script_is_read_as_its_own_release_not_the_newest_that_accepts_it(name: str):
    """OpenRLHF's own example scripts at their tag (attributed in each file): the release is the newest
    of the series where the script's newest flag appeared, not the newest release that still parses it."""
    tag = name.split("-")[1][1:]
    _, im = imported(DATA / name)
    assert im.detected and len(im.accepted_by) > 1 and im.accepted_by[-1] != tag
    assert im.source == tag, (im.source, im.accepted_by)
