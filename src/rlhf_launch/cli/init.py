"""`rlhf-launch init PRESET [PATH]`: copy a preset out to edit."""

from __future__ import annotations

import typer

from rlhf_launch.cli import output


def command(
    preset: str = typer.Argument(..., help="preset name (rlhf-launch presets)"),
    path: str | None = typer.Argument(None, help="where to write it (default ./PRESET.yaml)"),
    force: bool = typer.Option(False, "--force", help="overwrite PATH (and the preset's companion files) if they exist"),
) -> None:
    """Copy a preset out to edit."""
    from pathlib import Path

    from rlhf_launch.core import presets as shipped

    target = shipped.copy_out(preset, Path(path) if path else None, force=force)
    output.echo(f"wrote {target}; check it with: rlhf-launch plan {target}")
