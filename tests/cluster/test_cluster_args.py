"""`up`/`join`/`down` argument handling and safety refusals (no cluster needed)."""

from __future__ import annotations

import json
import sys

import pytest

from rlhf_launch.cluster import node as cluster

from conftest import run_cli


def test_dashboard_on_the_network_without_auth_is_refused():
    done = run_cli("up", "--head", "--no-auth", "--dashboard-host", "0.0.0.0")
    assert done.returncode == 2
    assert "anyone who can reach" in done.stderr and "Traceback" not in done.stderr
    said = " ".join(done.stderr.split())  # the message as one line, whatever the console wrapped
    assert "reach port that address" not in said
    assert "0.0.0.0 (every interface of this machine) with no token" in said, said
    assert "anyone who can reach its port there can submit jobs" in said, said


def test_zero_node_ip_is_refused():
    done = run_cli("up", "--head", "--node-ip-address", "0.0.0.0")
    assert done.returncode == 2 and "not an address other nodes can reach" in done.stderr


def test_up_needs_head():
    done = run_cli("up")
    assert done.returncode == 2 and "--head" in done.stderr


def test_ray_start_arguments():
    head = cluster.head_args(cluster.HeadOptions(num_gpus=8, node_ip_address="10.0.0.1", block=True, extra=("--temp-dir", "/x")))
    assert head[:2] == ["start", "--head"]
    assert head[head.index("--dashboard-host") + 1] == "127.0.0.1"
    assert head[head.index("--port") + 1] == "6379" and head[head.index("--dashboard-port") + 1] == "8265"
    assert "--block" in head and head[-2:] == ["--temp-dir", "/x"]
    worker = cluster.worker_args(cluster.WorkerOptions(head_ip="10.0.0.1", port=7000, num_gpus=4))
    assert worker[:3] == ["start", "--address", "10.0.0.1:7000"]
    assert cluster.nccl_env("mlx5_0,mlx5_1", "ib0") == {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_IB_DISABLE": "0", "NCCL_SOCKET_IFNAME": "ib0"}


def test_token_is_created_private_and_reused(tmp_path):
    from rlhf_launch.cluster import auth

    path = tmp_path / "dir" / "token"
    first, created = auth.ensure_token(path)
    assert created and path.stat().st_mode & 0o777 == 0o600 and len(first.value) == 64
    second, created_again = auth.ensure_token(path)
    assert not created_again and second.value == first.value
    env = auth.ray_env(first)
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}
    assert auth.find_token({"RAY_AUTH_TOKEN": "abc"}).value == "abc"
    assert auth.find_token({"RAY_AUTH_TOKEN_PATH": str(path)}).value == first.value


def test_down_runs_ray_stop(tmp_path):
    fake = tmp_path / "ray"
    record = tmp_path / "args.json"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\nprint('Stopped all 5 Ray processes.')\n"
    )
    fake.chmod(0o755)
    done = run_cli("down", "--force", env={"RLHF_LAUNCH_RAY": str(fake)})
    assert done.returncode == 0, done.stderr
    assert json.loads(record.read_text()) == ["stop", "--force"]


def test_a_blocking_node_is_stopped_without_rays_30_second_drain(monkeypatch):
    """Ctrl-C or SIGTERM to `up`/`join --block` stops the node now (as the Slurm script does); a
    drain time the user exported is kept."""
    import subprocess

    from rlhf_launch.cluster import node

    seen: list[dict[str, str]] = []

    class Refused(Exception):
        pass

    def popen(args, env, **kwargs):
        seen.append(env)
        raise Refused

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.delenv("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", raising=False)
    with pytest.raises(Refused):
        node.start_blocking(["start", "--block"], {})
    monkeypatch.setenv("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "12")
    with pytest.raises(Refused):
        node.start_blocking(["start", "--block"], {})
    assert [e["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] for e in seen] == ["0", "12"]


def test_rays_start_failures_say_what_happened_without_a_traceback_or_down():
    timed_out = cluster.Started(
        1,
        'Traceback (most recent call last):\n  File "/x/ray/_private/node.py", line 440, in __init__\n    raise Exception(\n'
        "Exception: The current node timed out during startup. This could happen because some of the raylet failed.\n",
    )
    err = cluster.failure("ray start --address", timed_out)
    assert err.message == "ray start --address failed: the node did not register with the head's GCS in time"
    assert "File " not in (err.hint or "") and "one at a time" in (err.hint or "")
    again = cluster.failure("ray start --address", cluster.Started(1, "Ray is already running at 127.0.0.3:6380\n"))
    assert "Ray already runs on this node" in again.message and "stops every Ray on this machine" in (again.hint or "")
    assert not (again.hint or "").startswith("rlhf-launch down")
