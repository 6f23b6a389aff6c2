"""`rlhf-launch plan CONFIG`: validate a config and show the layout, findings and command."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    config: str = options.CONFIG,
    overrides: list[str] | None = options.OVERRIDES,
    openrlhf_version: str | None = options.VERSION,
    as_json: bool = options.JSON,
    cluster: bool = typer.Option(False, "--cluster", help="also check against the live cluster"),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    reserve_check: bool = options.RESERVE,
    reserve_timeout: float = options.RESERVE_TIMEOUT,
) -> None:
    """Validate a config and show the layout, findings and the exact trainer command."""
    from rlhf_launch.core.launch import from_config

    launch = from_config(config, overrides or [], openrlhf_version)
    launch = launch.at(options.target_address(address, launch.cfg.cluster.address))
    live = None
    if cluster or reserve_check:
        from rlhf_launch.cluster import live as live_check

        target = options.cluster(address, token_file, configured=launch.cfg.cluster.address)
        live = live_check.check(launch, target, reserve=reserve_check, reserve_timeout=reserve_timeout)
    output.show_launch(launch, as_json, live)
