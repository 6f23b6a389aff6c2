"""Job lifecycle on a real local Ray cluster with a stand-in trainer (real OpenRLHF flag sets)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import KEY, attempts_seen, record, standin, submit, wait_run

from conftest import ROOT, run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture
def ckpt(tmp_path, cluster):
    cluster.wait_free(32)
    return tmp_path / "ckpt"


def test_submit_runs_to_success_with_exactly_the_planned_job(cluster, cli_env, ckpt):
    overrides = standin(ckpt)
    plan = json.loads(run_cli("plan", "llama70b-4node", *overrides, "--json", env=cli_env).stdout)
    out = submit(cli_env, *overrides, preset="llama70b-4node")
    run_id, job_id = out["run_id"], out["job_id"]
    assert job_id == f"{run_id}-1" and run_id.startswith("llama70b-4node-")
    wait_run(cli_env, run_id, ("SUCCEEDED",))
    info = cluster.jobs().info(job_id)
    assert info.entrypoint == plan["entrypoint"]
    markers = {"RLHF_LAUNCH_RUN": run_id, "RLHF_LAUNCH_JOB": job_id}  # how stop and the supervisor find its processes
    assert info.runtime_env == {**plan["runtime_env"], "env_vars": {**plan["runtime_env"]["env_vars"], **markers}}
    assert info.metadata["rlhf_launch_run"] == run_id and info.metadata["rlhf_launch_attempt"] == "1"
    seen = attempts_seen(ckpt)
    assert len(seen) == 1 and seen[0]["argv"] == plan["trainer_argv"]
    assert seen[0]["gpus"] == 32 and seen[0]["nodes"] == 4
    # Ray placed every group as our PACK simulation predicted (per-node bundle counts)
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.core.placement import NodeFree, simulate

    launch = prepare(load_config(ROOT / "configs" / "llama70b-4node.yaml", overrides), environ={})
    sim = simulate(launch.plan.groups, [NodeFree(f"n{i}", "", 8, 8) for i in range(4)])
    assert [sorted(p.per_node.values(), reverse=True) for p in sim.placements] == seen[0]["per_group"]
    rec = record(cli_env, run_id)
    assert rec["status"] == "SUCCEEDED" and rec["argv"] == plan["trainer_argv"]
    assert rec["attempts"][0]["status"] == "SUCCEEDED"
    logs = run_cli("logs", run_id, env=cli_env)
    assert "training finished at step 6" in logs.stdout
    ck = json.loads(run_cli("checkpoints", run_id, "--json", env=cli_env, timeout=120).stdout)
    assert ck["status"] == "ok" and ck["latest_step"] == 6 and ck["checked_on"] == "every alive node"
    assert ck["roles"]["actor"]["steps"] == [2, 4, 6] and ck["hf_steps"] == [2, 4, 6]
    assert ck["findings"] == []
    # asked once, every node's agent keeps watching the path: the next look starts no job
    again = json.loads(run_cli("checkpoints", run_id, "--json", env=cli_env, timeout=120).stdout)
    assert again["seen_by"] == "the nodes' agents (watching it)" and again["latest_step"] == 6, again


def test_flat_release_runs_with_flat_flags(cluster, cli_env, ckpt):
    out = submit(cli_env, *standin(ckpt, steps=2, version="0.8.11"))
    wait_run(cli_env, out["run_id"], ("SUCCEEDED",))
    argv = attempts_seen(ckpt)[0]["argv"]
    assert "--actor_num_nodes" in argv and not any("." in a for a in argv if a.startswith("--"))


def test_logs_follow_streams_and_ctrl_c_leaves_the_job_running(cluster, cli_env, ckpt):
    # long enough that the job still runs when Ctrl-C comes, however late a loaded machine
    # delivers the log (a stream that ended with the job has nothing to stop)
    out = submit(cli_env, *standin(ckpt, steps=400, step_seconds=0.5))
    run_id = out["run_id"]
    env = {**os.environ, **cli_env}
    env.pop("WANDB_API_KEY", None)
    follower = subprocess.Popen(
        [sys.executable, "-m", "rlhf_launch", "logs", run_id, "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = follower.stdout.readline()
        lines.append(line)
        if re.match(r"\[rlhf-launch\] step ([3-9]|\d\d+)/400", line):  # log chunks come in batches of lines
            break
    follower.send_signal(signal.SIGINT)
    assert follower.wait(timeout=30) == 130  # Ctrl-C: 130, as every verb (README: exit codes)
    # the launcher's own progress lines, M from the trainer's episode bar, between whole log lines
    shown = [line for line in lines if line.startswith("[rlhf-launch] step ")]
    assert shown and re.match(r"\[rlhf-launch\] step \d+/400", shown[-1]), lines
    assert any("Global step 2:" in line for line in lines)
    err = follower.stderr.read()
    assert "stopped following" in err
    assert "Traceback" not in err and "GeneratorExit" not in err and "Task was destroyed" not in err, err
    rows = json.loads(run_cli("runs", "--json", env=cli_env).stdout)
    assert next(r for r in rows if r["run_id"] == run_id)["status"] == "RUNNING"
    stopped = json.loads(run_cli("stop", run_id, "--json", env=cli_env, timeout=120).stdout)
    assert stopped["job_status"] == "STOPPED"
    assert record(cli_env, run_id)["status"] == "STOPPED" and record(cli_env, run_id)["stopped_by_user"] is True


def test_resume_after_a_crash_continues_from_the_latest_step(cluster, cli_env, ckpt):
    out = submit(cli_env, *standin(ckpt, steps=8, crash_at=5))
    run_id = out["run_id"]
    wait_run(cli_env, run_id, ("FAILED",))
    resumed = run_cli("resume", run_id, "--json", env=cli_env, timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["attempt"] == 2 and data["job_id"] == f"{run_id}-2" and data["checkpoint"]["latest_step"] == 4
    wait_run(cli_env, run_id, ("SUCCEEDED",))
    first, second = attempts_seen(ckpt)
    assert second["start_step"] == 4
    assert second["argv"] == first["argv"] + ["--ckpt.load_enable"]
    assert first["gpus"] == 8
    assert first["nodes"] == 3  # Ray packs each group but puts each on the emptiest node
    assert "resumed from global_step4" in run_cli("logs", run_id, env=cli_env).stdout


def test_resume_refusals(cluster, cli_env, ckpt):
    out = submit(cli_env, *standin(ckpt, steps=60, step_seconds=0.5))
    run_id = out["run_id"]
    running = run_cli("resume", run_id, env=cli_env)
    assert running.returncode == 2 and "still running" in running.stderr
    run_cli("stop", run_id, env=cli_env, timeout=120)
    # stopped before any checkpoint? steps are 0.5s and saves every 2: wipe to be sure
    import shutil

    shutil.rmtree(ckpt, ignore_errors=True)
    fresh = run_cli("resume", run_id, "--json", env=cli_env, timeout=120)
    assert fresh.returncode == 2
    assert any("no checkpoint" in f["message"] and "--allow-fresh" in f["hint"] for f in json.loads(fresh.stdout)["findings"])
    (ckpt / "_actor" / "global_step2").mkdir(parents=True)
    broken = run_cli("resume", run_id, "--json", env=cli_env, timeout=120)
    assert broken.returncode == 2
    assert any("broken checkpoint" in f["message"] and "latest" in f["message"] for f in json.loads(broken.stdout)["findings"])
    changed = run_cli("resume", run_id, "placement.actor.gpus_per_node=4", env=cli_env)
    assert changed.returncode == 2 and "placement" in changed.stderr and "--force" in changed.stderr
    shutil.rmtree(ckpt)
    allowed = run_cli("resume", run_id, "--allow-fresh", "--json", env=cli_env, timeout=120)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    run_cli("stop", run_id, env=cli_env, timeout=120)


def test_auto_resume_survives_one_crash_and_finishes(cluster, cli_env, ckpt):
    out = submit(cli_env, *standin(ckpt, steps=8, crash_at=5), extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1"))
    run_id = out["run_id"]
    assert out["supervisor_job"] == f"{run_id}-supervisor-1"
    row = wait_run(cli_env, run_id, ("SUCCEEDED", "GAVE_UP"))  # FAILED is passing: the supervisor resumes
    assert row["status"] == "SUCCEEDED"
    rec = record(cli_env, run_id)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "SUCCEEDED"]
    assert [a["reason"] for a in rec["attempts"]] == ["submit", "auto-resume"]
    assert [a["start_step"] for a in attempts_seen(ckpt)] == [0, 4]


def test_auto_resume_gives_up_after_the_third_failure(cluster, cli_env, ckpt):
    """Three retriable failures, each further on: two automatic resumes, then GAVE_UP."""
    out = submit(
        cli_env, *standin(ckpt, steps=10, crash_at="3,5,7", crash_times=99), extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1")
    )
    run_id = out["run_id"]
    # FAILED is not final: a look that cannot read the finished supervisor's decision shows
    # the attempt's FAILED until the next one reads GAVE_UP (a run that ends FAILED times out here)
    row = wait_run(cli_env, run_id, ("GAVE_UP", "SUCCEEDED"))
    rec = record(cli_env, run_id)
    assert row["status"] == "GAVE_UP", json.dumps(rec, indent=1)[-3000:]
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "FAILED", "FAILED"]
    assert [a["diagnosis"]["step"] for a in rec["attempts"]] == [2, 4, 6]
    assert [a["start_step"] for a in attempts_seen(ckpt)] == [0, 2, 4]
    jobs = cluster.jobs()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not jobs.status(f"{run_id}-supervisor-1").is_terminal():
        time.sleep(0.5)
    assert jobs.status(f"{run_id}-supervisor-1").value == "SUCCEEDED"  # it ended by itself, having given up


def test_a_stopped_run_is_not_auto_resumed(cluster, cli_env, ckpt):
    out = submit(cli_env, *standin(ckpt, steps=60), extra=("--auto-resume", "3", "--backoff", "0", "--poll", "1"))
    run_id = out["run_id"]
    wait_run(cli_env, run_id, ("RUNNING",))
    run_cli("stop", run_id, env=cli_env, timeout=120)
    time.sleep(4)
    rec = record(cli_env, run_id)
    assert rec["status"] == "STOPPED" and len(rec["attempts"]) == 1


def test_the_wandb_key_never_shows(cluster, cli_env, ckpt):
    env = {**cli_env, "WANDB_API_KEY": KEY}
    done = run_cli("submit", "llama70b-4node", *standin(ckpt, steps=2), env=env, timeout=240)  # has a W&B project
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = next(l.split()[-1] for l in done.stdout.splitlines() if l.startswith("submitted run"))
    wait_run(env, run_id, ("SUCCEEDED",))
    seen = attempts_seen(ckpt)[0]
    assert seen["wandb_key_in_env"] is True and seen["wandb_flag"] == "env:WANDB_API_KEY"
    outputs = [done.stdout, done.stderr]
    for args in (("logs", run_id), ("runs", "--json"), ("runs",), ("status", "--json")):
        got = run_cli(*args, env=env, timeout=120)
        outputs += [got.stdout, got.stderr]
    assert all(KEY not in text for text in outputs)
    state = Path(cli_env["RLHF_LAUNCH_HOME"])
    assert all(KEY not in p.read_text(errors="replace") for p in state.rglob("*") if p.is_file())
    info = cluster.jobs().info(f"{run_id}-1")
    assert KEY not in info.entrypoint and KEY not in json.dumps(info.metadata)
    assert info.runtime_env["env_vars"]["WANDB_API_KEY"] == KEY  # the one place it travels
