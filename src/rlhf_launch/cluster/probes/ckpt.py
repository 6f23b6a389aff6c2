"""List an OpenRLHF checkpoint directory on every alive node, as a Ray job.

Argument: the ckpt_path. Prints one line `RLHF_LAUNCH_RESULT {node_id: {"ip":..., "listing":...}}`.
`listing()` is stdlib only and is also what rlhf-launch uses to read a local path.
"""

import json
import os
import sys
from typing import Any

MARKER = "RLHF_LAUNCH_RESULT"


def listing(path: str) -> dict[str, Any]:
    """What OpenRLHF leaves under ckpt_path: _actor/ and _critic/ (DeepSpeed dirs with
    global_step<N>/ and a `latest` file), and global_step<N>_hf/ beside them."""
    roles: dict[str, Any] = {}
    out: dict[str, Any] = {"path": path, "exists": os.path.isdir(path), "root": [], "roles": roles}
    if not out["exists"]:
        return out
    out["root"] = sorted(os.listdir(path))
    for role in ("_actor", "_critic"):
        role_dir = os.path.join(path, role)
        if not os.path.isdir(role_dir):
            continue
        latest_file = os.path.join(role_dir, "latest")
        latest = None
        if os.path.isfile(latest_file):
            with open(latest_file) as handle:
                latest = handle.read().strip()
        roles[role] = {
            "entries": sorted(e for e in os.listdir(role_dir) if os.path.isdir(os.path.join(role_dir, e))),
            "latest": latest,
        }
    return out


def main() -> None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    path = sys.argv[1]
    ray.init()
    look = ray.remote(num_cpus=0)(listing)
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    refs = [look.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(path) for n in nodes]
    results = ray.get(refs, timeout=120)
    report = {n["NodeID"]: {"ip": n.get("NodeManagerAddress", ""), "listing": r} for n, r in zip(nodes, results, strict=True)}
    print(MARKER, json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
