"""`rlhf-launch runs`: every run this machine recorded or the cluster knows, with status,
attempt, progress and the diagnosis of a failure, read live from Ray."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(address: str | None = options.ADDRESS, token_file: str | None = options.TOKEN_FILE, as_json: bool = options.JSON) -> None:
    """List runs (this machine's records and the cluster's), with status read live from Ray."""
    from rlhf_launch.runs.overview import overview

    seen = overview(address, token_file)
    if as_json:
        output.echo_json(seen.as_json())
        return
    from rlhf_launch.cli import report  # the text only: it imports the core (pydantic)

    output.echo(report.runs_text(seen))
