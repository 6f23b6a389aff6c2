"""A second `rlhf-launch up --head` where a Ray head already runs at that address (a real
one): it names what runs there, how to stop that node alone, and other ports; never `down`,
which stops every Ray on the machine."""

from __future__ import annotations

import re
import socket

import pytest
from support.ports import free_port
from support.ray_cluster import LocalCluster

from conftest import run_cli

pytestmark = pytest.mark.cluster


def test_a_second_head_on_the_same_address(tmp_path):
    head = LocalCluster(tmp_path, workers=0, gpus=1, cpus=1)
    try:
        head.start()
        done = run_cli(
            "up",
            "--head",
            "--node-ip-address",
            head.head_ip,
            "--port",
            str(head.gcs_port),
            "--dashboard-port",
            str(free_port()),
            "--token-file",
            str(head.token_file),
            "--",
            "--temp-dir",
            str(head.temp_dir),
            env=head.env,
            timeout=120,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        err = done.stderr
        assert f"Ray already runs at {head.head_ip}:{head.gcs_port} on this machine" in err, err
        assert f"rlhf-launch status --address http://127.0.0.1:{head.dashboard_port}" in err  # what runs there
        assert "kill -TERM " in err and "raylet" in err and "gcs_server" in err  # that node alone
        suggested = re.search(r"on other ports: rlhf-launch up --head --port (\d+) --dashboard-port (\d+)", err)
        assert suggested, err  # or other ports, that nothing listens on now (Ray's servers sit beside its GCS port)
        for port in map(int, suggested.groups()):
            with socket.socket() as probe:
                probe.bind(("0.0.0.0", port))
        assert "stops every Ray on this machine" in err and "hint: rlhf-launch down" not in err
        assert "Traceback" not in err
        assert head.head_info() is not None  # the running head is untouched
    finally:
        head.stop()
