"""`rlhf-launch down`: stop Ray on this node (what `ray stop` stops)."""

from __future__ import annotations

from rlhf_launch import cluster


def run(force: bool = False) -> str:
    stopped = cluster.stop(force=force)
    if stopped.returncode:
        raise cluster.failure("ray stop", stopped)
    return stopped.output.strip()
