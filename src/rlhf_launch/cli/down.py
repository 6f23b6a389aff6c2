"""`rlhf-launch down`: stop Ray on this machine (what `ray stop` stops: every Ray node here)."""

from __future__ import annotations

import typer

from rlhf_launch.cli import output


def command(force: bool = typer.Option(False, "--force", help="SIGKILL instead of a graceful stop")) -> None:
    """Stop Ray on this machine, as `ray stop` does: every Ray process here, so on a machine
    that runs several Ray nodes (a head and workers, or more than one local cluster) it stops
    all of them. Nodes on other machines keep running."""
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import node

    before = node.local_nodes()
    stopped = node.stop(force=force)
    if stopped.returncode:
        raise node.failure("ray stop", stopped)
    output.echo(report.down_text(before, node.stop_summary(stopped.output)))
