from __future__ import annotations

from typing import Any

from autofake import HarnessError

import ray


class PlacementGroup:
    def __init__(self, index: int, bundles: list[dict[str, float]], strategy: str) -> None:
        self.index = index
        self.bundle_specs = bundles
        self.bundle_count = len(bundles)
        self.strategy = strategy

    def ready(self) -> ray.ObjectRef:
        return ray.ObjectRef(self)

    def wait(self, timeout_seconds: float = 30) -> bool:
        return True


def placement_group(bundles: list[dict[str, float]], strategy: str = "PACK", **kwargs: Any) -> PlacementGroup:
    copied = [dict(bundle) for bundle in bundles]
    ray.placement_groups.append({"bundles": ray.jsonable(copied), "strategy": strategy})
    return PlacementGroup(len(ray.placement_groups) - 1, copied, strategy)


def placement_group_table(pg: PlacementGroup | None = None) -> dict[str, Any]:
    if pg is None:
        raise HarnessError("fake placement_group_table() of all groups")
    return {
        "placement_group_id": str(pg.index),
        "strategy": pg.strategy,
        "state": "CREATED",
        "bundles": dict(enumerate(pg.bundle_specs)),
        "bundles_to_node_id": {i: "node-0" for i in range(pg.bundle_count)},
    }


def remove_placement_group(pg: PlacementGroup) -> None:
    pass


def get_current_placement_group() -> None:
    return None
