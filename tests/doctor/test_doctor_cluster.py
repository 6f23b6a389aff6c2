"""`doctor`, and the checks and the checkpoint guard of `submit`, on real local Ray clusters
whose nodes differ the way real ones do: a worker joined with a PYTHONPATH holding another
release's package metadata, a worker with its own (empty) HF cache."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import STANDIN, standin

from conftest import run_cli

pytestmark = pytest.mark.cluster

HUB_MODEL = "acme/tiny-rm"  # a hub id the nodes' HF caches hold (or, on one worker, do not)


def _site(root: Path, packages: dict[str, str]) -> Path:
    """A folder of package metadata only: what another image's site-packages looks like to doctor."""
    root.mkdir(parents=True, exist_ok=True)
    for name, version in packages.items():
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


def _hf_cache(home: Path) -> Path:
    snapshot = home / "hub" / ("models--" + HUB_MODEL.replace("/", "--")) / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True, exist_ok=True)
    for item in (STANDIN / "models" / "tiny-rm").iterdir():
        (snapshot / item.name).write_bytes(item.read_bytes())
    return home


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """4 nodes x 8 logical GPUs: the head and worker 0 as they should be; worker 1 with another
    release's openrlhf and vllm on its PYTHONPATH; worker 2 with an HF cache of its own, empty."""
    from support.ray_cluster import LocalCluster

    work = tmp_path_factory.mktemp("mixed")
    good_hf = _hf_cache(work / "hf-good")
    other = _site(work / "other-site", {"openrlhf": "0.9.1", "vllm": "0.8.5"})
    local = LocalCluster(
        work,
        workers=3,
        head_env={"HF_HOME": str(good_hf)},
        worker_env=[{"HF_HOME": str(good_hf)}, {"HF_HOME": str(good_hf), "PYTHONPATH": str(other)}, {"HF_HOME": str(work / "hf-empty")}],
    )
    try:
        local.start()
        yield local
    finally:
        local.stop()


def env_of(local) -> dict[str, str]:
    return {
        "RAY_AUTH_TOKEN_PATH": str(local.token_file),
        "RAY_API_SERVER_ADDRESS": local.address,
        "RLHF_LAUNCH_HOME": str(local.workdir / "state"),
    }


def doctor(local, *overrides: str, extra=()) -> tuple[int, dict]:
    done = run_cli("doctor", "tiny-1node", *overrides, "--json", *extra, env=env_of(local), timeout=120)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def mixed_overrides(tmp_path: Path, *more: str) -> list[str]:
    """The stand-in run, with the node's own PYTHONPATH first (Ray expands ${PYTHONPATH} from
    the node's environment) and the reward model a hub id, offline."""
    base = [o for o in standin(tmp_path / "ckpt") if not o.startswith(("runtime_env.env_vars.PYTHONPATH=", "models.reward="))]
    return [
        *base,
        f"runtime_env.env_vars.PYTHONPATH=${{PYTHONPATH}}:{STANDIN}",
        f"models.reward={HUB_MODEL}",
        "runtime_env.env_vars.HF_HUB_OFFLINE='1'",
        *more,
    ]


def failed(data: dict, check: str) -> list[dict]:
    return [f for f in data["findings"] if f["check"] == check and f["level"] == "error"]


def test_each_node_that_differs_gets_one_finding_naming_it(mixed, tmp_path):
    started = time.monotonic()
    code, data = doctor(mixed, *mixed_overrides(tmp_path))
    seconds = time.monotonic() - started
    assert code == 1 and not data["ok"]
    software = failed(data, "software")
    assert {f["node"] for f in software} == {"127.0.0.4"}, software  # worker 1
    assert any("openrlhf 0.9.1 is installed" in f["found"] for f in software)
    assert any(f["found"].startswith("vllm 0.8.5, but") for f in software)
    models = failed(data, "models")
    assert [f["node"] for f in models] == ["127.0.0.5"], models  # worker 2: its own HF cache
    assert HUB_MODEL in models[0]["found"] or "models.reward" in models[0]["found"]
    assert data["checks"]["models"] == {"127.0.0.2": "pass", "127.0.0.3": "pass", "127.0.0.4": "pass", "127.0.0.5": "fail"}
    others = [f for f in data["findings"] if f["level"] == "error" and f["check"] not in ("software", "models")]
    assert not others, others
    assert seconds < 60


def test_a_missing_shard_and_an_interface_no_node_has(mixed, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for item in (STANDIN / "models" / "tiny-actor").iterdir():
        (model / item.name).write_bytes(item.read_bytes())
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model.safetensors", "b": "model-2.safetensors"}}))
    code, data = doctor(
        mixed,
        *mixed_overrides(tmp_path, f"models.actor={model}", "runtime_env.env_vars.NCCL_SOCKET_IFNAME=ib9"),
        extra=("--skip-check", "software"),
    )
    assert code == 1
    [shard] = [f for f in failed(data, "models") if "model-2.safetensors" in f["found"]]
    assert shard["node"].startswith("4 nodes")
    [network] = failed(data, "network")
    assert "NCCL_SOCKET_IFNAME=ib9 selects no interface" in network["found"] and network["node"].startswith("4 nodes")
    assert "software" not in data["checks"] and data["skipped"] == ["software"]


def test_a_checkpoint_budget_over_the_free_disk(mixed, tmp_path):
    """A small model kept 1,000,000 times (checkpoint.max_num): more than the test disk holds."""
    code, data = doctor(
        mixed,
        *mixed_overrides(tmp_path, f"models.critic={STANDIN / 'models' / 'tiny-rm'}", "checkpoint.max_num=1000000"),
        extra=("--skip-check", "software,models"),
    )
    assert code == 1
    [disk] = failed(data, "disk")
    assert "but the checkpoints need" in disk["found"] and disk["wanted"].endswith("TiB"), disk
    assert disk["node"].startswith("4 nodes")


def test_submit_refuses_what_doctor_fails_naming_the_node(mixed, tmp_path):
    done = run_cli("submit", "tiny-1node", *mixed_overrides(tmp_path), env=env_of(mixed), timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "doctor.software: 127.0.0.4: openrlhf 0.9.1 is installed" in done.stdout
    assert "not submitted" in done.stdout
    assert not [j for j in _jobs(mixed) if j.startswith("tiny-1node-")], "a refused submit submitted nothing"


def _jobs(local) -> list[str]:
    code, data = local.api("/api/jobs/")
    return [j.get("submission_id") or "" for j in data or []]


# ---------------------------------------------------------------- the shared, healthy cluster


def test_a_healthy_cluster_passes_with_no_false_alarm(cluster, cli_env, tmp_path):
    done = run_cli("doctor", "tiny-1node", *standin(tmp_path / "ckpt"), "--json", env=cli_env, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["ok"] and not [f for f in data["findings"] if f["level"] == "error"]
    # What a test node cannot report, or really lacks, is a warning saying so, never a pass:
    warned = {f["check"] for f in data["findings"]}
    assert warned <= {"software", "network", "gpu", "disk"}, data["findings"]
    assert set(data["checks"]["gpu"].values()) == {"warn"}  # logical GPUs: memory not reported
    for check in ("models", "data", "shm", "memory"):
        assert set(data["checks"][check].values()) == {"pass"}, (check, data["checks"][check])
    text = run_cli("doctor", "tiny-1node", *standin(tmp_path / "ckpt"), env=cli_env, timeout=120).stdout
    assert "ok: nothing blocks the run" in text and "127.0.0.5" in text


def test_racing_submits_one_wins_the_checkpoint_directory(cluster, cli_env, tmp_path):
    cluster.wait_free(32)
    ckpt = tmp_path / "ckpt"
    args = [sys.executable, "-m", "rlhf_launch", "submit", "tiny-1node", *standin(ckpt, steps=30, step_seconds=0.5), "--json"]
    import os

    env = {**{k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}, **cli_env}
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    winner = json.loads(next(o for p, o in zip(procs, outs, strict=True) if p.returncode == 0)[0])
    loser = next(o for p, o in zip(procs, outs, strict=True) if p.returncode == 2)
    assert f"is in use by run {winner['run_id']}" in loser[1], loser
    # while it lives, a third submit is refused too; resume of it is refused as live
    third = run_cli("submit", "tiny-1node", *standin(ckpt), env=cli_env, timeout=120)
    assert third.returncode == 2 and winner["run_id"] in third.stderr
    deadline = time.monotonic() + 180
    while not (ckpt / "_actor" / "latest").exists() and time.monotonic() < deadline:
        time.sleep(1)  # a save or two before the stop
    stop = run_cli("stop", winner["run_id"], env=cli_env, timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    # stopped, with checkpoints on disk: a fresh submit is refused naming the latest step ...
    fresh = run_cli("submit", "tiny-1node", *standin(ckpt), env=cli_env, timeout=120)
    assert fresh.returncode == 2 and "already holds checkpoints" in fresh.stderr and f"resume {winner['run_id']}" in fresh.stderr
    latest = (ckpt / "_actor" / "latest").read_text().strip()
    assert latest in fresh.stderr
    # ... and --move-checkpoints-aside keeps every step, moved, never deleted
    before = sorted(p.name for p in (ckpt / "_actor").iterdir())
    moved = run_cli("submit", "tiny-1node", *standin(ckpt, steps=2), "--move-checkpoints-aside", "--json", env=cli_env, timeout=240)
    assert moved.returncode == 0, moved.stdout[-2000:] + moved.stderr[-2000:]
    aside = list((ckpt / ".rlhf-launch-aside").iterdir())
    assert len(aside) == 1 and sorted(p.name for p in (aside[0] / "_actor").iterdir()) == before
    new_run = json.loads(moved.stdout)["run_id"]
    from support.jobs import wait_run

    wait_run(cli_env, new_run, {"SUCCEEDED"})
    resumed = run_cli("resume", new_run, env=cli_env, timeout=120)
    assert resumed.returncode == 2 and "already SUCCEEDED" in resumed.stderr
