"""`rlhf-launch join HEAD_IP`: start a Ray worker that joins the head, with the head's token."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rlhf_launch import auth, cluster
from rlhf_launch.errors import UserError


def run(opts: cluster.WorkerOptions, notify: Callable[[dict[str, Any]], None]) -> int:
    cluster.check_node_ip(opts.node_ip_address)
    token = None
    if opts.auth:
        token = auth.find_token(os.environ, opts.token_file)
        if token is None:
            raise UserError(
                "no Ray auth token on this node",
                hint=f"copy the head's token to {auth.token_path()} or pass --token-file (or set RAY_AUTH_TOKEN)",
            )
    env = {**auth.ray_env(token, opts.auth), **opts.nccl_env}
    cluster.check_head(opts.head_ip, opts.port, env)
    args = cluster.worker_args(opts)
    info = {
        "head": f"{opts.head_ip}:{opts.port}",
        "auth": opts.auth,
        "token_source": token.source if token else None,
        "nccl_env": opts.nccl_env,
        "blocking": opts.block,
    }
    if opts.block:
        started = cluster.start_blocking(args, env)
        if started.returncode:
            raise cluster.failure("ray start --address", started)
        notify(info)
        return cluster.wait_blocking(started.process) if started.process else 0
    started = cluster.start(args, env)
    if started.returncode:
        raise cluster.failure("ray start --address", started)
    notify(info)
    return 0
