"""List a ckpt_path on every alive node through the nodes' doctor agents, as a Ray job; each
agent keeps watching the path afterwards (probes/doctor.py `Agent.watch`), so the next
`checkpoints` reads the agents' own log lines over HTTP and starts no job (cluster/ckptwatch.py).

Argument: JSON {"path", "version", "timeout"}. Prints one line
`RLHF_LAUNCH_RESULT {node_id: {"ip": ..., "listing": ...} | {"ip": ..., "error": ...}}`.
probes/ckpt.py and probes/doctor.py (without their `__main__` blocks) are prepended to this
source by cluster/probe.py.
"""

import json
import os
import sys

MARKER = "RLHF_LAUNCH_RESULT"


def main() -> None:
    import ray

    spec = json.loads(sys.argv[1])
    timeout = float(spec.get("timeout", 60))
    ray.init()
    found = agents(str(spec["version"]))  # type: ignore[name-defined]  # noqa: F821 - probes/doctor.py, prepended
    refs = {node_id: actor.watch.remote(spec["path"]) for node_id, (_ip, actor) in found.items()}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
    done = set(ready)
    report = {}
    for node_id, ref in refs.items():
        ip = found[node_id][0]
        if ref not in done:
            report[node_id] = {"ip": ip, "error": f"no answer in {timeout:g}s"}
            continue
        try:
            report[node_id] = {"ip": ip, "listing": ray.get(ref)}
        except Exception as exc:  # noqa: BLE001 - that node's look failed: say how
            report[node_id] = {"ip": ip, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    print(MARKER, json.dumps(report), flush=True)
    sys.stdout.flush()
    os._exit(0)  # the result is out; Ray's shutdown at exit would add a second or two


if __name__ == "__main__":
    main()
