"""`rlhf-launch init PRESET [PATH]`: copy a preset out to edit."""

from __future__ import annotations

from pathlib import Path

import typer

from rlhf_launch.cli import output


def copy_out(name: str, dest: Path | None, force: bool = False) -> Path:
    """Copy preset `name` (and the files it names beside itself) to `dest`; an existing file is
    refused unless `force` (as every verb that writes a file)."""
    import shutil

    from rlhf_launch.core import presets
    from rlhf_launch.errors import UserError

    source = presets.path_of(name)
    target = dest or Path(f"{name}.yaml")
    if target.is_dir():
        target = target / source.name
    if target.exists() and not force:
        raise UserError(f"{target} already exists; not overwritten", hint="pass --force to overwrite it, or another PATH")
    companions = presets.companions(source)
    for companion in companions:
        if (target.parent / companion).exists() and not force:
            raise UserError(
                f"{target.parent / companion} already exists (the preset's {companion} goes there); not overwritten",
                hint="pass --force to overwrite it, or another PATH",
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    for companion in companions:
        shutil.copyfile(source.parent / companion, target.parent / companion)
    return target


def command(
    preset: str = typer.Argument(..., help="preset name (rlhf-launch presets)"),
    path: str | None = typer.Argument(None, help="where to write it (default ./PRESET.yaml)"),
    force: bool = typer.Option(False, "--force", help="overwrite PATH (and the preset's companion files) if they exist"),
) -> None:
    """Copy a preset out to edit."""
    target = copy_out(preset, Path(path) if path else None, force=force)
    output.echo(f"wrote {target}; check it with: rlhf-launch plan {target}")
