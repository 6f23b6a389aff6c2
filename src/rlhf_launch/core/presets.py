"""The shipped presets (configs/ in the repo, rlhf_launch/presets in the package)."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlhf_launch.errors import UserError


def _root() -> Path:
    return Path(str(resources.files("rlhf_launch") / "presets"))


def names() -> list[str]:
    return sorted(p.stem for p in _root().glob("*.yaml"))


def path_of(name: str) -> Path:
    path = _root() / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"no preset named {name!r}", hint=f"presets: {', '.join(names())}")
    return path


def summary(name: str) -> str:
    """The first comment line of the preset: what it is for."""
    for line in path_of(name).read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def describe(name: str) -> dict[str, Any]:
    data = yaml.safe_load(path_of(name).read_text()) or {}
    cluster = data.get("cluster", {})
    return {
        "name": name,
        "summary": summary(name),
        "nodes": cluster.get("nodes"),
        "gpus_per_node": cluster.get("gpus_per_node"),
        "path": str(path_of(name)),
    }


def config_path(config: str) -> Path:
    """A path to a YAML file, or the name of a shipped preset."""
    path = Path(config)
    if path.exists() or path.suffix in (".yaml", ".yml") or "/" in config:
        return path
    return path_of(config)


def copy_out(name: str, dest: Path | None, force: bool = False) -> Path:
    """Copy preset `name` (and the files it names beside it) to `dest`; an existing file is
    refused unless `force` (as every verb that writes a file)."""
    source = path_of(name)
    target = dest or Path(f"{name}.yaml")
    if target.is_dir():
        target = target / source.name
    if target.exists() and not force:
        raise UserError(f"{target} already exists; not overwritten", hint="pass --force to overwrite it, or another PATH")
    companions = _companions(source)
    for name in companions:
        if (target.parent / name).exists() and not force:
            raise UserError(
                f"{target.parent / name} already exists (the preset's {name} goes there); not overwritten",
                hint="pass --force to overwrite it, or another PATH",
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    for name in companions:
        shutil.copyfile(source.parent / name, target.parent / name)
    return target


def _companions(source: Path) -> list[str]:
    """Files the preset names by a path relative to itself (a reward function): they go along."""
    data = yaml.safe_load(source.read_text()) or {}
    models = data.get("models") or {}
    return [
        models[key] for key in ("reward_func", "agent_func") if isinstance(models.get(key), str) and not Path(models[key]).is_absolute()
    ]
