"""Move a checkpoint directory's OpenRLHF checkpoints aside, on every alive node, as a Ray job:
`_actor/`, `_critic/` and `global_step<N>_hf/` go into `<ckpt_path>/.rlhf-launch-aside/<stamp>/`
(a rename on the same file system: nothing is copied, nothing deleted). On shared storage
the first node moves them and the others find nothing left to move.

Argument: JSON {"path": ckpt_path, "stamp": "..."}. Prints one line
`RLHF_LAUNCH_RESULT {node_id: {"ip": ..., "moved": [...], "errors": [...], "to": dir}}`.
"""

import json
import os
import re
import sys
from typing import Any

MARKER = "RLHF_LAUNCH_RESULT"
ASIDE = ".rlhf-launch-aside"


def move_aside(path: str, stamp: str) -> dict[str, Any]:
    path = os.path.abspath(os.path.expanduser(path))
    target = os.path.join(path, ASIDE, stamp)
    out: dict[str, Any] = {"moved": [], "errors": [], "to": target}
    if not os.path.isdir(path):
        return out
    for name in sorted(os.listdir(path)):
        if name in ("_actor", "_critic") or re.fullmatch(r"global_step\d+_hf", name):
            try:
                os.makedirs(target, exist_ok=True)
                os.rename(os.path.join(path, name), os.path.join(target, name))
                out["moved"].append(name)
            except FileNotFoundError:
                continue  # another node of the same shared storage moved it first
            except OSError as exc:
                out["errors"].append(f"{name}: {exc}")
    return out


def main() -> None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    spec = json.loads(sys.argv[1])
    ray.init()
    task = ray.remote(num_cpus=0)(move_aside)
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    refs = [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(spec["path"], spec["stamp"])
        for n in nodes
    ]
    results = ray.get(refs, timeout=120)
    report = {n["NodeID"]: {"ip": n.get("NodeManagerAddress", ""), **r} for n, r in zip(nodes, results, strict=True)}
    print(MARKER, json.dumps(report), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
