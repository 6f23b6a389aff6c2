"""A worker node dies: `status` lists it dead with its address, node id and time, from Ray's
node table; and the Ray nodes this machine runs are what `down` would stop."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    try:
        from support.ray_cluster import LocalCluster
    except ImportError:
        from support.ray_cluster import LocalCluster

    local = LocalCluster(tmp_path_factory.mktemp("death"), workers=1)
    try:
        local.start()
        yield local
    finally:
        local.stop()


def test_a_killed_worker_is_listed_dead_by_status(two_nodes, monkeypatch, capsys):
    from rlhf_launch.cli.app import main
    from rlhf_launch.cluster import node

    gcs = f"{two_nodes.head_ip}:{two_nodes.gcs_port}"
    here = [n for n in node.local_nodes() or [] if n.gcs == gcs]
    assert sorted(n.ip for n in here) == ["127.0.0.2", "127.0.0.3"]  # what `down` would stop on this machine

    worker = next(n for n in two_nodes.alive_nodes() if n["node_ip"] == "127.0.0.3")
    killed_at = time.time()
    os.kill(two_nodes.raylet_pid(0), signal.SIGKILL)
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", two_nodes.address)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(two_nodes.token_file))
    deadline = time.monotonic() + 120
    data: dict = {}
    while time.monotonic() < deadline:
        assert main(["status", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        if data["dead_nodes"]:
            break
        time.sleep(2)
    assert data["alive_nodes"] == 1
    [dead] = data["dead_nodes"]
    assert dead["ip"] == "127.0.0.3" and dead["node_id"] == worker["node_id"] and dead["gpus"] == 8
    assert dead["died_at"] is None or dead["died_at"] >= killed_at - 5
    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert f"node 127.0.0.3 (id {worker['node_id'][:8]}, 8 GPUs) died" in text
