"""The config mapping an import builds, and path helpers over nested dicts ("a.b.c")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.findings import Finding


@dataclass
class Draft:
    data: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    explained: set[str] = field(default_factory=set)  # flags whose differences a finding already explains
    owned: set[str] = field(default_factory=set)  # the script's flags a config key (or the launcher) carries
    soft: dict[str, dict[str, Any]] = field(default_factory=dict)  # optional key -> its values, kept if they render back


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def get_path(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def drop_path(data: dict[str, Any], path: str) -> None:
    parts = path.split(".")
    nodes = [data]
    for part in parts[:-1]:
        child = nodes[-1].get(part)
        if not isinstance(child, dict):
            return
        nodes.append(child)
    nodes[-1].pop(parts[-1], None)
    for depth in range(len(parts) - 1, 0, -1):  # drop sections left empty
        if not nodes[depth]:
            nodes[depth - 1].pop(parts[depth - 1], None)


def leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key != "env_vars" and path != "extra_args":
            out += leaves(value, path + ".")
        else:
            out.append(path)
    return out
