"""`rlhf-launch status`: nodes, GPUs, Ray versions and running jobs of the live cluster."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(address: str | None = options.ADDRESS, token_file: str | None = options.TOKEN_FILE, as_json: bool = options.JSON) -> None:
    """Alive nodes, GPUs, Ray versions and running jobs of the cluster."""
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import snapshot
    from rlhf_launch.cluster.preflight import local_ray_version

    snap = snapshot.read(options.cluster(address, token_file, timeout=5).dashboard)
    data = snap.as_json()
    data["local_ray_version"] = local_ray_version()
    data["ray_version_match"] = data["local_ray_version"] == snap.ray_version
    output.echo_json(data) if as_json else output.echo(report.status_text(data))
