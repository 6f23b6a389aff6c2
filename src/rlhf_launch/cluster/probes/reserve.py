"""Reserve a plan's placement groups on the live cluster, in OpenRLHF's order, then free them.

Run as a Ray job by `rlhf-launch ... --reserve-check`. Argument: JSON
{"groups": [{"name": str, "bundles": int, "packed": bool}, ...], "timeout": seconds}.
Prints one line `RLHF_LAUNCH_RESULT {json}`. Every group is removed before exit, on
failure too; Ray also removes a job's groups when its driver dies.
"""

import json
import sys
import time

import ray
from ray.util.placement_group import placement_group, remove_placement_group

MARKER = "RLHF_LAUNCH_RESULT"


def main() -> int:
    spec = json.loads(sys.argv[1])
    ray.init()
    deadline = time.monotonic() + float(spec["timeout"])
    made, report = [], []
    ok = True
    try:
        for group in spec["groups"]:
            start = time.monotonic()
            requests = [group["bundles"]] if group.get("packed", True) else [1] * group["bundles"]
            pgs = [placement_group([{"GPU": 1, "CPU": 1}] * n, strategy="PACK") for n in requests]
            made.extend(pgs)
            ready = all(pg.wait(max(0.1, deadline - time.monotonic())) for pg in pgs)
            entry = {"name": group["name"], "bundles": group["bundles"], "ready": ready, "seconds": round(time.monotonic() - start, 3)}
            if ready:
                table = [ray.util.placement_group_table(pg) for pg in pgs]
                nodes: dict[str, int] = {}
                for t in table:
                    for node in t.get("bundles_to_node_id", {}).values():
                        nodes[node] = nodes.get(node, 0) + 1
                entry["per_node"] = nodes
            report.append(entry)
            if not ready:
                ok = False
                break
    finally:
        for pg in made:
            try:
                remove_placement_group(pg)
            except Exception:
                pass
    print(MARKER, json.dumps({"ok": ok, "groups": report, "removed": len(made)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
