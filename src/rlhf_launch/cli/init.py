"""`rlhf-launch init PRESET [PATH]`: copy a preset out to edit."""

from __future__ import annotations

from pathlib import Path

import typer

from rlhf_launch.cli import output


def copy_out(name: str, dest: Path | None) -> Path:
    """Copy preset `name` (and the files it names beside itself) to `dest`; never overwrites."""
    import shutil

    from rlhf_launch.core import presets
    from rlhf_launch.errors import UserError

    source = presets.path_of(name)
    target = dest or Path(f"{name}.yaml")
    if target.is_dir():
        target = target / source.name
    if target.exists():
        raise UserError(f"{target} already exists", hint="pass another PATH or remove the file")
    companions = presets.companions(source)
    for companion in companions:
        if (target.parent / companion).exists():
            raise UserError(f"{target.parent / companion} already exists (the preset's {companion} goes there)", hint="pass another PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    for companion in companions:
        shutil.copyfile(source.parent / companion, target.parent / companion)
    return target


def command(
    preset: str = typer.Argument(..., help="preset name (rlhf-launch presets)"),
    path: str | None = typer.Argument(None, help="where to write it (default ./PRESET.yaml)"),
) -> None:
    """Copy a preset out to edit."""
    target = copy_out(preset, Path(path) if path else None)
    output.echo(f"wrote {target}; check it with: rlhf-launch plan {target}")
