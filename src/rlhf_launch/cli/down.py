"""`rlhf-launch down`: stop Ray on this node (what `ray stop` stops)."""

from __future__ import annotations

import typer

from rlhf_launch.cli import output


def command(force: bool = typer.Option(False, "--force", help="SIGKILL instead of a graceful stop")) -> None:
    """Stop Ray on this node."""
    from rlhf_launch.cluster import node

    stopped = node.stop(force=force)
    if stopped.returncode:
        raise node.failure("ray stop", stopped)
    output.echo("stopped Ray on this node")
