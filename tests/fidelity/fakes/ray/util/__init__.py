from __future__ import annotations

from typing import Any

from ray.util.placement_group import (
    PlacementGroup,
    get_current_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)

__all__ = [
    "PlacementGroup",
    "get_current_placement_group",
    "placement_group",
    "placement_group_table",
    "remove_placement_group",
]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    return importlib.import_module(f"ray.util.{name}")  # e.g. ray.util.collective, faked by autofake
