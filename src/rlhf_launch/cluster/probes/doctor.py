"""What each node has, for `rlhf-launch doctor`: read on every alive node, in parallel, by
that node's doctor agent (a small detached actor, started once and reused, like the sweeper
agents), so a look takes a second, not a worker start per node.

`facts(spec)` is the whole look at one node: package metadata (never an import, unless
`deep`), model and dataset paths, /dev/shm, ulimits, network interfaces (with their addresses) and HCAs, the node's
host identity and address, host RAM, GPU memory where `nvidia-smi` answers, free space and
write access at ckpt_path, the checkpoints already there. It judges nothing: the launcher's
doctor/checks.py does, from the facts of every node together.

Run as a probe job (`python3 -c SOURCE JSON`): facts from every node, then the shared-storage
round trip (each node writes a mark under ckpt_path, then says whose marks it sees), and one
line `RLHF_LAUNCH_RESULT {"nodes": {node_id: {...}}}`. Standard library only, except ray in
`agents` and `main`. `listing` (probes/ckpt.py) is prepended to this source by cluster/probe.py.
"""

import hashlib
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from typing import Any

MARKER = "RLHF_LAUNCH_RESULT"
AGENT_NAMESPACE = "rlhf_launch"
AGENT_PREFIX = "rlhf-launch-doctor-"
MARK_DIR = ".rlhf-launch-doctor"
GIB = 1024**3
DEEP_IMPORT_SECONDS = 90.0  # vLLM or openrlhf on a cold disk; doctor/spec.py waits this long more for --deep
PACKAGES = ("openrlhf", "vllm", "deepspeed", "transformers", "flash-attn", "torch", "ray")
MODULES = {"openrlhf": "openrlhf", "vllm": "vllm", "deepspeed": "deepspeed", "transformers": "transformers", "flash-attn": "flash_attn"}
MODULES.update({"torch": "torch", "ray": "ray"})
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
FIRST_RECORD_BYTES = 1 << 20
METADATA_FILES = (
    "dataset_info.json",
    "state.json",
    "dataset_dict.json",
    "dataset_infos.json",
    "config.json",
)  # a record longer than this is not read whole


def effective_env(overlay: dict[str, str]) -> dict[str, str]:
    """The node's environment as the trainer's processes get it: the runtime_env's env_vars
    over the node's own (Ray expands ${VAR} in them from the node's environment)."""
    env = dict(os.environ)
    for key, value in overlay.items():
        env[key] = re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), value)
    return env


def search_path(env: dict[str, str]) -> list[str]:
    """Where the trainer's `python3` finds packages: its PYTHONPATH, then this interpreter's
    own path without this process's PYTHONPATH entries."""
    own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    wanted = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in sys.path if p and p not in own and os.path.isdir(p)]
    return wanted + [p for p in rest if p not in wanted]


def packages(path: list[str]) -> dict[str, Any]:
    """{name: {"version": str | None, "location": str | None}} from package metadata; a module
    found without metadata (a source checkout on PYTHONPATH) has version None."""
    from importlib import machinery, metadata

    out: dict[str, Any] = {}
    for name in PACKAGES:
        version, location = None, None
        for dist in metadata.distributions(name=name, path=path):
            version, location = dist.version, str(getattr(dist, "_path", ""))
            break
        if version is None and name == "flash-attn":
            for dist in metadata.distributions(name="flash_attn", path=path):
                version, location = dist.version, str(getattr(dist, "_path", ""))
                break
        found = None
        try:
            found = machinery.PathFinder.find_spec(MODULES[name], path)
        except (ImportError, ValueError):
            found = None
        out[name] = {"version": version, "location": location, "module": bool(found), "module_at": getattr(found, "origin", None)}
    return out


def trainer_sha256(found: dict[str, Any], modules: list[str] | None = None) -> str | None:
    """sha256 of the trainer file of the openrlhf the node's path finds, with the `modules` its
    parser is built in (dotted names; the scheme of openrlhf/fork.py parser_sha256); None: the
    trainer is not there (a module that is missing hashes as empty, so the sums differ)."""
    origin = (found.get("openrlhf") or {}).get("module_at")
    if not origin:
        return None
    package = os.path.dirname(origin)
    try:
        with open(os.path.join(package, "cli", "train_ppo_ray.py"), "rb") as handle:
            trainer = handle.read()
    except OSError:
        return None
    if not modules:
        return hashlib.sha256(trainer).hexdigest()
    digest = hashlib.sha256(b"train_ppo_ray.py\0" + trainer)
    top = os.path.dirname(package)  # the folder holding openrlhf/
    for name in sorted(modules):
        text = b""
        path = os.path.join(top, *name.split("."))
        for candidate in (path + ".py", os.path.join(path, "__init__.py")):
            try:
                with open(candidate, "rb") as handle:
                    text = handle.read()
                break
            except OSError:
                continue
        digest.update(b"\0" + name.encode("utf-8") + b"\0" + text)
    return digest.hexdigest()


def deep_imports(env: dict[str, str], names: list[str], timeout: float) -> dict[str, str]:
    """Import each module in a fresh interpreter with the trainer's environment, all at once
    (torch first in the answer: the others import it, so its error explains theirs): "" when it
    imports, else the last line of its error (an `undefined symbol` of a mismatched build)."""
    ordered = sorted(dict.fromkeys(names), key=lambda n: n != "torch")
    running: dict[str, Any] = {}
    out: dict[str, str] = {}
    for name in ordered:
        module = MODULES.get(name, name)
        try:
            running[name] = subprocess.Popen(
                [sys.executable, "-c", f"import {module}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
        except OSError as exc:
            out[name] = str(exc)[:400]
    deadline = time.monotonic() + timeout
    for name in ordered:
        child = running.get(name)
        if child is None:
            continue
        try:
            _, err = child.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            out[name] = f"import took longer than {timeout:g}s"
            continue
        lines = [line for line in (err or "").strip().splitlines() if line.strip()]
        out[name] = "" if child.returncode == 0 else (lines[-1] if lines else f"exit {child.returncode}")[:400]
    return {name: out[name] for name in ordered if name in out}


def offline(env: dict[str, str]) -> bool:
    return str(env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or "").strip().lower() in ("1", "true", "yes", "on")


def hub_cache(env: dict[str, str]) -> str:
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
        if env.get(name):
            return env[name]
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return os.path.join(home, "hub")


def _read_json(path: str) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def model_dir(path: str, want_template: bool) -> dict[str, Any]:
    """A local model directory: config, weights (every shard an index names), tokenizer, chat template."""
    out: dict[str, Any] = {"exists": os.path.isdir(path), "config": False, "weights": [], "missing_shards": [], "tokenizer": False}
    if not out["exists"]:
        return out
    names = set(os.listdir(path))
    out["config"] = "config.json" in names
    out["weights"] = sorted(n for n in names if n.endswith((".safetensors", ".bin", ".pt")))[:5]
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if index in names:
            data = _read_json(os.path.join(path, index)) or {}
            shards = sorted(set((data.get("weight_map") or {}).values()))
            out["missing_shards"] += [s for s in shards if not os.path.isfile(os.path.join(path, s))]
            out["index"] = index
    out["tokenizer"] = any(n in names for n in TOKENIZER_FILES)
    if want_template:
        config = _read_json(os.path.join(path, "tokenizer_config.json")) or {}
        out["chat_template"] = bool(config.get("chat_template")) or "chat_template.jinja" in names or "chat_template.json" in names
    return out


def model(value: str, env: dict[str, str], want_template: bool) -> dict[str, Any]:
    """A model as the trainer resolves it: a local directory if the path exists, else a hub
    id, found in this node's HF cache or not."""
    expanded = os.path.expanduser(value)
    local_form = value.startswith(("/", "./", "../", "~")) or value.count("/") > 1  # `gpt2`, `org/name`: hub ids
    if os.path.isdir(expanded) or local_form:
        return {"kind": "local", "path": expanded, **model_dir(expanded, want_template)}
    cache = os.path.join(hub_cache(env), "models--" + value.replace("/", "--"), "snapshots")
    snapshots = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
    try:
        with open(os.path.join(os.path.dirname(cache), "refs", "main")) as handle:
            main_ref = handle.read().strip()
    except OSError:
        main_ref = ""
    chosen = main_ref if main_ref in snapshots else (snapshots[-1] if snapshots else "")
    out: dict[str, Any] = {"kind": "hub", "cached": bool(snapshots), "cache": cache}
    if chosen:
        out.update(model_dir(os.path.join(cache, chosen), want_template))
    out["offline"] = offline(env)
    out["token"] = bool(env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")) or os.path.isfile(
        os.path.join(env.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "token")
    )
    return out


def _first_record(path: str) -> Any:
    """The first record of a .jsonl / .json file (None: none readable)."""
    with open(path, "rb") as handle:
        head = handle.read(FIRST_RECORD_BYTES)
    text = head.decode("utf-8", errors="replace").lstrip()
    if path.endswith(".jsonl") or not text.startswith("["):
        line = text.split("\n", 1)[0]
        try:
            return json.loads(line)
        except ValueError:
            return None
    decoder = json.JSONDecoder()
    try:
        record, _ = decoder.raw_decode(text[1:].lstrip())
        return record
    except ValueError:
        return None


def dataset(value: str, keys: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One dataset of a (comma-separated) list: a local file or directory, or a hub id."""
    name = value.split("@", 1)[0].strip()
    expanded = os.path.expanduser(name)
    out: dict[str, Any] = {"name": name}
    if os.path.exists(expanded) or name.startswith(("/", "./", "../", "~")) or name.count("/") > 1:
        out.update(kind="local", path=expanded, exists=os.path.exists(expanded))
        files = [expanded] if os.path.isfile(expanded) else []
        if os.path.isdir(expanded):
            names = os.listdir(expanded)
            data_files = [n for n in names if n.endswith((".jsonl", ".json")) and n not in METADATA_FILES]
            # save_to_disk / parquet / arrow folders: no record is read (no pyarrow here)
            files = (
                [] if any(n.endswith((".arrow", ".parquet")) for n in names) else sorted(os.path.join(expanded, n) for n in data_files)[:1]
            )
            out["entries"] = len(os.listdir(expanded))
        if files and files[0].endswith((".jsonl", ".json")):
            try:
                record = _first_record(files[0])
            except OSError as exc:
                out["error"] = str(exc)
                record = None
            if isinstance(record, dict):
                out["missing_keys"] = [k for k in keys if k not in record]
                out["keys"] = sorted(record)[:20]
            else:
                out["unreadable"] = files[0]
        return out
    cache = os.path.join(hub_cache(env), "datasets--" + name.replace("/", "--"))
    datasets_cache = env.get("HF_DATASETS_CACHE") or os.path.join(os.path.dirname(hub_cache(env)), "datasets")
    other = os.path.isdir(datasets_cache) and any(n.startswith(name.replace("/", "___")) for n in os.listdir(datasets_cache))
    out.update(kind="hub", cached=os.path.isdir(cache) or other, offline=offline(env))
    return out


def interfaces() -> list[str]:
    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        return sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []


def addresses() -> dict[str, list[str]]:
    """Interface name -> its addresses (IPv4 via SIOCGIFADDR, IPv6 from /proc/net/if_inet6), so
    the launcher can tell an interface other nodes can reach from loopback, link-local and the
    traffic-shaping or container devices (ifb0, docker0, veth...) that carry no such address."""
    out: dict[str, list[str]] = {}
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for name in interfaces():
                try:
                    packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
                except OSError:
                    continue  # no IPv4 address
                out.setdefault(name, []).append(socket.inet_ntoa(packed[20:24]))
    except (ImportError, OSError):
        pass
    try:
        with open("/proc/net/if_inet6") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) >= 6 and len(parts[0]) == 32:
                    raw = bytes.fromhex(parts[0])
                    out.setdefault(parts[5], []).append(socket.inet_ntop(socket.AF_INET6, raw))
    except (OSError, ValueError):
        pass
    return out


def hcas() -> list[str]:
    base = "/sys/class/infiniband"
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def host_identity() -> str:
    """Which machine this is: nodes that share one (the local test clusters) may share 127.0.0.x."""
    parts = []
    for path in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            with open(path) as handle:
                parts.append(handle.read().strip())
        except OSError:
            parts.append("")
    return socket.gethostname() + "/" + "/".join(parts)


def memory_gib() -> dict[str, Any]:
    """Host RAM: /proc/meminfo, capped by a cgroup limit (a container sees the host's total)."""
    total = available = None
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    value = int(rest.split()[0]) * 1024 / GIB
                    total, available = (value, available) if key == "MemTotal" else (total, value)
    except (OSError, ValueError, IndexError):
        pass
    limit = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as handle:
                raw = handle.read().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < (1 << 60):
            limit = int(raw) / GIB
        break
    if limit is not None and total is not None and limit < total:
        total = limit
        available = min(available or limit, limit)
    return {"total": total, "available": available}


def gpus() -> dict[str, Any]:
    """GPU memory as nvidia-smi reports it; None where there is no nvidia-smi (logical GPUs)."""
    if shutil.which("nvidia-smi") is None:
        return {"reported": False, "why": "no nvidia-smi on this node"}
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError) as exc:
        return {"reported": False, "why": f"nvidia-smi did not answer ({exc})"}
    if done.returncode != 0:
        return {"reported": False, "why": f"nvidia-smi failed: {(done.stderr or done.stdout).strip()[:200]}"}
    rows = [line.rsplit(",", 1) for line in done.stdout.strip().splitlines() if "," in line]
    return {"reported": True, "gpus": [{"name": n.strip(), "memory_gib": float(m) / 1024} for n, m in rows if m.strip().isdigit()]}


def nearest_existing(path: str) -> str:
    path = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def disk(ckpt_path: str) -> dict[str, Any]:
    """Free space and write access where ckpt_path is (or would be created)."""
    base = nearest_existing(ckpt_path)
    out: dict[str, Any] = {"base": base, "exists": os.path.isdir(os.path.abspath(os.path.expanduser(ckpt_path)))}
    try:
        stat = os.statvfs(base)
        out["free_bytes"] = stat.f_bavail * stat.f_frsize
    except OSError as exc:
        out["error"] = str(exc)
    out["writable"] = os.access(base, os.W_OK | os.X_OK)
    return out


def limits() -> dict[str, Any]:
    out = {}
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC), ("memlock", resource.RLIMIT_MEMLOCK)):
        soft, _ = resource.getrlimit(which)
        out[name] = None if soft == resource.RLIM_INFINITY else soft
    return out


def shm() -> dict[str, Any]:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError as exc:
        return {"bytes": None, "error": str(exc)}
    return {"bytes": stat.f_blocks * stat.f_frsize, "free_bytes": stat.f_bavail * stat.f_frsize}


def facts(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything `doctor` needs to know of this node (see the module docstring)."""
    started = time.monotonic()
    env = effective_env(spec.get("env", {}))
    path = search_path(env)
    out: dict[str, Any] = {
        "python": ".".join(str(part) for part in sys.version_info[:3]),
        "packages": packages(path),
        "host": host_identity(),
        "hostname": socket.gethostname(),
        "shm": shm(),
        "limits": limits(),
        "interfaces": interfaces(),
        "addresses": addresses(),
        "hcas": hcas(),
        "env": {k: env.get(k) for k in spec.get("env_names", [])},
        "memory": memory_gib(),
        "gpu": gpus(),
    }
    if spec.get("trainer_hash"):
        out["openrlhf_trainer_sha256"] = trainer_sha256(out["packages"], spec.get("trainer_modules") or [])
    want_template = bool(spec.get("chat_template"))
    out["models"] = {role: model(value, env, want_template) for role, value in spec.get("models", {}).items()}
    keys = [k for k in spec.get("data_keys", []) if k]
    out["datasets"] = {
        key: [dataset(v, keys, env) for v in value.split(",") if v.strip()] for key, value in spec.get("datasets", {}).items()
    }
    out["files"] = {p: os.path.isfile(os.path.expanduser(p)) for p in spec.get("files", [])}
    ckpt = spec.get("ckpt_path")
    if ckpt:
        out["disk"] = disk(ckpt)
        out["checkpoints"] = listing(os.path.abspath(os.path.expanduser(ckpt)))  # type: ignore[name-defined]  # noqa: F821 - from probes/ckpt.py
    if spec.get("deep"):
        # every package the release needs that is installed in any form: metadata without its
        # module (a half-removed install) is what the import shows
        found = out["packages"]
        present = [n for n in spec.get("deep_packages", []) if found.get(n, {}).get("module") or found.get(n, {}).get("version")]
        out["imports"] = deep_imports(env, present, DEEP_IMPORT_SECONDS)
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def write_mark(ckpt_path: str, nonce: str, node_id: str) -> str:
    """The first half of the shared-storage round trip: leave a mark where ckpt_path is."""
    base = os.path.join(nearest_existing(ckpt_path), MARK_DIR + "-" + nonce)
    try:
        os.makedirs(base, exist_ok=True)
        with open(os.path.join(base, node_id), "w") as handle:
            handle.write(str(time.time()))
    except OSError as exc:
        return str(exc)
    return ""


def read_marks(ckpt_path: str, nonce: str, expected: list[str], wait: float = 3.0) -> list[str]:
    """The second half: which of the expected marks this node sees, each looked up by name
    (NFS caches directory listings for seconds; a lookup by name revalidates), for up to
    `wait` seconds."""
    base = os.path.join(nearest_existing(ckpt_path), MARK_DIR + "-" + nonce)
    deadline = time.monotonic() + wait
    while True:
        seen = [n for n in expected if os.path.exists(os.path.join(base, n))]
        if len(seen) == len(expected) or time.monotonic() > deadline:
            return sorted(seen)
        time.sleep(0.2)


def clean_marks(ckpt_path: str, nonce: str, node_id: str) -> None:
    base = os.path.join(nearest_existing(ckpt_path), MARK_DIR + "-" + nonce)
    try:
        os.remove(os.path.join(base, node_id))
    except OSError:
        pass
    try:
        os.rmdir(base)  # the last node to clean removes the directory
    except OSError:
        pass


# Checkpoint watches: an agent asked once for a ckpt_path's listing keeps looking at it and
# prints `RLHF_LAUNCH_CKPT {"path", "at", "listing"}` to its own stdout (a log the dashboard
# serves) when the listing changes, and every WATCH_HEARTBEAT seconds anyway; `checkpoints`
# reads those lines over HTTP instead of starting a probe job (cluster/ckptwatch.py).
CKPT_MARKER = "RLHF_LAUNCH_CKPT"
WATCH_EVERY = 1.0  # seconds between looks
WATCH_HEARTBEAT = 10.0  # an unchanged listing is printed again this often: proof the watch is alive
WATCH_FOR = 24 * 3600.0  # a path not asked for again (by a probe) is dropped after this
WATCH_MAX = 32  # paths watched at once per node (the least recently asked for is dropped)


class Agent:
    """A node's doctor (see `agents`)."""

    def __init__(self) -> None:
        self._watched: dict[str, float] = {}  # path -> when last asked for
        self._thread: Any = None

    def facts(self, spec: dict[str, Any]) -> dict[str, Any]:
        return facts(spec)

    def watch(self, path: str) -> dict[str, Any]:
        """The listing of `path` now (probes/ckpt.py `listing`), and keep watching it."""
        import threading

        self._watched[path] = time.time()
        while len(self._watched) > WATCH_MAX:
            del self._watched[min(self._watched, key=lambda p: self._watched[p])]
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._watch_loop, name="rlhf-launch-ckpt-watch", daemon=True)
            self._thread.start()
        return dict(listing(path))  # type: ignore[name-defined]  # noqa: F821 - probes/ckpt.py, prepended

    def _watch_loop(self) -> None:
        shown: dict[str, tuple[str, float]] = {}
        while True:
            now = time.time()
            for path, asked in list(self._watched.items()):
                if now - asked > WATCH_FOR:
                    self._watched.pop(path, None)
                    continue
                try:
                    found = listing(path)  # type: ignore[name-defined]  # noqa: F821
                except OSError as exc:
                    found = {"path": path, "exists": False, "root": [], "roles": {}, "error": str(exc)[:200]}
                key = json.dumps(found, sort_keys=True)
                last = shown.get(path)
                if last is None or last[0] != key or now - last[1] >= WATCH_HEARTBEAT:
                    print(CKPT_MARKER, json.dumps({"path": path, "at": now, "listing": found}), flush=True)
                    shown[path] = (key, now)
            time.sleep(WATCH_EVERY)

    def write_mark(self, ckpt_path: str, nonce: str, node_id: str) -> str:
        return write_mark(ckpt_path, nonce, node_id)

    def read_marks(self, ckpt_path: str, nonce: str, expected: list[str]) -> list[str]:
        return read_marks(ckpt_path, nonce, expected)

    def clean_marks(self, ckpt_path: str, nonce: str, node_id: str) -> None:
        clean_marks(ckpt_path, nonce, node_id)


def agents(version: str) -> dict[str, tuple[str, Any]]:
    """The doctor agent of every alive node, {node_id: (ip, actor)}: detached, no CPU, pinned
    to its node, named for this code's `version`; started the first time, reused after."""
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
                max_concurrency=4,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                runtime_env={"env_vars": {"RLHF_LAUNCH_RUN": "", "RLHF_LAUNCH_JOB": ""}},
            ).remote(),
        )
    return out


def every_node(spec: dict[str, Any], version: str, timeout: float) -> dict[str, Any]:
    """Facts of every alive node, then the shared-storage round trip at ckpt_path. A node that
    does not answer in time is reported as such (`"error"`), never left out."""
    import ray

    found = agents(version)
    ids = list(found)
    refs = {node_id: found[node_id][1].facts.remote(spec) for node_id in ids}
    report: dict[str, Any] = {}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
    done = set(ready)
    for node_id, ref in refs.items():
        ip = found[node_id][0]
        if ref not in done:
            report[node_id] = {"ip": ip, "error": f"no answer in {timeout:g}s"}
            continue
        try:
            report[node_id] = {"ip": ip, **ray.get(ref)}
        except Exception as exc:  # noqa: BLE001 - the node's look failed: say how
            report[node_id] = {"ip": ip, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    ckpt, nonce = spec.get("ckpt_path"), spec.get("nonce")
    answering = [n for n in ids if "error" not in report[n]]
    if ckpt and nonce and answering:
        wrote = _each(ray, {n: found[n][1].write_mark.remote(ckpt, nonce, n) for n in answering}, timeout)
        written = [n for n in answering if wrote.get(n) == ""]
        seen = _each(ray, {n: found[n][1].read_marks.remote(ckpt, nonce, written) for n in answering}, timeout)
        _each(ray, {n: found[n][1].clean_marks.remote(ckpt, nonce, n) for n in answering}, timeout)
        for node_id in answering:
            problem = wrote.get(node_id, f"no answer in {timeout:g}s")
            report[node_id]["shared"] = {"write_error": problem or "", "sees": seen.get(node_id) or [], "written": written}
    return report


def _each(ray: Any, refs: dict[str, Any], timeout: float) -> dict[str, Any]:
    """{node_id: result} of the calls that answered in time (one hung node is left out, named by the caller)."""
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
    done, out = set(ready), {}
    for node_id, ref in refs.items():
        if ref in done:
            try:
                out[node_id] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - that node's call failed: its result is the error
                out[node_id] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def main() -> None:
    import ray

    spec = json.loads(sys.argv[1])
    ray.init()
    nodes = every_node(spec, str(spec.get("version", "0")), float(spec.get("timeout", 30)))
    print(MARKER, json.dumps({"nodes": nodes}), flush=True)
    sys.stdout.flush()
    os._exit(0)  # the result is out; Ray's shutdown at exit would add a second or two


if __name__ == "__main__":
    main()
