"""`rlhf-launch up --head`: start the Ray head, secure by default, and say how workers join."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
import time
from typing import Any

from rlhf_launch import auth, cluster
from rlhf_launch.dashboard import Dashboard
from rlhf_launch.errors import UserError
from rlhf_launch.snapshot import read

READY_TIMEOUT = 60.0


def _dashboard_url(opts: cluster.HeadOptions, head_ip: str) -> str:
    host = opts.dashboard_host
    if host in ("0.0.0.0", "::"):
        host = head_ip
    return f"http://{host}:{opts.dashboard_port}"


def _probe(url: str, token: auth.Token | None) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            Dashboard(url, token, timeout=2).check_auth()
            return True
        except UserError:
            return False

    return ready


def run(opts: cluster.HeadOptions, notify: Callable[[dict[str, Any]], None]) -> int:
    cluster.check_node_ip(opts.node_ip_address)
    cluster.check_dashboard_exposure(opts.dashboard_host, opts.auth)
    token, created = (None, False)
    if opts.auth:
        token, created = auth.ensure_token(auth.token_path(os.environ, opts.token_file))
    env = {**auth.ray_env(token, opts.auth), **opts.nccl_env}
    args = cluster.head_args(opts)
    local_url = f"http://127.0.0.1:{opts.dashboard_port}" if opts.dashboard_host in ("0.0.0.0", "::") else None
    url = local_url or _dashboard_url(opts, opts.node_ip_address or "127.0.0.1")
    ready = _probe(url, token)
    if opts.block:
        started = cluster.start_blocking(args, env, ready)
        if started.returncode:
            raise cluster.failure("ray start --head", started)
    else:
        started = cluster.start(args, env)
        if started.returncode:
            raise cluster.failure("ray start --head", started)
        deadline = time.monotonic() + READY_TIMEOUT
        while not ready():
            if time.monotonic() > deadline:
                raise UserError(f"Ray started but its dashboard at {url} did not answer in {READY_TIMEOUT:g}s")
            time.sleep(0.5)
    deadline = time.monotonic() + 15
    snapshot = read(Dashboard(url, token), memory=False)
    while not any(n.is_head and n.gpus == (opts.num_gpus if opts.num_gpus is not None else n.gpus) for n in snapshot.nodes):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
        snapshot = read(Dashboard(url, token), memory=False)
    head = next((n for n in snapshot.nodes if n.is_head), None)
    head_ip = head.ip if head else (opts.node_ip_address or "")
    join = ["rlhf-launch", "join", head_ip, "--port", str(opts.port)]
    if token is not None:
        join += ["--token-file", str(token.path)]
    else:
        join += ["--no-auth"]
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
        return cluster.wait_blocking(started.process)
    return 0
