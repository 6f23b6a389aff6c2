"""`rlhf-launch join HEAD_IP`: start a Ray worker on this node and join it to the head."""

from __future__ import annotations

from typing import Any

import typer

from rlhf_launch.cli import options, output


def command(
    head_ip: str = typer.Argument(..., help="the head node's address"),
    port: int = typer.Option(6379, "--port", help="the head's GCS port"),
    num_gpus: int | None = options.NUM_GPUS,
    num_cpus: int | None = options.NUM_CPUS,
    node_ip_address: str | None = options.NODE_IP,
    ib_hca: str | None = options.IB_HCA,
    socket_ifname: str | None = options.SOCKET_IFNAME,
    object_store_memory: int | None = options.OBJECT_STORE,
    token_file: str | None = typer.Option(None, "--token-file", help="the head's token (default: RAY_AUTH_TOKEN, ~/.ray/auth_token)"),
    no_auth: bool = options.NO_AUTH,
    block: bool = options.BLOCK,
    as_json: bool = options.JSON,
    quiet: bool = typer.Option(False, "--quiet", help="no Ray start-up notes (its warnings and errors still show)"),
    ray_args: list[str] | None = options.RAY_ARGS,
) -> None:
    """Start a Ray worker on this node and join it to the head."""
    from rlhf_launch.cluster import bringup, node

    opts = node.WorkerOptions(
        extra=tuple(ray_args or ()),
        auth=not no_auth,
        num_gpus=num_gpus,
        num_cpus=num_cpus,
        node_ip_address=node_ip_address,
        object_store_memory=object_store_memory,
        block=block,
        token_file=token_file,
        ib_hca=ib_hca,
        socket_ifname=socket_ifname,
        head_ip=head_ip,
        port=port,
        quiet=quiet,
    )

    def notify(info: dict[str, Any]) -> None:
        if as_json:
            output.echo_json(info)
        else:
            output.echo(f"joined the Ray cluster at {info['head']} (token from {info['token_source']})")

    output.exit_with(bringup.join_head(opts, notify))
