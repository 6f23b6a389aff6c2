"""One trainer per run, a `stop` that frees the GPUs, supervision on the cluster: on real local
Ray clusters with the stand-in trainer."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import attempts_seen, record, standin, submit, wait_run
from support.ray_cluster import processes_of_run, trainers_of_run

from conftest import run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture
def ckpt(tmp_path, cluster):
    cluster.wait_free(32)
    return tmp_path / "ckpt"


def _popen_submit(env: dict[str, str], *args: str) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    full.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "rlhf_launch", "submit", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )


def _stop_after(moments: list[float], cluster, cli_env, tmp_path) -> None:
    """A stop `moment` seconds after each submit (Ray does not cancel a job whose runtime env
    is still being set up): every time, no process of the run is left and its GPUs are free."""
    for i, moment in enumerate(moments):
        cluster.wait_free(32)
        ckpt = tmp_path / f"ckpt{i}"
        out = submit(cli_env, *standin(ckpt, steps=200, step_seconds=0.2))
        run_id = out["run_id"]
        time.sleep(moment)
        started = time.monotonic()
        done = run_cli("stop", run_id, "--json", "--timeout", "60", env=cli_env, timeout=120)
        elapsed = time.monotonic() - started
        assert done.returncode == 0, done.stdout + done.stderr
        stopped = json.loads(done.stdout)
        assert stopped["gone"] is True and stopped["left"] == [] and stopped["bound"] == 60
        assert elapsed < 60 + 10
        assert processes_of_run(run_id) == [], f"stop {i} ({moment:.2f} s after submit) left processes"
        time.sleep(3)  # an entrypoint that Ray would still start would show up by now
        assert processes_of_run(run_id) == [], f"stop {i}: a trainer started after stop returned"
        held = [pg for pg in cluster.placement_groups() if pg["state"] != "REMOVED"]
        assert held == [], held
        assert record(cli_env, run_id)["status"] == "STOPPED"


def test_stop_at_spread_moments_after_submit_leaves_nothing_running(cluster, cli_env, tmp_path):
    """Three stops spread over the first 3 s (runtime env set-up, trainer start-up, first
    steps): the moments where a stop raced a start in the past (`-m slow` adds 20 at random)."""
    _stop_after([0.0, 1.0, 3.0], cluster, cli_env, tmp_path)


@pytest.mark.slow
def test_stop_at_random_moments_after_submit_leaves_nothing_running(cluster, cli_env, tmp_path):
    """20 stops at random moments between 0 and 3 s after submit (about 4.5 minutes)."""
    rng = random.Random(7)
    _stop_after([rng.uniform(0, 3) for _ in range(20)], cluster, cli_env, tmp_path)


def test_a_paused_dashboard_does_not_make_a_second_trainer(cluster, cli_env, ckpt):
    """The dashboard stops answering (SIGSTOP) for longer than the client timeout while an
    auto-resumed attempt runs: the supervisor waits; there is never a second trainer."""
    out = submit(cli_env, *standin(ckpt, steps=50, step_seconds=0.5), extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1"))
    run_id = out["run_id"]
    wait_run(cli_env, run_id, ("RUNNING",))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not trainers_of_run(run_id):
        time.sleep(0.5)
    dashboard = cluster.dashboard_pid()
    os.kill(dashboard, signal.SIGSTOP)
    try:
        seen = []
        paused_until = time.monotonic() + 15  # the launcher's client timeout is 10 s
        while time.monotonic() < paused_until:
            seen.append(len(trainers_of_run(run_id)))
            time.sleep(0.5)
    finally:
        os.kill(dashboard, signal.SIGCONT)
    assert set(seen) == {1}, seen
    row = wait_run(cli_env, run_id, ("SUCCEEDED", "GAVE_UP", "FAILED"), timeout=180)
    assert row["status"] == "SUCCEEDED"
    rec = record(cli_env, run_id)
    assert len(rec["attempts"]) == 1 and rec["attempts"][0]["status"] == "SUCCEEDED"
    assert len(attempts_seen(ckpt)) == 1


def test_supervision_outlives_every_local_process_and_any_machine_sees_the_run(cluster, cli_env, ckpt, tmp_path):
    submitting = _popen_submit(
        cli_env, "tiny-1node", *standin(ckpt, steps=10, step_seconds=0.5, crash_at=5), "--auto-resume", "2", "--backoff", "0", "--poll", "1"
    )
    out, err = submitting.communicate(timeout=240)
    assert submitting.returncode == 0, out + err
    run_id = json.loads(out)["run_id"]
    # every local rlhf-launch process of this cluster is gone (the submit above has exited;
    # kill any other with this cluster's state dir: other workers' launchers are left alone)
    ours = f"RLHF_LAUNCH_HOME={cli_env['RLHF_LAUNCH_HOME']}".encode()
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        local = b"RLHF_LAUNCH_RUN=" not in environ  # cluster-side processes carry the marker
        if local and ours in environ.split(b"\0") and "rlhf_launch" in cmd and ("submit" in cmd or "watch" in cmd or "supervise" in cmd):
            os.kill(int(proc.name), signal.SIGKILL)
    second = {**cli_env, "RLHF_LAUNCH_HOME": str(tmp_path / "second-machine")}
    deadline = time.monotonic() + 240
    rows: list = []
    while time.monotonic() < deadline:
        done = run_cli("runs", "--json", env=second, timeout=60)
        assert done.returncode == 0, done.stderr
        rows = [r for r in json.loads(done.stdout) if r.get("run_id") == run_id]
        if rows and rows[0]["status"] in ("SUCCEEDED", "GAVE_UP", "FAILED"):
            break
        time.sleep(2)
    assert rows and rows[0]["status"] == "SUCCEEDED", rows
    assert rows[0]["attempts"] == 2
    assert [a["start_step"] for a in attempts_seen(ckpt)] == [0, 4]
    # the second machine can act on the run too
    logs = run_cli("logs", run_id, env=second, timeout=60)
    assert logs.returncode == 0 and "training finished at step 10" in logs.stdout
    assert (tmp_path / "second-machine" / "runs" / f"{run_id}.json").exists()


def test_a_corrupt_record_is_reported_and_kept(cluster, cli_env, tmp_path):
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)
    bad = home / "runs" / "half-written.json"
    bad.write_text('{"run_id": "half-written", "attempts": [{"number": 1,')
    env = {**cli_env, "RLHF_LAUNCH_HOME": str(home)}
    done = run_cli("runs", env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"unreadable record (kept): {bad}" in done.stdout
    as_json = json.loads(run_cli("runs", "--json", env=env, timeout=60).stdout)
    assert any(r.get("record") == str(bad) and "unreadable" in r for r in as_json)
    assert bad.read_text() == '{"run_id": "half-written", "attempts": [{"number": 1,'


def test_auto_resume_without_checkpoints_is_refused(cluster, cli_env, ckpt):
    overrides = [o for o in standin(ckpt) if not o.startswith("checkpoint.save_steps")] + ["checkpoint.save_steps=-1"]
    done = run_cli("submit", "tiny-1node", *overrides, "--auto-resume", "2", env=cli_env, timeout=120)
    assert done.returncode == 2 and "save_steps" in done.stderr and "--allow-fresh" in done.stderr
    assert "Traceback" not in done.stderr
    allowed = run_cli("submit", "tiny-1node", *overrides, "--auto-resume", "1", "--allow-fresh", "--json", env=cli_env, timeout=120)
    assert allowed.returncode == 0, allowed.stderr
    run_cli("stop", json.loads(allowed.stdout)["run_id"], env=cli_env, timeout=120)
