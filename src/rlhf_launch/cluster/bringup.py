"""Bring a node up: the Ray head (`up --head`) or a worker that joins it (`join`).

Secure by default: token auth on (a token is made if none exists), the dashboard on
127.0.0.1, never a 0.0.0.0 node address; a worker checks the head and its token first, so
a wrong token or address fails in seconds. `notify` receives what to tell the user once the
node is up (before a `--block` node waits in the foreground).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from typing import Any

from rlhf_launch.cluster import auth, node
from rlhf_launch.cluster.auth import Token
from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.snapshot import Snapshot, read
from rlhf_launch.errors import ClusterError, UserError
from rlhf_launch.util.poll import poll_until

READY_TIMEOUT = 60.0
HEAD_GPUS_TIMEOUT = 60.0  # the resource view lags the start, longer on a loaded machine
Notify = Callable[[dict[str, Any]], None]


def _dashboard_url(opts: node.HeadOptions, head_ip: str) -> str:
    host = opts.dashboard_host
    if host in ("0.0.0.0", "::"):
        host = head_ip
    return f"http://{host}:{opts.dashboard_port}"


def _answers(url: str, token: Token | None) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            Dashboard(url, token, timeout=2).check_auth()
            return True
        except ClusterError:
            return False

    return ready


def start_head(opts: node.HeadOptions, notify: Notify) -> int:
    node.check_node_ip(opts.node_ip_address)
    node.check_dashboard_exposure(opts.dashboard_host, opts.auth)
    token, created = (None, False)
    if opts.auth:
        token, created = auth.ensure_token(auth.token_path(os.environ, opts.token_file))
    env = {**auth.ray_env(token, opts.auth), **opts.nccl_env}
    args = node.head_args(opts)
    local_url = f"http://127.0.0.1:{opts.dashboard_port}" if opts.dashboard_host in ("0.0.0.0", "::") else None
    url = local_url or _dashboard_url(opts, opts.node_ip_address or "127.0.0.1")
    ready = _answers(url, token)
    if opts.block:
        started = node.start_blocking(args, env, ready, quiet=opts.quiet)
        if started.returncode:
            raise _head_failure(opts, started)
    else:
        started = node.start(args, env)
        if started.returncode:
            raise _head_failure(opts, started)
        if not poll_until(ready, READY_TIMEOUT):
            raise UserError(f"Ray started but its dashboard at {url} did not answer in {READY_TIMEOUT:g}s")
    snapshot = _wait_head_gpus(Dashboard(url, token), opts.num_gpus)
    head = next((n for n in snapshot.nodes if n.is_head), None)
    head_ip = head.ip if head else (opts.node_ip_address or "")
    join = ["rlhf-launch", "join", head_ip, "--port", str(opts.port)]
    join += ["--token-file", str(token.path)] if token is not None else ["--no-auth"]
    if opts.ib_hca:
        join += ["--ib-hca", opts.ib_hca]
    if opts.socket_ifname:
        join += ["--socket-ifname", opts.socket_ifname]
    notify(
        {
            "head_ip": head_ip,
            "port": opts.port,
            "dashboard": _dashboard_url(opts, head_ip),
            "dashboard_host": opts.dashboard_host,
            "auth": opts.auth,
            "token_path": str(token.path) if token else None,
            "token_created": created,
            "join_command": shlex.join(join),
            "nccl_env": opts.nccl_env,
            "ray_version": snapshot.ray_version,
            "gpus": snapshot.gpus,
            "blocking": opts.block,
        }
    )
    if opts.block and started.process is not None:
        return node.wait_blocking(started.process)
    return 0


_ALREADY = re.compile(r"Ray is trying to start at (\S+), but is already running at (\S+?)\.? ")


def _free_port(after: int, avoid: int = 0) -> int:
    """The first port above `after` nothing on this machine listens on (nor `avoid`): what a
    suggestion to start another head may name (Ray's own servers sit on neighbouring ports)."""
    import socket

    for port in range(after + 1, min(after + 200, 65535)):
        if port == avoid:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    return after + 1


def _other_ports(opts: node.HeadOptions) -> str:
    gcs = _free_port(opts.port)
    return f"--port {gcs} --dashboard-port {_free_port(opts.dashboard_port, gcs)}"


def _head_failure(opts: node.HeadOptions, started: node.Started) -> UserError:
    """Why the head did not start; a Ray already running at the address asked for is named,
    with what stops it alone (`down`, like `ray stop`, would stop every Ray of this machine)."""
    found = _ALREADY.search(started.output)
    if found is None and "does not match persisted value" in started.output:  # Ray's assertion on a temp dir in use
        return UserError(
            "ray start --head failed: a Ray cluster on this machine already uses its temp dir (its session is not this one)",
            hint="use that cluster (rlhf-launch status), or start this head with its own temp dir and ports: "
            f"rlhf-launch up --head {_other_ports(opts)} -- --temp-dir DIR",
        )
    if found is None:
        return node.failure("ray start --head", started)
    gcs = found.group(2)
    pids = node.ray_processes(gcs)
    dashboards = sorted({what.split(" ", 1)[1] for what in pids.values() if what.startswith("dashboard ")})
    others = [n for n in node.local_nodes() or [] if n.gcs != gcs]
    uses = f"rlhf-launch status --address {dashboards[0]}" if dashboards else "rlhf-launch status with its dashboard's address"
    programs = ", ".join(f"{pids[pid].split(' ', 1)[0]} {pid}" for pid in sorted(pids))
    stop_it = (
        "stop only it: kill -TERM " + " ".join(str(p) for p in sorted(pids)) + f" ({programs}), or Ctrl-C the `up --block` that started it"
        if pids
        else "stop only it: Ctrl-C (or SIGTERM) the `rlhf-launch up --head --block` that started it"
    )
    lines = [
        f"use that cluster ({uses}, dashboard {', '.join(dashboards) or 'unknown'})",
        f"or start this head on other ports: rlhf-launch up --head {_other_ports(opts)}",
        f"or {stop_it}",
    ]
    also = f": also {', '.join(f'{n.ip} of cluster {n.gcs}' for n in others)}" if others else ""
    lines.append(f"rlhf-launch down stops every Ray on this machine, not only this one{also}")
    what = f"ray start --head failed: Ray already runs at {gcs} on this machine (the address asked for)"
    return UserError(what, hint="\n        ".join(lines))


def _wait_head_gpus(dashboard: Dashboard, gpus: int | None) -> Snapshot:
    """The snapshot once the head reports its GPUs (the resource view lags the start)."""
    seen: list[Snapshot] = []

    def head_ready() -> bool:
        seen[:] = [read(dashboard, memory=False)]
        return any(n.is_head and (gpus is None or n.gpus == gpus) for n in seen[0].nodes)

    poll_until(head_ready, HEAD_GPUS_TIMEOUT)
    return seen[0]


def join_head(opts: node.WorkerOptions, notify: Notify) -> int:
    node.check_node_ip(opts.node_ip_address)
    token = None
    if opts.auth:
        token = auth.find_token(os.environ, opts.token_file)
        if token is None:
            raise UserError(
                "no Ray auth token on this node",
                hint=f"copy the head's token to {auth.token_path()} or pass --token-file (or set RAY_AUTH_TOKEN)",
            )
    env = {**auth.ray_env(token, opts.auth), **opts.nccl_env}
    node.check_head(opts.head_ip, opts.port, env)
    args = node.worker_args(opts)
    info = {
        "head": f"{opts.head_ip}:{opts.port}",
        "auth": opts.auth,
        "token_source": token.source if token else None,
        "nccl_env": opts.nccl_env,
        "blocking": opts.block,
    }
    started = node.start_blocking(args, env, quiet=opts.quiet) if opts.block else node.start(args, env)
    if started.returncode:
        raise node.failure("ray start --address", started)
    notify(info)
    if opts.block and started.process is not None:
        return node.wait_blocking(started.process)
    return 0
