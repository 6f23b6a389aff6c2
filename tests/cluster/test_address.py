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


class _Http:
    """A loopback HTTP server answering GET `path` -> (status, body); 404 for anything else."""

    def __init__(self, routes: dict[str, tuple[int, str]]):
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                status, body = routes.get(self.path, (404, "404: Not Found"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if body.startswith("{") else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return sock.getsockname()[1]


# What Ray 2.60's dashboard agent (ray/dashboard/modules/reporter/healthz_agent.py) answers on its
# HTTP port: "success" at /api/local_raylet_healthz, aiohttp's "404: Not Found" at /api/version.
AGENT = {"/api/local_raylet_healthz": (200, "success")}


def test_a_ray_agent_port_is_named_an_agent_with_the_dashboard_next_to_it(monkeypatch):
    agent, dashboard = _Http(AGENT), _Http({"/api/version": (200, '{"version": "4", "ray_version": "2.60.0"}')})
    try:
        monkeypatch.setattr(gcs, "DASHBOARD_PORT", dashboard.port)  # the default port, where a dashboard answers here
        with pytest.raises(NotADashboard) as caught:
            Dashboard(f"127.0.0.1:{agent.port}", None).version()
    finally:
        agent.close()
        dashboard.close()
    message = caught.value.message
    assert "agent" in message and "not the Ray dashboard" in message, message
    assert f"http://127.0.0.1:{dashboard.port}" in message and f"--address http://127.0.0.1:{dashboard.port}" in caught.value.hint
    assert "not found on the Ray dashboard" not in message


def test_a_ray_agent_port_with_no_dashboard_found_names_the_default_port(monkeypatch):
    agent = _Http(AGENT)
    try:
        monkeypatch.setattr(gcs, "DASHBOARD_PORT", _closed_port())
        monkeypatch.setattr(gcs, "GCS_PORT", _closed_port())
        with pytest.raises(NotADashboard) as caught:
            Dashboard(f"127.0.0.1:{agent.port}", None).version()
    finally:
        agent.close()
    assert "agent" in caught.value.message and "not the Ray dashboard" in caught.value.message
    assert f"port {gcs.DASHBOARD_PORT} of the head node by default" in caught.value.message


def test_another_web_server_is_not_a_dashboard():
    other = _Http({})
    try:
        with pytest.raises(NotADashboard, match="not a Ray dashboard"):
            Dashboard(f"127.0.0.1:{other.port}", None).version()
    finally:
        other.close()


@pytest.mark.cluster
def test_status_at_a_real_nodes_agent_port_says_it_is_no_dashboard():
    """A real head's dashboard agent (its HTTP port answers, /api/version is 404 there)."""
    from support.ray_cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="agent-") as workdir:
        head = LocalCluster(Path(workdir), workers=0, gpus=1, cpus=1)
        try:
            head.start()
            env = {"RAY_AUTH_TOKEN_PATH": str(head.token_file), "RLHF_LAUNCH_HOME": str(Path(workdir) / "state")}
            done = run_cli("status", "--address", f"http://{head.head_ip}:{head.agent_ports[0]}", env=env)
            said = " ".join(done.stderr.split())
            assert done.returncode == 2, (done.returncode, done.stderr)
            assert "agent" in said and "not the Ray dashboard" in said, said
            assert "not found on the Ray dashboard" not in said and "hit a bug" not in said
        finally:
            head.stop()
