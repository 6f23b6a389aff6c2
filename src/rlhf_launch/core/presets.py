"""The shipped presets (configs/ in the repo, rlhf_launch/presets in the package): package
data, read only. Copying one out is the edge's (cli/init.py)."""

from __future__ import annotations

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


def companions(source: Path) -> list[str]:
    """Files the preset names by a path relative to itself (a reward function): they go along."""
    data = yaml.safe_load(source.read_text()) or {}
    models = data.get("models") or {}
    return [
        models[key] for key in ("reward_func", "agent_func") if isinstance(models.get(key), str) and not Path(models[key]).is_absolute()
    ]
