"""The supervisor understands the run: it diagnoses failures, retries only what a retry fixes,
notices stalls, and reports progress. Real local Ray cluster, stand-in trainer."""

from __future__ import annotations

import json
import time

import pytest
from support.jobs import attempts_seen, record, standin, submit, wait_run

from conftest import run_cli

pytestmark = pytest.mark.cluster

SUPERVISED = ("--auto-resume", "2", "--backoff", "0", "--poll", "1")


@pytest.fixture
def ckpt(tmp_path, cluster):
    cluster.wait_free(32)
    return tmp_path / "ckpt"


def env_var(name: str, value: str) -> str:
    return f"runtime_env.env_vars.{name}='{value}'"


def test_a_failure_a_retry_cannot_fix_ends_the_run_with_its_diagnosis(cluster, cli_env, ckpt):
    out = submit(
        cli_env, *standin(ckpt, steps=8, crash_at=3, crash_times=99), env_var("STANDIN_CRASH_CLASS", "model_or_data"), extra=SUPERVISED
    )
    run_id = out["run_id"]
    row = wait_run(cli_env, run_id, ("FAILED", "GAVE_UP", "SUCCEEDED"))
    assert row["status"] == "FAILED"
    assert row["diagnosis"]["class"] == "model_or_data" and row["diagnosis"]["retriable"] is False
    assert len(attempts_seen(ckpt)) == 1  # no model load wasted on a retry
    text = run_cli("runs", env=cli_env, timeout=60).stdout
    assert "FAILED [model_or_data]" in text
    diagnosed = json.loads(run_cli("diagnose", run_id, "--json", env=cli_env, timeout=60).stdout)
    assert diagnosed["class"] == "model_or_data" and diagnosed["attempt"] == 1 and diagnosed["evidence"]
    logs = run_cli("logs", run_id, env=cli_env, timeout=60)
    assert "diagnosis: model_or_data (not retriable)" in logs.stderr


def test_a_transient_failure_is_retried_and_a_repeat_at_the_same_step_is_not(cluster, cli_env, ckpt):
    out = submit(
        cli_env, *standin(ckpt, steps=8, crash_at=5, crash_times=99), env_var("STANDIN_CRASH_CLASS", "node_lost"), extra=SUPERVISED
    )
    run_id = out["run_id"]
    row = wait_run(cli_env, run_id, ("FAILED", "GAVE_UP", "SUCCEEDED"))
    rec = record(cli_env, run_id)
    assert [a["diagnosis"]["class"] for a in rec["attempts"]] == ["node_lost", "node_lost"]
    assert [a["diagnosis"]["step"] for a in rec["attempts"]] == [4, 4]
    assert row["status"] == "FAILED"  # the second node_lost at step 4: it will repeat
    assert [a["reason"] for a in rec["attempts"]] == ["submit", "auto-resume"]


def test_a_stall_is_detected_within_its_deadline_and_resumed(cluster, cli_env, ckpt):
    deadline = 6
    out = submit(
        cli_env,
        *standin(ckpt, steps=8),
        env_var("STANDIN_HANG", "after_placement"),
        f"supervise.deadlines.models_loaded={deadline}",
        extra=("--auto-resume", "1", "--backoff", "0", "--poll", "1"),
    )
    run_id = out["run_id"]
    row = wait_run(cli_env, run_id, ("FAILED", "GAVE_UP", "SUCCEEDED"), timeout=240)
    rec = record(cli_env, run_id)
    stalls = [a["diagnosis"]["stall"] for a in rec["attempts"]]
    assert len(stalls) == 2 and all(s["milestone"] == "models_loaded" for s in stalls)
    for stall in stalls:  # noticed within the deadline plus one poll (and the log's own lag)
        assert deadline < stall["waited"] <= deadline + 1 + 2
    assert row["status"] == "FAILED" and "stall" in json.dumps(row["diagnosis"])
    assert [a["reason"] for a in rec["attempts"]] == ["submit", "auto-resume"]


def test_progress_step_rate_eta_reward_and_kl(cluster, cli_env, ckpt):
    out = submit(cli_env, *standin(ckpt, steps=12, step_seconds=1.0), extra=SUPERVISED)
    run_id = out["run_id"]
    deadline = time.monotonic() + 120
    row: dict = {}
    while time.monotonic() < deadline:
        rows = json.loads(run_cli("runs", "--json", env=cli_env, timeout=60).stdout)
        row = next(r for r in rows if r.get("run_id") == run_id)
        if (row.get("step") or 0) >= 6 and row.get("steps_per_hour"):  # a rate needs two looks at the log
            break
        time.sleep(1)
    assert row["step"] >= 6 and row["total_steps"] == 12
    assert 1000 < row["steps_per_hour"] < 7200  # about one step a second, by the trainer's own timings
    assert row["eta_seconds"] is not None and row["eta_seconds"] < 60
    assert row["reward"] == pytest.approx(0.1 * row["step"], abs=0.11)
    assert row["kl"] == pytest.approx(0.001 * row["step"], abs=0.0011)
    text = run_cli("runs", env=cli_env, timeout=60).stdout
    assert "/12" in text and "ETA" in text and "steps/h" in text and "e+" not in text
    # the trainer's timing/* (the stand-in splits its 1 s step 40/20/35/5) beside the plan's estimate
    timing = row["timing"]
    assert timing["step_s"][0] == pytest.approx(1.0, rel=0.3) and timing["step_s"][1] > 0
    assert timing["phases_s"]["generate"][0] == pytest.approx(0.4 * timing["step_s"][0], rel=0.01)
    assert f"{run_id}: step " in text and " s measured vs " in text
    wait_run(cli_env, run_id, ("SUCCEEDED",))
    deadline = time.monotonic() + 30  # the supervisor reads the end of the log once the job ended
    while time.monotonic() < deadline and (record(cli_env, run_id).get("progress") or {}).get("step") != 12:
        time.sleep(0.5)
    assert record(cli_env, run_id)["progress"]["step"] == 12  # the last step, not the last poll's
    final = run_cli("watch", run_id, env=cli_env, timeout=60)
    last = final.stdout.strip().splitlines()[-1]
    assert final.returncode == 0 and "SUCCEEDED (attempt 1; step 12/12" in last and "ETA" not in last, final.stdout


def test_every_attempt_logs_into_one_wandb_run(cluster, cli_env, ckpt):
    env = {**cli_env, "WANDB_API_KEY": "f" * 40}
    out = submit(
        env, *standin(ckpt, steps=6, crash_at=3), env_var("STANDIN_CRASH_CLASS", "node_lost"), extra=SUPERVISED, preset="llama70b-4node"
    )
    run_id = out["run_id"]
    wait_run(env, run_id, ("SUCCEEDED", "FAILED", "GAVE_UP"))
    jobs = cluster.jobs()
    envs = [jobs.info(f"{run_id}-{n}").runtime_env["env_vars"] for n in (1, 2)]
    assert envs[0]["WANDB_RUN_ID"] == envs[1]["WANDB_RUN_ID"] and envs[0]["WANDB_RESUME"] == "allow"
