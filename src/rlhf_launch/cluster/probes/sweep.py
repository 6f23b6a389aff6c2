"""End every process of given rlhf-launch jobs on every node: the proof that a trainer is gone.

Every job rlhf-launch submits carries RLHF_LAUNCH_RUN=<run id> and RLHF_LAUNCH_JOB=<job id>
in its runtime_env env_vars, so Ray puts them in the environment of every process of that
job: the actor that runs its entrypoint, the driver and its children, the workers of its
actors, on every node. `sweep` finds those processes by reading /proc/<pid>/environ, sends
SIGTERM, waits, SIGKILLs what is left, and reports what it found and what survived.

Run as a probe job (`python3 -c SOURCE JSON`) it gives Ray up to `settle` seconds to end
the jobs (so it can be started while Ray still stops them), then kills the Ray actors that
would still start the jobs' entrypoints (a job stopped while its runtime env was being set
up), sweeps every alive node through that node's sweeper agent (`agents`), and prints
one line `RLHF_LAUNCH_RESULT {node_id: {"ip": ..., "found": [...], "left": [...]}}`.
Argument: JSON {"runs": [run ids], "jobs": [job ids], "grace": seconds, "settle": seconds}.
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
AGENT_NAMESPACE = "rlhf_launch"
AGENT_PREFIX = "rlhf-launch-sweeper-"  # cluster/state.py knows them by it


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


class Agent:
    """A node's sweeper (see `agents`): `sweep` on its node."""

    def sweep(self, runs: list[str], jobs: list[str], grace: float) -> dict[str, Any]:
        return sweep(runs, jobs, grace)


def kill_entrypoint_actors(jobs: list[str]) -> list[str]:
    """Kill the Ray actors that run (or are about to run) these jobs' entrypoints."""
    import ray

    killed = []
    for job in jobs:
        actor = _entrypoint_actor(job)
        if actor is not None:
            ray.kill(actor, no_restart=True)
            killed.append(job)
    return killed


def _entrypoint_actor(job: str) -> Any:
    import ray

    try:
        return ray.get_actor(f"_ray_internal_job_actor_{job}", namespace=SUPERVISOR_NAMESPACE)
    except ValueError:
        return None  # no such actor: nothing can start this job's entrypoint any more


def wait_entrypoint_actors(jobs: list[str], bound: float) -> None:
    """Give Ray up to `bound` seconds to end the jobs it was asked to stop: the actor that
    runs a job's entrypoint exits once the job is terminal. One still there after that is a
    job stopped while its runtime env was set up (or a stop still under way): it is killed."""
    deadline = time.monotonic() + bound
    pending = list(jobs)
    while pending and time.monotonic() < deadline:
        pending = [job for job in pending if _entrypoint_actor(job) is not None]
        if pending:
            time.sleep(0.1)


def agents(version: str) -> dict[str, tuple[str, Any]]:
    """The sweeper agent of every alive node, {node_id: (ip, actor)}: a detached actor (no
    CPU, pinned to its node, named for this code's `version`), started the first time and
    reused by every later sweep, so a sweep does not wait for a worker process to start on
    each node. It carries no run or job marker (a sweep never ends it)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    agent = ray.remote(num_cpus=0)(Agent)
    out = {}
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if not node.get("Alive"):
            continue
        node_id = node["NodeID"]
        out[node_id] = (
            node.get("NodeManagerAddress", ""),
            agent.options(
                name=f"{AGENT_PREFIX}{version}-{node_id}",
                namespace=AGENT_NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                max_concurrency=4,  # the stops and supervisors of several runs at once
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                runtime_env={"env_vars": {RUN_VAR: "", JOB_VAR: ""}},
            ).remote(),
        )
    return out


def sweep_every_node(runs: list[str], jobs: list[str], grace: float, version: str) -> dict[str, Any]:
    import ray

    found = agents(version)
    refs = [actor.sweep.remote(runs, jobs, grace) for _, actor in found.values()]
    results = ray.get(refs, timeout=60 + grace)
    return {node_id: {"ip": ip, **r} for (node_id, (ip, _)), r in zip(found.items(), results, strict=True)}


def main() -> None:
    import ray

    spec = json.loads(sys.argv[1])
    ray.init()
    wait_entrypoint_actors(spec.get("jobs", []), float(spec.get("settle", 0)))
    killed = kill_entrypoint_actors(spec.get("jobs", []))
    report = sweep_every_node(spec.get("runs", []), spec.get("jobs", []), float(spec.get("grace", 5)), str(spec.get("version", "0")))
    print(MARKER, json.dumps({"killed_entrypoint_actors": killed, "nodes": report}), flush=True)
    sys.stdout.flush()
    os._exit(0)  # the result is out; Ray's shutdown at exit would add a second or two


if __name__ == "__main__":
    main()
