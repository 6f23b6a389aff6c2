"""What answers at an address that should be the Ray dashboard but does not speak HTTP/1.1.

The usual mistake is the head's GCS address (`HOST:6379`, which `rlhf-launch up` prints as
"Ray head started" and `join` takes): the GCS is a gRPC server, which opens with an HTTP/2
SETTINGS frame, where the dashboard answers HTTP/1.1. A Redis (an external GCS store) answers
`PING` in its own protocol. Where the GCS answers, the dashboard URL is read from it (the
dashboard registers it in the GCS's key-value store, which `ray job` reads the same way).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from rlhf_launch.cluster.auth import Token, ray_env

GCS_PORT = 6379  # Ray's default GCS port, and `rlhf-launch up --port`'s
DASHBOARD_PORT = 8265  # Ray's default dashboard port, and `rlhf-launch up --dashboard-port`'s
_HTTP2_SETTINGS = 0x04


def protocol(host: str, port: int, timeout: float = 2.0) -> str:
    """'grpc' (an HTTP/2 server preface: Ray's GCS), 'redis', or '' (something else, or nothing)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            try:
                first = sock.recv(64)  # an HTTP/2 server speaks first
            except TimeoutError:
                first = b""
            if len(first) >= 9 and first[3] == _HTTP2_SETTINGS:
                return "grpc"
            if first:
                return ""
            sock.sendall(b"PING\r\n")
            answer = sock.recv(64)
    except OSError:
        return ""
    return "redis" if answer[:1] in (b"+", b"-") and answer.endswith(b"\r\n") else ""


_DASHBOARD_OF = """
import sys
try:
    from ray._raylet import GcsClient
    value = GcsClient(address=sys.argv[1]).internal_kv_get(b"dashboard", namespace=b"dashboard", timeout=float(sys.argv[2]))
except Exception:
    sys.exit(1)
print(value.decode() if value else "")
"""


def dashboard_of(host: str, port: int, token: Token | None, timeout: float = 10.0) -> str | None:
    """The dashboard URL the GCS at host:port holds, or None (no ray here, auth refused, no answer)."""
    env = {**os.environ, **ray_env(token, enabled=token is not None)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DASHBOARD_OF, f"{host}:{port}", str(timeout / 2)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    if done.returncode or not value:
        return None
    return value if "://" in value else f"http://{value}"


def not_the_dashboard(address: str, host: str, port: int, token: Token | None) -> tuple[str, str] | None:
    """(message, hint) when what answers at `address` is Ray's GCS or a Redis, else None."""
    found = protocol(host, port)
    shown = f"[{host}]" if ":" in host else host
    if found == "grpc":
        url = dashboard_of(host, port, token)
        where = f"the head says its dashboard is {url}" if url else f"the dashboard listens on http://{shown}:{DASHBOARD_PORT} by default"
        return (
            f"{address} is the Ray head's GCS port (what `rlhf-launch join` takes), not the dashboard: {where}",
            f"use --address {url}"
            if url
            else f"use --address http://{shown}:{DASHBOARD_PORT} (or the --dashboard-port given to `rlhf-launch up`)",
        )
    if found == "redis":
        return (
            f"{address} answers in the Redis protocol (a GCS store), not the Ray dashboard",
            f"use the dashboard: http://{shown}:{DASHBOARD_PORT} (or the --dashboard-port given to `rlhf-launch up`)",
        )
    return None
