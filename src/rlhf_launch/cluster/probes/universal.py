"""Convert a run's latest DeepSpeed checkpoint into a universal one, as a Ray task on a node
that mounts ckpt_path (OpenRLHF's examples/scripts/ckpt_ds_zero_to_universal.sh, per role):

    python -m deepspeed.checkpoint.ds_to_universal --input_folder <ckpt>/_<role>/<tag> \
        --output_folder <ckpt>/_<role>/<tag>_uni --inject_missing_state

then `<ckpt>/_<role>/latest_universal` names `<tag>_uni`. The original tag is only read.
The output is written to `<out>.partial` and renamed into place once complete, and
`latest_universal` is replaced atomically, so a conversion cut short leaves nothing a trainer
would load. A tag already converted (latest_universal names it and it is there) is kept.

Argument: JSON {"path": ckpt_path, "roles": ["actor", "critic"], "deadline": seconds}.
Prints `RLHF_LAUNCH_CONVERT <text>` progress lines and one
`RLHF_LAUNCH_RESULT {"node": ip, "roles": {role: {"tag", "universal", "seconds", "skipped"}}, "errors": [...]}`.
"""

import json
import os
import subprocess
import sys
import time
from typing import Any

MARKER = "RLHF_LAUNCH_RESULT"
PROGRESS = "RLHF_LAUNCH_CONVERT"


def _say(text: str) -> None:
    print(PROGRESS, text, flush=True)


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def convert(path: str, roles: list[str], deadline: float, python: str = sys.executable) -> dict[str, Any]:
    """Convert each role's `latest` tag; stop at the first error (the result says which)."""
    path = os.path.abspath(os.path.expanduser(path))
    out: dict[str, Any] = {"roles": {}, "errors": []}
    ends = time.monotonic() + deadline
    for role in roles:
        folder = os.path.join(path, f"_{role}")
        try:
            with open(os.path.join(folder, "latest")) as handle:
                tag = handle.read().strip()
        except OSError as exc:
            out["errors"].append(f"_{role}/latest: {exc.strerror or exc}")
            break
        source = os.path.join(folder, tag)
        if not tag or not os.path.isdir(source):
            out["errors"].append(f"_{role}/latest names {tag!r}, which is not in {folder}")
            break
        try:
            with open(os.path.join(folder, "latest_universal")) as handle:
                done = handle.read().strip()
        except OSError:
            done = ""
        name = f"{tag}_uni"
        if done == name and os.path.isdir(os.path.join(folder, name)):
            _say(f"_{role}/{tag}: already converted to {name}")
            out["roles"][role] = {"tag": tag, "universal": name, "seconds": 0.0, "skipped": True}
            continue
        if os.path.exists(os.path.join(folder, name)):  # left by someone else: never written over
            name = f"{tag}_uni_{time.strftime('%Y%m%d-%H%M%S')}"
        target = os.path.join(folder, name)
        partial = f"{target}.partial"
        left = ends - time.monotonic()
        if left <= 0:
            out["errors"].append(f"_{role}: no time left to convert {tag} (deadline {deadline:g}s)")
            break
        _say(f"_{role}/{tag} -> {name}: converting (up to {left:.0f}s)")
        started = time.monotonic()
        argv = [python, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", source, "--output_folder", partial]
        argv.append("--inject_missing_state")
        try:
            done_proc = subprocess.run(argv, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            out["errors"].append(f"_{role}: converting {tag} took longer than {deadline:g}s (its partial output is {partial})")
            break
        if done_proc.returncode != 0:
            tail = (done_proc.stderr or done_proc.stdout).strip().splitlines()[-3:]
            out["errors"].append(f"_{role}: ds_to_universal exited {done_proc.returncode}: " + " | ".join(tail))
            break
        os.rename(partial, target)
        _write_atomic(os.path.join(folder, "latest_universal"), name)
        seconds = time.monotonic() - started
        _say(f"_{role}/{tag} -> {name}: done in {seconds:.1f}s")
        out["roles"][role] = {"tag": tag, "universal": name, "seconds": round(seconds, 1), "skipped": False}
    return out


def _sees(path: str) -> bool:
    return os.path.isdir(os.path.join(os.path.abspath(os.path.expanduser(path)), "_actor"))


def main() -> None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    spec = json.loads(sys.argv[1])
    ray.init()
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    look = ray.remote(num_cpus=0)(_sees)
    seen = ray.get(
        [look.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(spec["path"]) for n in nodes],
        timeout=60,
    )
    mounted = [n for n, ok in zip(nodes, seen, strict=True) if ok]
    if not mounted:
        print(MARKER, json.dumps({"node": None, "roles": {}, "errors": [f"no alive node sees {spec['path']}/_actor"]}), flush=True)
        os._exit(0)
    node = sorted(mounted, key=lambda n: n.get("Resources", {}).get("GPU", 0))[0]  # a node the trainer needs least
    task = ray.remote(num_cpus=1)(convert)
    strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
    result = ray.get(task.options(scheduling_strategy=strategy).remote(spec["path"], spec["roles"], float(spec["deadline"])))
    print(MARKER, json.dumps({"node": node.get("NodeManagerAddress", ""), **result}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
