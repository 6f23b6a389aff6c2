"""`rlhf-launch plan`, `submit --dry-run`, `presets`, `init`, `versions` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlhf_launch.openrlhf import releases

from conftest import CONFIGS, PUBLISHED_40, ROOT, run_cli

KEY = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("preset,gpus", [("llama70b-4node", 32), ("llama70b-8node", 64), ("llama70b-2node-hybrid", 16), ("tiny-1node", 8)])
def test_plan_json_of_presets(preset, gpus):
    done = run_cli("plan", f"configs/{preset}.yaml", "--json", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["gpus_required"] == gpus and out["cluster_gpus"] == gpus
    assert [f for f in out["findings"] if f["level"] == "error"] == []
    assert out["openrlhf_version"] == releases.DEFAULT
    assert out["entrypoint"].startswith("python3 -m openrlhf.cli.train_ppo_ray ")
    assert out["entrypoint"].split()[3:] == out["trainer_argv"]
    assert {r["role"] for r in out["roles"]} >= {"actor", "critic", "ref", "reward", "vllm"}
    for role in out["roles"]:
        assert {"role", "nodes", "gpus_per_node", "gpus", "colocated_with"} <= set(role)
    assert out["command"].startswith("ray job submit --address http://127.0.0.1:8265")


def test_presets_plan_by_name_and_text_output():
    done = run_cli("plan", "llama70b-4node")
    assert done.returncode == 0, done.stderr
    assert "GPUs needed: 32 = actor 8 + critic 8 + ref 4 + reward 4 + vLLM 2x4" in done.stdout
    assert "--actor.num_nodes 1" in done.stdout


def test_published_40_gpu_layout_fails_with_exit_2_and_the_sum(write_config):
    path = write_config(PUBLISHED_40)
    done = run_cli("plan", str(path))
    assert done.returncode == 2
    assert "needs 40 GPUs (actor 8 + critic 8 + ref 8 + reward 8 + vLLM 2x4) but the cluster has 32" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    js = run_cli("plan", str(path), "--json")
    assert js.returncode == 2 and json.loads(js.stdout)["gpus_required"] == 40
    fixed = run_cli("plan", str(path), "placement.ref.gpus_per_node=4", "placement.reward.gpus_per_node=4")
    assert fixed.returncode == 0, fixed.stdout


def test_version_flag_overrides_the_config():
    done = run_cli("plan", "llama70b-4node", "--openrlhf-version", "0.8.11", "--json")
    out = json.loads(done.stdout)
    assert out["openrlhf_version"] == "0.8.11" and "--actor_num_nodes" in out["trainer_argv"]
    bad = run_cli("plan", "llama70b-4node", "--openrlhf-version", "0.1")
    assert bad.returncode == 2 and "not a supported OpenRLHF release" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "text,expected",
    [
        ("name: t\nmodels: [oops\n", "invalid YAML"),
        ("name: t\nplacment: {}\n", "did you mean placement?"),
        ("name: t\ntrain: {train_batch_size: many}\n", "train.train_batch_size"),
    ],
)
def test_user_errors_exit_2_without_traceback(write_config, text, expected):
    done = run_cli("plan", str(write_config(text)))
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_missing_config_and_unknown_preset():
    done = run_cli("plan", "no-such-preset")
    assert done.returncode == 2 and "no preset named" in done.stderr
    done = run_cli("plan", "missing.yaml")
    assert done.returncode == 2 and "not found" in done.stderr


def test_submit_dry_run_prints_the_plan_without_a_cluster():
    env = {"RAY_ADDRESS": "http://127.0.0.1:9"}  # nothing answers there: the dry run asks no cluster
    plan = run_cli("plan", "llama70b-4node", "--json", env=env)
    dry = run_cli("submit", "llama70b-4node", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == {**json.loads(plan.stdout), "submitted": False}  # and it says nothing was
    assert json.loads(dry.stdout)["command"].startswith("ray job submit --address http://127.0.0.1:9 ")  # where it would go


def _no_ray(args: list[str]) -> dict:
    code = (
        "import sys, json, io, contextlib\n"
        "from rlhf_launch.cli.app import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        f"    rc = main({args!r})\n"
        "print(json.dumps({'rc': rc, 'ray': sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["plan", "configs/llama70b-4node.yaml"],
        ["plan", "configs/llama70b-8node.yaml", "--json"],
        ["submit", "tiny-1node", "--dry-run"],
    ],
)
def test_help_and_plan_do_not_import_ray(args):
    got = _no_ray(args)
    assert got["rc"] == 0
    assert got["ray"] == []


def test_wandb_key_never_shows_but_reaches_the_job():
    done = run_cli("plan", "llama70b-4node", "--json", env={"WANDB_API_KEY": KEY})
    assert done.returncode == 0
    assert KEY not in done.stdout + done.stderr
    out = json.loads(done.stdout)
    argv = out["trainer_argv"]
    assert argv[argv.index("--logger.wandb.key") + 1] == "env:WANDB_API_KEY"
    assert out["runtime_env"]["env_vars"]["WANDB_API_KEY"] == "<redacted>"
    assert '\\"WANDB_API_KEY\\": \\"$WANDB_API_KEY\\"' in out["command"]
    text = run_cli("plan", "llama70b-4node", env={"WANDB_API_KEY": KEY})
    assert KEY not in text.stdout + text.stderr and "$WANDB_API_KEY" in text.stdout


def test_printed_command_is_the_same_job_when_a_shell_runs_it(tmp_path):
    """Run the printed `ray job submit ...` line with a `ray` that reports its argv."""
    done = run_cli("plan", "llama70b-4node", "--json", env={"WANDB_API_KEY": KEY})
    out = json.loads(done.stdout)
    fake = tmp_path / "ray"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "WANDB_API_KEY": KEY}
    shell = subprocess.run(["bash", "-c", out["command"]], capture_output=True, text=True, env=env, timeout=30)
    args = json.loads(shell.stdout)
    assert args[:4] == ["job", "submit", "--address", "http://127.0.0.1:8265"]
    runtime_env = json.loads(args[args.index("--runtime-env-json") + 1])
    assert runtime_env["env_vars"]["WANDB_API_KEY"] == KEY  # expanded by the shell, from its env
    assert runtime_env["env_vars"]["NCCL_DEBUG"] == "WARN"
    assert " ".join(args[args.index("--") + 1 :]) == out["entrypoint"]


def test_presets_init_and_versions(tmp_path):
    listed = run_cli("presets", "--json")
    names = [p["name"] for p in json.loads(listed.stdout)]
    assert names == sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    init = run_cli("init", "tiny-1node", str(tmp_path / "mine.yaml"))
    assert init.returncode == 0 and (tmp_path / "mine.yaml").read_text() == (CONFIGS / "tiny-1node.yaml").read_text()
    again = run_cli("init", "tiny-1node", str(tmp_path / "mine.yaml"))
    assert again.returncode == 2 and "already exists" in again.stderr
    versions = json.loads(run_cli("versions", "--json").stdout)
    assert versions["default"] == releases.DEFAULT and "0.8.0" in versions["versions"]
    assert versions["newest"] == versions["versions"][-1]
