"""End every process of given rlhf-launch jobs on every node: the proof that a trainer is gone.

Every job rlhf-launch submits carries RLHF_LAUNCH_RUN=<run id> and RLHF_LAUNCH_JOB=<job id>
in its runtime_env env_vars, so Ray puts them in the environment of every process of that
job: the actor that runs its entrypoint, the driver and its children, the workers of its
actors, on every node. `sweep` finds those processes by reading /proc/<pid>/environ, sends
SIGTERM, waits, SIGKILLs what is left, and reports what it found and what survived.

Run as a probe job (`python3 -c SOURCE JSON`) it first kills the Ray actors that would still
start the jobs' entrypoints (a job stopped while its runtime env was being set up), then
sweeps every alive node with a task pinned to it, and prints one line
`RLHF_LAUNCH_RESULT {node_id: {"ip": ..., "found": [...], "left": [...]}}`.
Argument: JSON {"runs": [run ids], "jobs": [job ids], "grace": seconds}.
Standard library only, except ray in `main`.
"""

import json
import os
import signal
import sys
import time
from typing import Any

MARKER = "RLHF_LAUNCH_RESULT"
RUN_VAR = "RLHF_LAUNCH_RUN"
JOB_VAR = "RLHF_LAUNCH_JOB"
SUPERVISOR_NAMESPACE = "SUPERVISOR_ACTOR_RAY_NAMESPACE"


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key in (RUN_VAR.encode(), JOB_VAR.encode()):
            out[key.decode()] = value.decode(errors="replace")
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
    except OSError:
        return ""


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def matching(runs: list[str], jobs: list[str]) -> list[dict[str, Any]]:
    """This node's processes that belong to one of `runs` or `jobs` (never this one's line)."""
    mine = _ancestors(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        env = _environ(int(entry))
        if env.get(RUN_VAR) in runs or env.get(JOB_VAR) in jobs:
            found.append({"pid": int(entry), "job": env.get(JOB_VAR, ""), "cmd": _cmdline(int(entry))})
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def sweep(runs: list[str], jobs: list[str], grace: float = 5.0) -> dict[str, Any]:
    """SIGTERM the matching processes, SIGKILL what is left after `grace`; report both."""
    found = matching(runs, jobs)
    for proc in found:
        try:
            os.kill(proc["pid"], signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p["pid"]) for p in found):
        time.sleep(0.1)
    for proc in found:
        if _alive(proc["pid"]):
            try:
                os.kill(proc["pid"], signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2 if found else 0)
    left = [p for p in found if _alive(p["pid"])] + [p for p in matching(runs, jobs) if p["pid"] not in {f["pid"] for f in found}]
    return {"found": found, "left": left}


def kill_entrypoint_actors(jobs: list[str]) -> list[str]:
    """Kill the Ray actors that run (or are about to run) these jobs' entrypoints."""
    import ray

    killed = []
    for job in jobs:
        try:
            actor = ray.get_actor(f"_ray_internal_job_actor_{job}", namespace=SUPERVISOR_NAMESPACE)
        except ValueError:
            continue  # no such actor: nothing can start this job's entrypoint any more
        ray.kill(actor, no_restart=True)
        killed.append(job)
    return killed


def sweep_every_node(runs: list[str], jobs: list[str], grace: float) -> dict[str, Any]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0)(sweep)
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    refs = [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(runs, jobs, grace) for n in nodes
    ]
    results = ray.get(refs, timeout=60 + grace)
    return {n["NodeID"]: {"ip": n.get("NodeManagerAddress", ""), **r} for n, r in zip(nodes, results, strict=True)}


def main() -> None:
    import ray

    spec = json.loads(sys.argv[1])
    ray.init()
    killed = kill_entrypoint_actors(spec.get("jobs", []))
    report = sweep_every_node(spec.get("runs", []), spec.get("jobs", []), float(spec.get("grace", 5)))
    print(MARKER, json.dumps({"killed_entrypoint_actors": killed, "nodes": report}), flush=True)


if __name__ == "__main__":
    main()
