"""A worker node dies under a run: the job fails, the supervisor waits for GPUs, then resumes."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest
from support.jobs import attempts_seen, record, standin, submit, wait_run

from conftest import run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory):
    from support.ray_cluster import LocalCluster

    local = LocalCluster(tmp_path_factory.mktemp("small"), workers=1)
    try:
        local.start()
        yield local
    finally:
        local.stop()


def env_for(cluster, home) -> dict[str, str]:
    return {"RAY_AUTH_TOKEN_PATH": str(cluster.token_file), "RAY_API_SERVER_ADDRESS": cluster.address, "RLHF_LAUNCH_HOME": str(home)}


def test_killed_worker_node_fails_the_job_and_the_run_is_resumed(small_cluster, tmp_path):
    env = env_for(small_cluster, tmp_path / "state")
    ckpt = tmp_path / "ckpt"
    out = submit(
        env,
        *standin(ckpt, steps=30, step_seconds=0.5),
        "runtime_env.env_vars.STANDIN_WATCH_NODES='1'",
        "runtime_env.env_vars.STANDIN_PLACEMENT_TIMEOUT='600'",  # the real trainer waits forever
        extra=("--auto-resume", "1", "--backoff", "0", "--poll", "1"),
        preset="llama70b-2node-hybrid",
    )
    run_id = out["run_id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (ckpt / "_actor" / "latest").exists():
        time.sleep(0.5)
    first = attempts_seen(ckpt)[0]
    assert first["nodes"] == 2 and first["gpus"] == 16
    os.kill(small_cluster.raylet_pid(0), signal.SIGKILL)
    jobs = small_cluster.jobs()
    supervisor_log = lambda: jobs.logs(f"{run_id}-supervisor-1")  # noqa: E731
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and "waiting for the cluster to have 16 GPUs again" not in supervisor_log():
        time.sleep(1)
    # the supervisor waits for the GPUs instead of leaving an attempt hung at placement
    assert "waiting for the cluster to have 16 GPUs again" in supervisor_log()
    assert jobs.status(f"{run_id}-1").value == "FAILED"
    small_cluster.add_worker()
    row = wait_run(env, run_id, ("SUCCEEDED", "GAVE_UP"), timeout=240)
    assert row["status"] == "SUCCEEDED", supervisor_log()
    rec = record(env, run_id)
    statuses = [a["status"] for a in rec["attempts"]]
    assert statuses[0] == "FAILED" and statuses[-1] == "SUCCEEDED"
    lost = rec["attempts"][0]["diagnosis"]
    assert lost["class"] == "node_lost" and re.match(r"nodes? \d+\.\d+\.\d+\.\d+", lost["hint"]), lost  # the hint names the node
    assert not any("\x1b" in line for line in lost["evidence"])
    assert set(statuses[1:-1]) <= {"SUPERSEDED"}  # an attempt sent before Ray noticed the loss
    assert sum(a["reason"] == "auto-resume" for a in rec["attempts"]) == 1
    last = attempts_seen(ckpt)[-1]
    assert last["start_step"] >= 2 and last["argv"][-1] == "--ckpt.load_enable" and last["nodes"] == 2
    # resumed from the latest checkpoint: saved steps 2, 4, ... with no gap, each written by one trainer
    saves = [json.loads(line) for line in (ckpt / ".standin_saves.jsonl").read_text().splitlines()]
    steps = [s["step"] for s in saves]
    assert sorted(set(steps)) == list(range(2, 31, 2))
    assert len(steps) == len(set(steps)), "a step was written by two trainers"
    by_job = [s["job"] for s in sorted(saves, key=lambda s: s["time"])]
    assert by_job == sorted(by_job, key=lambda job: int(job.rsplit("-", 1)[1]))  # attempts never interleave


@pytest.mark.slow  # about 1.5 minutes: a whole cluster stopped and started again (CI's 15-minute budget)
def test_resume_after_the_cluster_was_restarted(small_cluster, tmp_path):
    """The run record, not Ray's job table, is the source of truth."""
    from support.ray_cluster import LocalCluster

    env = env_for(small_cluster, tmp_path / "state")
    ckpt = tmp_path / "ckpt"
    small_cluster.wait_free(16)
    run_id = submit(env, *standin(ckpt, steps=6, crash_at=5))["run_id"]
    wait_run(env, run_id, ("FAILED",))
    small_cluster.stop()  # the whole cluster goes away, job table and all
    (tmp_path / "new").mkdir()
    fresh = LocalCluster(tmp_path / "new", workers=0)
    try:
        fresh.start()
        new_env = env_for(fresh, tmp_path / "state")
        done = run_cli("resume", run_id, "--address", fresh.address, "--json", env=new_env, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["checkpoint"]["latest_step"] == 4
        row = wait_run(new_env, run_id, ("SUCCEEDED", "FAILED"))
        assert row["status"] == "SUCCEEDED"
        rec = record(env, run_id)
        assert rec["address"] == fresh.address
        assert [a["status"] for a in rec["attempts"]] == ["FAILED", "SUCCEEDED"]
        assert attempts_seen(ckpt)[-1]["start_step"] == 4
    finally:
        fresh.stop()
