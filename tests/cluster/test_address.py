"""`--address` given something other than the Ray dashboard: the GCS port `up` prints, a Redis,
a service that hangs up. A user error naming what answers and the dashboard URL, never a crash
or raw bytes."""

from __future__ import annotations

import socket
import tempfile
import threading
from pathlib import Path

import pytest

from rlhf_launch.cluster import gcs
from rlhf_launch.cluster.dashboard import Dashboard, NotADashboard
from rlhf_launch.errors import ClusterUnreachable

from conftest import run_cli

# The start of what Ray 2.60's GCS (a gRPC server) sends on a new connection before reading
# anything: an HTTP/2 SETTINGS frame (type 0x04), as captured from a local head.
GRPC_PREFACE = b"\x00\x00\x18\x04\x00\x00\x00\x00\x00\x00\x04\x00@\x00\x00\x00\x05\x00@\x00\x00\x00\x06\x00\x00@\x00\xfe\x03"


class _Server:
    """One loopback port; each connection gets `reply(first bytes received)`, then is closed."""

    def __init__(self, greet: bytes = b"", reply=lambda data: b""):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.greet, self.reply = greet, reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    if self.greet:
                        conn.sendall(self.greet)
                    conn.settimeout(3)
                    data = conn.recv(4096)
                    conn.sendall(self.reply(data))
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server():
    made: list[_Server] = []

    def make(**kw) -> _Server:
        made.append(_Server(**kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_an_http2_server_is_named_the_gcs_with_the_default_dashboard(server, monkeypatch):
    fake = server(greet=GRPC_PREFACE)
    assert gcs.protocol("127.0.0.1", fake.port) == "grpc"
    monkeypatch.setattr(gcs, "dashboard_of", lambda host, port, token, timeout=10.0: None)  # no GCS to ask here
    with pytest.raises(NotADashboard) as caught:
        Dashboard(f"127.0.0.1:{fake.port}", None).version()
    assert "GCS port" in caught.value.message and "http://127.0.0.1:8265" in caught.value.message
    assert "--dashboard-port" in (caught.value.hint or "")
    assert "\\x00" not in str(caught.value) and "\x00" not in str(caught.value)


def test_a_redis_is_named(server):
    fake = server(reply=lambda data: b"-NOAUTH Authentication required.\r\n" if data.startswith(b"PING") else b"")
    assert gcs.protocol("127.0.0.1", fake.port) == "redis"
    message, hint = gcs.not_the_dashboard(f"http://127.0.0.1:{fake.port}", "127.0.0.1", fake.port, None) or ("", "")
    assert "Redis" in message and "http://127.0.0.1:8265" in hint


def test_a_server_that_hangs_up_or_answers_garbage_is_no_crash(server):
    garbage = server(reply=lambda data: b"SSH-2.0-OpenSSH_9.6\r\n")
    with pytest.raises(NotADashboard, match="not in HTTP"):
        Dashboard(f"127.0.0.1:{garbage.port}", None).version()
    silent = server()
    with pytest.raises(ClusterUnreachable, match="closed the connection"):  # a restarting dashboard: state unknown
        Dashboard(f"127.0.0.1:{silent.port}", None).version()


@pytest.mark.cluster
def test_status_at_the_gcs_port_of_a_real_head_names_the_dashboard():
    """One head of our own (own ports and temp dir), torn down by its processes."""
    from support.ray_cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="gcs-") as workdir:
        head = LocalCluster(Path(workdir), workers=0, gpus=1, cpus=1)
        try:
            head.start()
            env = {"RAY_AUTH_TOKEN_PATH": str(head.token_file), "RLHF_LAUNCH_HOME": str(Path(workdir) / "state")}
            gcs_address = f"{head.head_ip}:{head.gcs_port}"  # what `up` prints as "Ray head started"
            assert f"{head.head_ip}:{head.gcs_port}" == f"{head.head_info()['head_ip']}:{head.head_info()['port']}"
            for given in (gcs_address, f"http://{gcs_address}"):
                done = run_cli("status", "--address", given, env=env)
                assert done.returncode == 2, (done.returncode, done.stderr)
                assert "GCS port" in done.stderr and head.address in done.stderr, done.stderr  # read from the GCS itself
                assert "hit a bug" not in done.stderr and "\x00" not in done.stderr
            assert run_cli("status", "--address", head.address, env=env).returncode == 0
        finally:
            head.stop()
