"""`rlhf-launch presets`: the shipped presets."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(as_json: bool = options.JSON) -> None:
    """List the shipped presets."""
    from rlhf_launch.cli import report
    from rlhf_launch.core import presets as shipped

    rows = [shipped.describe(name) for name in shipped.names()]
    output.echo_json(rows) if as_json else output.echo(report.presets_text(rows))
