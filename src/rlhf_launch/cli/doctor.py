"""`rlhf-launch doctor CONFIG`: is every node of the cluster ready for this run?"""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    config: str = options.CONFIG,
    overrides: list[str] | None = options.OVERRIDES,
    openrlhf_version: str | None = options.VERSION,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    deep: bool = typer.Option(
        False, "--deep", help="also import each package in a fresh interpreter on every node (catches builds against another torch)"
    ),
    skip_check: str = options.SKIP_CHECK,
    as_json: bool = options.JSON,
) -> None:
    """Check every alive node for a run: software against the release's pins and the other
    nodes, models, datasets, /dev/shm, ulimits, NCCL interfaces, addresses, host RAM, GPU
    memory, free space and shared storage at ckpt_path. Exit 0: nothing blocks the run
    (warnings allowed); 1: a check failed; 2: a usage or config error.

    Checks: software, models, data, shm, limits, network, memory, gpu, disk, shared, checkpoints.
    """
    from rlhf_launch import doctor
    from rlhf_launch.cli import report
    from rlhf_launch.cluster import doctor as cluster_doctor
    from rlhf_launch.cluster import snapshot
    from rlhf_launch.core.launch import from_config
    from rlhf_launch.core.picture import draw

    skip = doctor.parse_skip(skip_check)
    launch = from_config(config, overrides or [], openrlhf_version)
    if not launch.ok:  # a config error: nothing to look for on the nodes yet
        output.show_launch(launch, as_json)
    cluster = options.cluster(address, token_file, configured=launch.cfg.cluster.address)
    snap = snapshot.read(cluster.dashboard, memory=False)
    result = cluster_doctor.on_cluster(launch, cluster.jobs, snap, deep=deep, skip=skip)
    picture = draw(launch.plan, doctor.free_nodes(snap.nodes))
    if as_json:
        output.echo_json({**result.as_json(), "config_ok": launch.ok, "placement": picture})
    else:
        output.echo(report.doctor_text(result, picture))
    if not result.ok:
        output.exit_with(output.FAILED)
