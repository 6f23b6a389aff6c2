"""Bring-up verbs' words: `up --head` where Ray already runs, `up/join --quiet`, and the two
launcher answers the sbatch script relies on (`runs RUN --print-status`, `stop --cluster-ended`)."""

from __future__ import annotations

import time

from rlhf_launch.cluster import bringup, node
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

from conftest import run_cli

# `ray start --head` where a GCS already runs at the address (ray/scripts/scripts.py, Ray 2.60)
ALREADY = (
    "ConnectionError: Ray is trying to start at 127.0.0.2:6379, but is already running at 127.0.0.2:6379. "
    "Please specify a different port using the `--port` flag of `ray start` command.\n"
)


def test_a_second_head_names_what_runs_and_how_to_stop_it_alone(monkeypatch):
    monkeypatch.setattr(node, "ray_processes", lambda gcs: {4242: "gcs_server", 4343: "raylet", 4444: "dashboard http://127.0.0.1:8265"})
    monkeypatch.setattr(
        node, "local_nodes", lambda: [node.LocalNode("127.0.0.2", "127.0.0.2:6379"), node.LocalNode("127.0.0.9", "127.0.0.9:7000")]
    )
    err = bringup._head_failure(node.HeadOptions(port=6379, dashboard_port=8265), node.Started(1, ALREADY))
    assert "already runs at 127.0.0.2:6379" in err.message
    hint = err.hint or ""
    assert "kill -TERM 4242 4343 4444 (gcs_server 4242, raylet 4343, dashboard 4444)" in hint  # this node alone, each pid named
    assert "--port 6380 --dashboard-port 8266" in hint  # or other ports
    assert "rlhf-launch status --address http://127.0.0.1:8265" in hint
    assert "stops every Ray on this machine" in hint and "127.0.0.9" in hint  # down is not the fix
    assert not hint.startswith("rlhf-launch down")


def test_a_temp_dir_another_cluster_uses_is_one_message_not_rays_traceback():
    """Ray asserts on a temp dir whose session is another cluster's (no --node-ip-address given)."""
    output = (
        "Traceback (most recent call last):\n  ...\nAssertionError: Session name session_2026 does not match persisted value session_2025\n"
    )
    err = bringup._head_failure(node.HeadOptions(port=6379, dashboard_port=8265), node.Started(1, output))
    assert "already uses its temp dir" in err.message and "Traceback" not in err.message + (err.hint or "")
    assert "--port 6380 --dashboard-port 8266 -- --temp-dir DIR" in (err.hint or "")


def test_the_heads_processes_leave_out_workers_joined_from_this_machine(tmp_path):
    def proc(pid: int, *argv: str) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes("\0".join(argv).encode() + b"\0")

    proc(10, "/x/gcs_server", "--gcs_server_port=6379", "--node-ip-address=127.0.0.2")
    proc(11, "/x/raylet", "--node_ip_address=127.0.0.2", "--gcs-address=127.0.0.2:6379")
    proc(12, "/x/raylet", "--node_ip_address=127.0.0.3", "--gcs-address=127.0.0.2:6379")  # a worker on this machine
    assert node.ray_processes("127.0.0.2:6379", proc=tmp_path) == {10: "gcs_server", 11: "raylet"}


def test_quiet_keeps_rays_notes_back_but_not_its_errors():
    note = "2026-12-05 04:31:18,228\tINFO scripts.py:1092 -- To add another node to this Ray cluster, run\n"
    error = "2026-12-05 04:31:18,228\tERR scripts.py:1300 -- Some Ray subprocesses exited unexpectedly:\n"
    assert node._RAY_NOTE.match(note) and not node._RAY_NOTE.match(error)


def _record(run_id: str) -> Run:
    now = time.time()
    attempt = Attempt(1, f"{run_id}-1", "submit", False, now - 60, AttemptStatus.RUNNING)
    return Run(run_id, "x", now - 60, "http://127.0.0.1:9", "0.11.2", {}, "h", "x.yaml", [], [], {"env_vars": {}}, "/ckpt",
               [attempt], RunStatus.RUNNING)  # fmt: skip


def test_cluster_ended_records_every_attempt_ended(home):
    runs.save(_record("x-20260101-000000-aaaaaa"))
    done = run_cli("stop", "x-20260101-000000-aaaaaa", "--cluster-ended", "slurm job 7 ended")
    assert done.returncode == 0, done.stderr
    saved = runs.load("x-20260101-000000-aaaaaa")
    assert saved.status is RunStatus.STOPPED
    assert [a.status for a in saved.attempts] == [AttemptStatus.STOPPED] and saved.attempts[0].ended
    assert "slurm job 7 ended" in saved.attempts[0].message
    assert "recorded STOPPED" in done.stdout


def test_runs_print_status_answers_for_one_run(home):
    run = _record("x-20260101-000000-bbbbbb")
    run.status = RunStatus.SUCCEEDED
    run.attempts[0].status = AttemptStatus.SUCCEEDED
    runs.save(run)
    done = run_cli("runs", "x-20260101-000000-bbbbbb", "--print-status", "--address", "http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SUCCEEDED"
    assert run_cli("runs", "nope", "--print-status", "--address", "http://127.0.0.1:9").returncode == 2
