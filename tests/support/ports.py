"""Free loopback ports for test clusters, each handed out once per test process: the kernel
gives a just-closed port out again, and Ray refuses a node whose components share one
("metrics_export is trying to use a port number ... used by other components")."""

from __future__ import annotations

import socket

_handed: set[int] = set()


def free_port() -> int:
    """A port free now that this process never handed out before."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed:
            _handed.add(port)
            return port
    raise RuntimeError("no fresh free port after 1000 tries")
