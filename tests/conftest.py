from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
PRESETS = sorted(p.stem for p in CONFIGS.glob("*.yaml"))

# The 70B layout widely published for 4 nodes: 40 GPUs.
PUBLISHED_40 = """\
name: published-70b
cluster: {nodes: 4, gpus_per_node: 8}
models: {actor: meta-llama/Llama-2-70b-chat-hf, reward: some/rm}
data: {prompt_dataset: OpenRLHF/prompt-collection-v0.1}
placement:
  actor: {nodes: 1, gpus_per_node: 8}
  critic: {nodes: 1, gpus_per_node: 8}
  ref: {nodes: 1, gpus_per_node: 8}
  reward: {nodes: 1, gpus_per_node: 8}
  vllm: {engines: 2, tensor_parallel_size: 4}
deepspeed: {zero_stage: 3, adam_offload: true, gradient_checkpointing: true}
"""


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path | None = None):
    """Run the installed CLI in a fresh interpreter, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "rlhf_launch", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )


@pytest.fixture
def write_config(tmp_path):
    def write(text: str, name: str = "cfg.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """4 nodes x 8 logical GPUs, token auth on, InfiniBand settings on every node."""
    from support.ray_cluster import LocalCluster

    local = LocalCluster(
        tmp_path_factory.mktemp("cluster"),
        workers=3,
        extra_up=["--ib-hca", "mlx5_0", "--socket-ifname", "lo"],
    )
    try:
        local.start()
        yield local
    finally:
        local.stop()


@pytest.fixture
def cli_env(cluster):
    """Environment for launcher commands against the test cluster."""
    return {
        "RAY_AUTH_TOKEN_PATH": str(cluster.token_file),
        "RAY_API_SERVER_ADDRESS": cluster.address,
        "RLHF_LAUNCH_HOME": str(cluster.workdir / "state"),
    }


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh state dir (RLHF_LAUNCH_HOME) for this test."""
    monkeypatch.setenv("RLHF_LAUNCH_HOME", str(tmp_path / "state"))
    return tmp_path


@pytest.fixture
def jobs():
    """A fake job API (tests/support/fakes.py)."""
    from support.fakes import FakeJobs

    return FakeJobs()
