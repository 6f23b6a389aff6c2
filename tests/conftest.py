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


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path | None = None, real: bool = False):
    """Run the CLI as a user would, in this process (`rlhf_launch.cli.app.main`, its output
    captured, `env` set and WANDB_API_KEY unset while it runs): a fresh interpreter costs a
    second per call. `real=True` (or RLHF_TEST_SUBPROCESS=1 for every call) runs it in a
    fresh interpreter instead, where the process is the point: imports, signals, exit paths."""
    if real or os.environ.get("RLHF_TEST_SUBPROCESS"):
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
    return _in_process(list(args), env or {}, cwd)


def _in_process(args: list[str], env: dict[str, str], cwd: Path | None) -> subprocess.CompletedProcess[str]:
    import contextlib
    import io

    from rlhf_launch.cli.app import main

    saved = {k: os.environ.get(k) for k in [*env, "WANDB_API_KEY"]}
    os.environ.pop("WANDB_API_KEY", None)
    os.environ.update(env)
    here = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # a verb that exits on its own
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(here)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return subprocess.CompletedProcess(["rlhf-launch", *args], code, out.getvalue(), err.getvalue())


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


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`-n N --dist loadgroup`, pyproject's default), every test on the
    shared 4-node cluster runs in one worker, which starts that cluster once; the rest spread
    over the other workers. A module's own fixture of module scope (its own cluster, say)
    keeps that module's tests in one worker too, so it is set up once, not once per worker."""
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("shared-cluster"))
            continue
        info = getattr(item, "_fixtureinfo", None)
        module = item.nodeid.split("::", 1)[0]
        for defs in info.name2fixturedefs.values() if info else ():
            if any(d.scope == "module" and d.baseid == module for d in defs):
                item.add_marker(pytest.mark.xdist_group(module))
                break
