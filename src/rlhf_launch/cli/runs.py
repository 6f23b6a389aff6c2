"""`rlhf-launch runs`: every recorded run, with its status read live from Ray."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(token_file: str | None = options.TOKEN_FILE, as_json: bool = options.JSON) -> None:
    """List recorded runs, with status read live from Ray where reachable."""
    from rlhf_launch.cli import report
    from rlhf_launch.runs.overview import overview

    seen = overview(token_file)
    output.echo_json(seen.as_json()) if as_json else output.echo(report.runs_text(seen))
