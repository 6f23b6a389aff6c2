"""`rlhf-launch status`: nodes, GPUs, Ray versions and running jobs of the live cluster.

`--wait-nodes N` first waits (bounded by `--timeout`) until N nodes, and `--wait-gpus` GPUs,
are alive: what a batch script runs instead of a fixed sleep while its nodes join."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
    wait_nodes: int = typer.Option(0, "--wait-nodes", min=0, help="first wait until this many nodes are alive"),
    wait_gpus: float = typer.Option(0, "--wait-gpus", min=0, help="... and this many GPUs"),
    timeout: float = typer.Option(300.0, "--timeout", min=0, help="seconds --wait-nodes waits; then exit 1 naming what is alive"),
) -> None:
    """Alive nodes, GPUs, Ray versions and running jobs of the cluster."""
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import snapshot
    from rlhf_launch.cluster.preflight import local_ray_version

    if wait_nodes or wait_gpus:
        _wait(address, token_file, wait_nodes, wait_gpus, timeout)
    snap = snapshot.read(options.cluster(address, token_file, timeout=5).dashboard)
    data = snap.as_json()
    data["local_ray_version"] = local_ray_version()
    data["ray_version_match"] = data["local_ray_version"] == snap.ray_version
    output.echo_json(data) if as_json else output.echo(report.status_text(data))


def _wait(address: str | None, token_file: str | None, nodes: int, gpus: float, timeout: float) -> None:
    """Until `nodes` nodes and `gpus` GPUs are alive; a head still starting (no token file yet,
    no dashboard) is waited for too. Past `timeout`: exit 1, saying what is alive."""
    from rlhf_launch.cluster import snapshot
    from rlhf_launch.errors import LauncherError
    from rlhf_launch.util.poll import poll_until

    seen: list[snapshot.Snapshot] = []
    last_error: list[str] = []

    def ready() -> bool:
        try:
            snap = snapshot.read(options.cluster(address, token_file, timeout=5).dashboard, memory=False)
        except LauncherError as exc:
            last_error[:] = [exc.message]
            return False
        seen[:] = [snap]
        return len(snap.nodes) >= nodes and snap.gpus >= gpus

    if poll_until(ready, timeout, 1.0):
        return
    if not seen:
        why = f": {last_error[0]}" if last_error else ""
        output.echo(f"error: no Ray cluster answered in {timeout:g}s{why}", err=True)
    else:
        alive = ", ".join(f"{n.ip} ({n.gpus:g} GPUs)" for n in sorted(seen[0].nodes, key=lambda n: n.ip)) or "none"
        output.echo(
            f"error: after {timeout:g}s {len(seen[0].nodes)} of {nodes} nodes and {seen[0].gpus:g} of {gpus:g} GPUs "
            f"are alive; alive: {alive}",
            err=True,
        )
    output.exit_with(output.FAILED)
