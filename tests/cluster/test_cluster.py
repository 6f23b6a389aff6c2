"""Cluster lifecycle and live preflight on a real local Ray cluster (loopback only)."""

from __future__ import annotations

import json
import time

import pytest
from support.ray_cluster import free_port

from conftest import PUBLISHED_40, run_cli

pytestmark = pytest.mark.cluster


def test_status_shows_four_nodes_and_32_gpus(cluster, cli_env):
    done = run_cli("status", "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["alive_nodes"] == 4
    assert data["gpus"] == 32 and data["gpus_free"] == 32
    assert sorted(n["ip"] for n in data["nodes"]) == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    assert sum(n["is_head"] for n in data["nodes"]) == 1
    assert data["ray_version"] == data["local_ray_version"]
    text = run_cli("status", env=cli_env)
    assert "4 alive nodes, 32/32 GPUs free" in text.stdout


def test_head_printed_the_join_line_and_a_private_token(cluster):
    info = cluster.head_info()
    assert info["auth"] is True and info["dashboard_host"] == "127.0.0.1"
    assert info["join_command"].startswith(f"rlhf-launch join 127.0.0.2 --port {cluster.gcs_port} --token-file ")
    assert "--ib-hca mlx5_0" in info["join_command"]
    assert cluster.token_file.stat().st_mode & 0o777 == 0o600
    assert len(cluster.token()) == 64


def test_job_api_requires_the_token(cluster):
    assert cluster.api("/api/jobs/", token=None)[0] == 401
    assert cluster.api("/api/jobs/", token="0" * 64)[0] == 403
    assert cluster.api("/api/jobs/")[0] == 200


def test_launcher_without_or_with_a_wrong_token_fails_clearly(cluster, tmp_path):
    started = time.monotonic()
    missing = run_cli("status", "--address", cluster.address, env={"RAY_AUTH_TOKEN_PATH": str(tmp_path / "none")})
    assert missing.returncode == 4 and "requires a Ray auth token" in missing.stderr  # 4: the cluster refused us
    bad = tmp_path / "bad"
    bad.write_text("f" * 64)
    wrong = run_cli("status", "--address", cluster.address, "--token-file", str(bad))
    assert wrong.returncode == 4 and "rejected the Ray auth token" in wrong.stderr
    assert "Traceback" not in missing.stderr + wrong.stderr
    assert time.monotonic() - started < 20


def test_dashboard_is_not_open_to_the_network(cluster):
    import socket

    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.2", cluster.dashboard_port)) != 0  # bound to 127.0.0.1 only


def test_unreachable_cluster_fails_fast():
    started = time.monotonic()
    done = run_cli("status", "--address", f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 4  # a cluster error (errors.ClusterError), not the user's
    assert "cannot reach the Ray dashboard" in done.stderr
    assert time.monotonic() - started < 10


def test_four_node_preset_passes_preflight(cluster, cli_env):
    done = run_cli("plan", "llama70b-4node", "--cluster", "--json", env=cli_env)
    assert done.returncode == 0, done.stdout + done.stderr
    live = json.loads(done.stdout)["live"]
    assert [f for f in live["findings"] if f["level"] == "error"] == []
    assert live["cluster"]["gpus"] == 32


def test_eight_node_preset_is_refused_before_submission(cluster, cli_env):
    before = run_cli("status", "--json", env=cli_env)
    done = run_cli("submit", "llama70b-8node", "--json", env=cli_env)
    assert done.returncode == 2
    errors = [f for f in json.loads(done.stdout)["live"]["findings"] if f["level"] == "error"]
    assert any("needs 64 GPUs" in f["message"] and "has 32" in f["message"] for f in errors), errors
    after = run_cli("status", "--json", env=cli_env)
    assert json.loads(after.stdout)["running_jobs"] == json.loads(before.stdout)["running_jobs"] == []


def test_published_layout_is_refused_naming_role_and_numbers(cluster, cli_env, write_config):
    path = write_config(PUBLISHED_40)
    done = run_cli("submit", str(path), env=cli_env)
    assert done.returncode == 2
    assert "needs 40 GPUs (actor 8 + critic 8 + ref 8 + reward 8 + vLLM 2x4) but the cluster has 32" in done.stdout
    # declared as 5 nodes, the static plan passes but the live cluster names the role that does not fit
    five = run_cli("submit", str(path), "cluster.nodes=5", "--json", env=cli_env)
    assert five.returncode == 2
    live_errors = [f for f in json.loads(five.stdout)["live"]["findings"] if f["level"] == "error"]
    assert any("needs 40 GPUs" in f["message"] for f in live_errors)


def test_busy_gpus_make_a_role_not_fit(cluster, cli_env):
    """Hold 20 GPUs with a job; the 4-node layout then fails at the role Ray could not place."""
    jobs = cluster.jobs()
    hold = (
        'python3 -c "import ray, time; ray.init(); '
        "pg = ray.util.placement_group([{'GPU': 1, 'CPU': 1}] * 20, strategy='PACK'); ray.get(pg.ready()); "
        "print('held', flush=True); time.sleep(300)\""
    )
    job = jobs.submit(hold, {}, f"hold-{int(time.time())}", {})
    try:
        deadline = time.monotonic() + 90
        while "held" not in jobs.logs(job) and time.monotonic() < deadline:
            time.sleep(0.5)
        cluster.wait_used(20)  # the usage report lags the reservation by a moment
        done = run_cli("plan", "llama70b-4node", "--cluster", "--json", env=cli_env)
        assert done.returncode == 2
        errors = [f for f in json.loads(done.stdout)["live"]["findings"] if f["level"] == "error"]
        assert errors and errors[0]["key"].startswith("placement.")
        assert "bundles of 1 GPU + 1 CPU" in errors[0]["message"] and "free now" in errors[0]["message"]
    finally:
        jobs.stop(job)
        cluster.wait_free(32)


def test_reserve_check_proves_placement_and_frees_everything(cluster, cli_env):
    done = run_cli("plan", "llama70b-4node", "--reserve-check", "--json", env=cli_env, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    reserve = json.loads(done.stdout)["live"]["reserve_check"]
    assert reserve["ok"] is True
    assert [g["bundles"] for g in reserve["groups"]] == [8, 8, 4, 8, 4]
    assert all(g["ready"] for g in reserve["groups"])
    assert reserve["leftover_placement_groups"] == 0
    assert [pg for pg in cluster.placement_groups() if pg["state"] != "REMOVED"] == []


def test_reserve_check_fails_within_its_timeout_and_frees_everything(cluster, cli_env):
    started = time.monotonic()
    done = run_cli("plan", "llama70b-8node", "--reserve-check", "--reserve-timeout", "8", "--json", env=cli_env, timeout=180)
    elapsed = time.monotonic() - started
    assert done.returncode == 2
    reserve = json.loads(done.stdout)["live"]["reserve_check"]
    assert reserve["ok"] is False
    stuck = [g for g in reserve["groups"] if not g["ready"]]
    assert len(stuck) == 1 and stuck[0]["seconds"] < 8 + 3
    assert reserve["leftover_placement_groups"] == 0
    assert [pg for pg in cluster.placement_groups() if pg["state"] != "REMOVED"] == []
    assert elapsed < 8 + 60


def test_ray_processes_carry_the_infiniband_settings(cluster):
    jobs = cluster.jobs()
    code = (
        "import os, json, ray; ray.init(); "
        "f = ray.remote(num_cpus=0.01)(lambda: {k: os.environ.get(k) for k in ('NCCL_IB_HCA', 'NCCL_SOCKET_IFNAME', 'NCCL_IB_DISABLE')}); "
        "nodes = [n['NodeID'] for n in ray.nodes() if n['Alive']]; "
        "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as A; "
        "print('ENV', json.dumps(ray.get([f.options(scheduling_strategy=A(n, soft=False)).remote() for n in nodes])))"
    )
    job = jobs.submit(f"python3 -c {json.dumps(code)}", {}, f"env-{int(time.time())}", {})
    deadline = time.monotonic() + 120
    while jobs.status(job) not in ("SUCCEEDED", "FAILED", "STOPPED") and time.monotonic() < deadline:
        time.sleep(0.5)
    line = next(l for l in jobs.logs(job).splitlines() if l.startswith("ENV "))
    envs = json.loads(line[4:])
    assert len(envs) == 4
    assert all(e == {"NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "0"} for e in envs)


def test_join_with_a_wrong_token_fails_within_seconds(cluster, tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("e" * 64)
    started = time.monotonic()
    done = run_cli(
        "join", "127.0.0.2", "--port", str(cluster.gcs_port), "--token-file", str(bad), "--node-ip-address", "127.0.0.9", "--num-gpus", "1"
    )
    assert done.returncode == 4
    assert "rejected this node's auth token" in done.stderr
    assert time.monotonic() - started < 15
    assert len(cluster.alive_nodes()) == 4


def test_join_an_unreachable_head_fails_within_seconds(tmp_path):
    token = tmp_path / "t"
    token.write_text("a" * 64)
    started = time.monotonic()
    done = run_cli("join", "127.0.0.2", "--port", str(free_port()), "--token-file", str(token))
    assert done.returncode == 4 and "cannot reach the Ray head" in done.stderr
    assert time.monotonic() - started < 10
