"""docker/ and scripts/: lint, argument handling, and the exact `docker run` lines (no Docker here)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf_launch.openrlhf import releases
from rlhf_launch.openrlhf.flagset import load, newest_version

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "run-node.sh"
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def tool(name: str) -> str:
    found = shutil.which(name) or (Path(sys.executable).parent / name)
    assert Path(found).exists(), f"{name} is installed by the test extra"
    return str(found)


def run_node(*args: str, env: dict | None = None, path_prefix: Path | None = None):
    full = {**os.environ, "HOME": os.environ.get("HOME", "/root"), **(env or {})}
    if path_prefix is not None:
        full["PATH"] = f"{path_prefix}:{full['PATH']}"
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=30)


def docker_argv(*args: str) -> list[str]:
    done = run_node(*args, "--dry-run")
    assert done.returncode == 0, done.stderr
    return shlex.split(done.stdout)


def test_shellcheck_passes():
    done = subprocess.run([tool("shellcheck"), *map(str, (ROOT / "scripts").glob("*.sh"))], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_hadolint_passes():
    done = subprocess.run([tool("hadolint"), str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_head_line_has_what_multinode_training_needs():
    argv = docker_argv("head", "--ib-hca", "mlx5_0,mlx5_1", "--socket-ifname", "ib0", "--ib-devices", "none")
    assert argv[:3] == ["docker", "run", "--detach"]
    line = " ".join(argv)
    for part in ("--gpus all", "--network host", "--shm-size 32g", "--ulimit memlock=-1", "--volume /mnt/shared:/mnt/shared"):
        assert part in line
    assert "SYS_ADMIN" not in line and "--device" not in line
    image = f"rlhf-launch:{releases.DEFAULT}"
    tail = argv[argv.index(image) :]
    assert tail[:5] == [image, "rlhf-launch", "up", "--head", "--block"]
    assert tail[tail.index("--ib-hca") + 1] == "mlx5_0,mlx5_1" and tail[tail.index("--socket-ifname") + 1] == "ib0"
    assert tail[tail.index("--token-file") + 1] == "/ray-auth/auth_token"
    assert "RAY_AUTH_TOKEN_PATH=/ray-auth/auth_token" in argv


def test_worker_line_joins_the_head_with_the_token():
    argv = docker_argv("worker", "10.1.2.3", "--num-gpus", "8", "--port", "7000", "--ckpt-dir", "/lustre/ckpt", "--image", "reg/x:1")
    tail = argv[argv.index("reg/x:1") :]
    assert tail[:5] == ["reg/x:1", "rlhf-launch", "join", "10.1.2.3", "--block"]
    assert tail[tail.index("--port") + 1] == "7000" and tail[tail.index("--num-gpus") + 1] == "8"
    assert "/lustre/ckpt:/lustre/ckpt" in argv


def test_infiniband_devices_and_sys_admin_only_when_asked(tmp_path):
    argv = docker_argv("head", "--ib-devices", str(tmp_path), "--sys-admin")
    assert argv[argv.index("--device") + 1] == str(tmp_path)
    assert "IPC_LOCK" in argv and "SYS_ADMIN" in argv


@pytest.mark.parametrize(
    "args,message",
    [
        (["worker"], "needs the head's IP"),
        (["boss"], "must be 'head' or 'worker'"),
        (["head", "--shm-size", "4g"], "too small"),
        (["head", "--shm-size", "lots"], "gigabytes"),
        (["head", "--ckpt-dir", "ckpt"], "absolute path"),
        (["head", "--num-gpus", "all"], "must be a number"),
        (["head", "--frobnicate"], "unknown option"),
        (["head", "--image"], "needs a value"),
    ],
)
def test_bad_arguments_exit_2_with_a_reason(args, message):
    done = run_node(*args)
    assert done.returncode == 2
    assert message in done.stderr


def test_runs_exactly_the_printed_line_and_checks_the_token_first(tmp_path):
    calls = tmp_path / "calls"
    fake = tmp_path / "docker"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    fake.chmod(0o755)
    tokens = tmp_path / "ray"
    missing = run_node("worker", "10.0.0.1", "--token-dir", str(tokens), path_prefix=tmp_path)
    assert missing.returncode == 2 and "no Ray token" in missing.stderr and not calls.exists()
    tokens.mkdir()
    (tokens / "auth_token").write_text("t" * 64)
    args = ("worker", "10.0.0.1", "--token-dir", str(tokens), "--ib-devices", "none")
    done = run_node(*args, path_prefix=tmp_path)
    assert done.returncode == 0, done.stderr
    import json

    ran = json.loads(calls.read_text().splitlines()[0])
    assert ["docker", *ran] == docker_argv(*args)


def test_dockerfile_pins_match_openrlhf_and_the_cluster_extra():
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    newest = newest_version()
    assert args["OPENRLHF_VERSION"] == newest
    assert args["RAY_VERSION"] == load(newest).ray_pin  # every node runs the Ray OpenRLHF pins
    assert args["BASE_IMAGE"] == "nvcr.io/nvidia/pytorch:25.02-py3"
    tomllib = pytest.importorskip("tomllib")
    cluster = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cluster"]
    pins = dict(re.match(r"([\w\-\[\]]+)==(\S+)", p).groups() for p in cluster if "==" in p)
    assert pins["ray[default]"] == args["RAY_VERSION"]
    assert pins["openrlhf[vllm]"] == args["OPENRLHF_VERSION"]
    assert pins["deepspeed"] == args["DEEPSPEED_VERSION"] and pins["flash-attn"] == args["FLASH_ATTN_VERSION"]
    assert "WANDB_API_KEY" not in text and "auth_token" not in text


def test_dockerignore_keeps_secrets_and_checkpoints_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", "**/auth_token", "*.safetensors", "ckpt"):
        assert entry in ignored
