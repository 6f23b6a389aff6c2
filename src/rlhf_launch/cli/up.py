"""`rlhf-launch up --head`: start the Ray head, secure by default, and say how workers join."""

from __future__ import annotations

from typing import Any

import typer

from rlhf_launch.cli import options, output
from rlhf_launch.errors import UserError


def command(
    head: bool = typer.Option(False, "--head", help="start the head node (required)"),
    num_gpus: int | None = options.NUM_GPUS,
    num_cpus: int | None = options.NUM_CPUS,
    port: int = typer.Option(6379, "--port", help="GCS port workers join"),
    dashboard_port: int = typer.Option(8265, "--dashboard-port"),
    dashboard_host: str = typer.Option("127.0.0.1", "--dashboard-host", help="address the dashboard and job API bind"),
    node_ip_address: str | None = options.NODE_IP,
    ib_hca: str | None = options.IB_HCA,
    socket_ifname: str | None = options.SOCKET_IFNAME,
    object_store_memory: int | None = options.OBJECT_STORE,
    no_auth: bool = options.NO_AUTH,
    token_file: str | None = typer.Option(None, "--token-file", help="token file to use or create (default ~/.ray/auth_token)"),
    block: bool = options.BLOCK,
    as_json: bool = options.JSON,
    quiet: bool = typer.Option(
        False, "--quiet", help="one line once up: no join or token instructions, no Ray start-up notes (for scripts that start every node)"
    ),
    ray_args: list[str] | None = options.RAY_ARGS,
) -> None:
    """Start the Ray head on this node: token auth on, dashboard on 127.0.0.1."""
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import bringup, node

    if not head:
        raise UserError("up starts the head node: pass --head", hint="workers use: rlhf-launch join HEAD_IP")
    opts = node.HeadOptions(
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
        port=port,
        dashboard_host=dashboard_host,
        dashboard_port=dashboard_port,
        quiet=quiet,
    )

    def notify(info: dict[str, Any]) -> None:
        if as_json:
            output.echo_json(info)
        elif quiet:  # the first line alone: where the head runs
            output.echo(report.up_text(info).splitlines()[0])
        else:
            output.echo(report.up_text(info))

    output.exit_with(bringup.start_head(opts, notify))
