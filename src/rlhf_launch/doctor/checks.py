"""Judge what every node reported (cluster/probes/doctor.py `facts`) against what the run
needs (doctor/spec.py `Needs`): pure. One row per check, one cell per node (pass, warn, fail,
n/a), and a finding for every cell that is not a pass, naming the node, the value found, the
value wanted and the fix. What a node cannot report is a warning saying so, never a pass.

The checks are data: CHECKS lists each with its name (what `--skip-check` takes), what it
looks at and the function that judges one node, given every node's facts.
"""

from __future__ import annotations

import functools
import ipaddress
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core import gpus
from rlhf_launch.core.findings import Finding
from rlhf_launch.doctor.spec import Needs
from rlhf_launch.util import versions
from rlhf_launch.util.enums import StrEnum
from rlhf_launch.util.versions import Version

GIB = 1024**3
SHM_MIN = 1 * GIB  # below this NCCL's shared-memory transport and vLLM TP fail (Docker's default is 64 MB)
SHM_GOOD = 10 * GIB
NOFILE_MIN = 4096
NOFILE_GOOD = 16384
HOST_HEADROOM = 0.10


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NA = "n/a"


@dataclass(frozen=True)
class Result:
    """One thing a check found on a node (a pass needs no words)."""

    status: Status
    found: str = ""
    wanted: str = ""
    fix: str = ""


@dataclass(frozen=True)
class NodeFinding:
    check: str
    node: str
    status: Status
    found: str
    wanted: str = ""
    fix: str = ""

    @property
    def level(self) -> str:
        return "error" if self.status is Status.FAIL else "warning"

    def text(self) -> str:
        wanted = f"; wanted {self.wanted}" if self.wanted else ""
        return f"{self.node}: {self.found}{wanted}"

    def as_finding(self) -> Finding:
        return Finding("error" if self.status is Status.FAIL else "warning", f"doctor.{self.check}", self.text(), self.fix)

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "node": self.node, "level": self.level, "found": self.found, "wanted": self.wanted, "fix": self.fix}


@dataclass(frozen=True)
class Node:
    node_id: str
    ip: str
    facts: dict[str, Any]
    gpus: float | None = None  # as Ray reports them; None: not known (judged as a GPU node)

    @property
    def name(self) -> str:
        return self.ip or self.node_id[:8]

    @property
    def answered(self) -> bool:
        return "error" not in self.facts


@dataclass(frozen=True)
class Context:
    needs: Needs
    nodes: tuple[Node, ...]
    host_need: dict[str, float] = field(default_factory=dict)  # node_id -> host GiB the placement puts there
    host_fix: dict[str, str] = field(default_factory=dict)  # node_id -> the hint naming the settings that put it there

    @functools.cached_property
    def answering(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.answered)

    @functools.cached_property
    def hosts(self) -> int:
        """How many machines the answering nodes are on."""
        return len({n.facts.get("host") for n in self.answering})

    @functools.cached_property
    def versions(self) -> dict[str, Counter[str]]:
        """Package (and "python", as major.minor) -> how many answering nodes have each version."""
        out: dict[str, Counter[str]] = {}
        for node in self.answering:
            for name, info in (node.facts.get("packages") or {}).items():
                if (info or {}).get("version"):
                    out.setdefault(name, Counter())[_canonical(info["version"])] += 1
            out.setdefault("python", Counter())[_minor(node.facts.get("python"))] += 1
        return out

    def odd_one(self, name: str, version: str) -> str | None:
        """The version most nodes have, when `version` is not it (on a tie, every node is odd)."""
        counts = self.versions.get(name) or Counter()
        if len(counts) < 2:
            return None
        top = counts.most_common()
        tie = len(top) > 1 and top[0][1] == top[1][1]
        mine = counts.get(version, 0)
        if tie or mine < top[0][1]:
            return next(v for v, _ in top if v != version)
        return None


Judge = Callable[[Node, Context], list[Result]]


@dataclass(frozen=True)
class Check:
    name: str
    looks_at: str
    judge: Judge
    gpu_nodes_only: bool = False  # n/a on a node without GPUs (a CPU-only head runs the driver, no rank)


def _ok() -> list[Result]:
    return [Result(Status.PASS)]


def _version(text: str | None) -> Version | None:
    return versions.maybe(text)


def _canonical(text: str) -> str:
    version = _version(text)
    return str(version) if version is not None else text


def _minor(text: Any) -> str:
    return ".".join(str(text or "?").split(".")[:2])


def _same_release(installed: str, wanted: str) -> bool:
    """`0.11.2+cu128`, `0.11.2.dev3`: a local or development build of the same release."""
    a, b = _version(installed), _version(wanted)
    return a is not None and b is not None and a.release == b.release and a.post == b.post


def _same(a: str | None, b: str | None) -> bool:
    va, vb = _version(a), _version(b)
    return va == vb if va is not None and vb is not None else a == b


# ---------------------------------------------------------------- software


def wanted_of(name: str, need: Needs) -> str:
    """The version the run wants of a package ("" when the release pins none)."""
    return need.openrlhf if name == "openrlhf" else need.pins.get(name, "")


def _fork(need: Needs, facts: dict[str, Any]) -> list[Result]:
    """The fork the flags were read from, on this node: the same train_ppo_ray.py (by hash), as
    a release must be the same release. A fork in the job's working_dir ships with the job."""
    if need.fork_shipped:
        return []
    files = "train_ppo_ray.py" + (f" and {', '.join(need.fork_modules)}" if need.fork_modules else "")
    wanted = f"the fork at {need.fork_root} ({files} sha256 {need.fork_sha256[:12] if need.fork_sha256 else ''})"
    found = facts.get("openrlhf_trainer_sha256")
    where = ((facts.get("packages") or {}).get("openrlhf") or {}).get("module_at") or "the trainer's path"
    if found == need.fork_sha256:
        return []
    if found is None:
        what = f"no openrlhf/cli/train_ppo_ray.py at {where}"
    else:
        what = f"openrlhf at {where} has another {files} (sha256 {found[:12]})"
    return [
        Result(
            Status.FAIL,
            f"{what}: not the fork the flags were read from, so the trainer may refuse them",
            wanted,
            f"install the same checkout on every node (pip install -e {need.fork_root}), or ship it as runtime_env.working_dir",
        )
    ]


def software(node: Node, ctx: Context) -> list[Result]:
    need, facts = ctx.needs, node.facts
    packages: dict[str, Any] = facts.get("packages", {})
    out: list[Result] = []
    for name in need.packages:
        info = packages.get(name) or {}
        version = info.get("version")
        if name == "openrlhf" and need.fork_sha256:
            out += _fork(need, facts)
            continue
        if version is None and not info.get("module"):
            out.append(
                Result(
                    Status.FAIL,
                    f"{name} is not installed",
                    wanted_of(name, need) or "installed",
                    f"install it in the node's image (pip install '{name}{'==' + wanted_of(name, need) if wanted_of(name, need) else ''}')",
                )
            )
            continue
        if version is None:
            out.append(
                Result(
                    Status.WARN,
                    f"{name} at {info.get('module_at')} has no package metadata: its version is not known",
                    "",
                    "install it as a package (pip install -e) so its version can be checked",
                )
            )
            continue
        wanted = wanted_of(name, need)
        if wanted and not _same(version, wanted):
            if name == "openrlhf" and _same_release(version, wanted):
                out.append(Result(Status.WARN, f"openrlhf {version}, a build of {wanted} (flags rendered for {wanted})", wanted, ""))
            elif name == "openrlhf":
                out.append(
                    Result(
                        Status.FAIL,
                        f"openrlhf {version} is installed, but the flags are rendered for {wanted} (the trainer would refuse them)",
                        wanted,
                        f"set openrlhf.version={version}, or install openrlhf=={wanted} on the node",
                    )
                )
            else:
                out.append(
                    Result(
                        Status.WARN, f"{name} {version} (openrlhf {need.openrlhf} pins {wanted})", wanted, f"pip install '{name}=={wanted}'"
                    )
                )
    python = _minor(facts.get("python"))
    other_python = ctx.odd_one("python", python)
    if other_python is not None:
        out.append(
            Result(
                Status.FAIL,
                f"Python {facts.get('python')}, but other nodes have {other_python}",
                f"Python {other_python}",
                "use one image on every node",
            )
        )
    for name in dict.fromkeys((*need.packages, "ray")):
        mine = (packages.get(name) or {}).get("version")
        majority = ctx.odd_one(name, _canonical(mine)) if mine else None
        if majority is not None:
            out.append(
                Result(
                    Status.FAIL,
                    f"{name} {mine}, but other nodes have {majority}",
                    f"{name} {majority} as on the other nodes",
                    "use one image on every node",
                )
            )
    imports: dict[str, str] = facts.get("imports") or {}
    torch_fails = bool(imports.get("torch"))
    for name in sorted(imports, key=lambda n: n != "torch"):  # torch first: the others import it
        problem = imports[name]
        if not problem:
            continue
        if name == "torch":
            fix = "reinstall torch in the node's image (pip install --force-reinstall torch); every other package imports it"
        elif torch_fails:
            fix = "fix torch first (above): this package imports it"
        else:
            fix = "reinstall it against the node's torch (a flash-attn or vLLM built for another torch fails like this)"
        out.append(Result(Status.FAIL, f"`import {name.replace('-', '_')}` ({name}) fails: {problem}", "it imports", fix))
    return out or _ok()


# ---------------------------------------------------------------- models and data


def models(node: Node, ctx: Context) -> list[Result]:
    found: dict[str, Any] = node.facts.get("models", {})
    if not found:
        return [Result(Status.NA)]
    out: list[Result] = []
    for role, info in sorted(found.items()):
        key = f"models.{role}"
        if info.get("kind") == "local":
            path = info.get("path")
            if not info.get("exists"):
                out.append(
                    Result(
                        Status.FAIL,
                        f"{key}: {path} does not exist on this node (the trainer would take it for a hub id)",
                        "the model directory on every node",
                        "copy the model to this node, or put it on shared storage",
                    )
                )
                continue
            out += _model_files(key, str(path), info, ctx)
            continue
        if info.get("cached"):
            out += _model_files(key, str(info.get("cache")), info, ctx)
        elif info.get("offline"):
            out.append(
                Result(
                    Status.FAIL,
                    f"{key}: not in this node's HF cache ({info.get('cache')}) and HF_HUB_OFFLINE is set",
                    "the model in the cache",
                    "download it on this node (huggingface-cli download), or unset HF_HUB_OFFLINE",
                )
            )
        else:
            gated = "" if info.get("token") else "; no HF_TOKEN reaches the trainer, so a gated model cannot be downloaded"
            out.append(
                Result(
                    Status.WARN,
                    f"{key}: not in this node's HF cache; it is downloaded at start (hub reachability not checked){gated}",
                    "",
                    "pre-download it on every node (or shared storage) so a 70B download does not delay every attempt",
                )
            )
    return out or _ok()


def _model_files(key: str, path: str, info: dict[str, Any], ctx: Context) -> list[Result]:
    out = []
    if not info.get("config"):
        out.append(
            Result(
                Status.FAIL,
                f"{key}: {path} has no config.json",
                "a Hugging Face model directory",
                "point it at the directory holding config.json",
            )
        )
    missing = info.get("missing_shards") or []
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        out.append(
            Result(
                Status.FAIL,
                f"{key}: {info.get('index')} names shards missing here: {shown}",
                "every shard",
                "copy the missing shards (an interrupted download or rsync)",
            )
        )
    elif not info.get("weights") and info.get("config"):
        out.append(Result(Status.FAIL, f"{key}: {path} has no weights (*.safetensors / *.bin)", "the weights", "download the whole model"))
    if not info.get("tokenizer") and key.startswith("models.actor"):
        out.append(
            Result(
                Status.FAIL,
                f"{key}: {path} has no tokenizer files",
                "tokenizer.json or tokenizer.model",
                "copy the tokenizer files beside the weights",
            )
        )
    if info.get("chat_template") is False and key.startswith("models.actor"):
        out.append(
            Result(
                Status.FAIL,
                f"{key}: data.apply_chat_template is on but {path} has no chat template",
                "a chat_template in tokenizer_config.json",
                "use an instruct model, or set data.apply_chat_template=false",
            )
        )
    return out


def data(node: Node, ctx: Context) -> list[Result]:
    found: dict[str, Any] = node.facts.get("datasets", {})
    files: dict[str, bool] = node.facts.get("files", {})
    if not found and not files:
        return [Result(Status.NA)]
    out: list[Result] = []
    for key, entries in sorted(found.items()):
        for info in entries:
            name = info.get("name")
            if info.get("kind") == "local":
                if not info.get("exists"):
                    out.append(
                        Result(
                            Status.FAIL,
                            f"{key}: {info.get('path')} does not exist on this node",
                            "the dataset on every node",
                            "copy it to this node, or put it on shared storage",
                        )
                    )
                elif info.get("missing_keys"):
                    keys = ", ".join(info["missing_keys"])
                    have = ", ".join(info.get("keys", []))
                    out.append(
                        Result(
                            Status.FAIL,
                            f"{key}: records of {name} have no {keys} (they have: {have})",
                            "data.input_key / data.label_key among the record's fields",
                            "set data.input_key (and data.label_key) to the dataset's field names",
                        )
                    )
                elif info.get("unreadable"):
                    out.append(
                        Result(
                            Status.WARN, f"{key}: the first record of {info['unreadable']} could not be read as JSON", "", "check the file"
                        )
                    )
            elif not info.get("cached"):
                level = Status.FAIL if info.get("offline") else Status.WARN
                out.append(
                    Result(
                        level,
                        f"{key}: {name} is not in this node's HF cache"
                        + (
                            " and HF_HUB_OFFLINE is set"
                            if info.get("offline")
                            else "; it is downloaded at start (hub reachability not checked)"
                        ),
                        "",
                        "pre-download it, or give a local path",
                    )
                )
    for path, present in sorted(files.items()):
        if not present:
            out.append(
                Result(
                    Status.FAIL,
                    f"reward file {path} does not exist on this node",
                    "the file on every node",
                    "copy it there, or use models.reward_func (shipped with the job)",
                )
            )
    return out or _ok()


# ---------------------------------------------------------------- the node itself


def shm(node: Node, ctx: Context) -> list[Result]:
    size = (node.facts.get("shm") or {}).get("bytes")
    if size is None:
        return [Result(Status.FAIL, "/dev/shm is missing", "at least 10 GiB", "mount a tmpfs at /dev/shm (docker run --shm-size 32g)")]
    if size < SHM_MIN:
        return [
            Result(
                Status.FAIL,
                f"/dev/shm is {_size(size)} (NCCL and vLLM tensor parallelism crash on it)",
                "at least 10 GiB",
                "docker run --shm-size 32g (Docker's default is 64 MB), or Kubernetes: an emptyDir of medium Memory at /dev/shm",
            )
        ]
    if size < SHM_GOOD:
        return [Result(Status.WARN, f"/dev/shm is {_size(size)}", "at least 10 GiB", "docker run --shm-size 32g")]
    return _ok()


def limits(node: Node, ctx: Context) -> list[Result]:
    found = node.facts.get("limits") or {}
    nofile, nproc = found.get("nofile"), found.get("nproc")
    out = []
    if nofile is not None and nofile < NOFILE_MIN:
        out.append(
            Result(
                Status.FAIL,
                f"ulimit -n is {nofile} (Ray and DeepSpeed fail with `Too many open files`)",
                f"at least {NOFILE_GOOD}",
                "raise it (docker run --ulimit nofile=1048576:1048576, or limits.conf)",
            )
        )
    elif nofile is not None and nofile < NOFILE_GOOD:
        out.append(
            Result(
                Status.WARN, f"ulimit -n is {nofile}", f"at least {NOFILE_GOOD}", "raise it (docker run --ulimit nofile=1048576:1048576)"
            )
        )
    if nproc is not None and nproc < NOFILE_MIN:
        out.append(
            Result(
                Status.WARN,
                f"ulimit -u is {nproc} (every rank starts many threads)",
                f"at least {NOFILE_MIN}",
                "raise it (docker run --ulimit nproc=65535)",
            )
        )
    return out or _ok()


def _matches(spec: str, names: list[str]) -> tuple[list[str], str]:
    """NCCL's interface / HCA list syntax: `^` excludes, `=` matches exactly, else prefixes;
    an HCA may carry `:port`. -> (the names it selects, the list as written)."""
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    items = [item.split(":", 1)[0].strip() for item in text.split(",") if item.strip()]

    def hit(name: str) -> bool:
        return any(name == item if exact else name.startswith(item) for item in items)

    chosen = [n for n in names if not hit(n)] if exclude else [n for n in names if hit(n)]
    return chosen, spec


# Interfaces no other node reaches the node through: loopback, and the kernel's traffic-shaping,
# tunnel and container/VM bridge devices (a pod or VM network is private to the host).
VIRTUAL_PREFIXES: tuple[str, ...] = ("lo", "ifb", "docker", "veth", "virbr", "br-", "tun", "tap", "cni", "flannel", "cali", "cilium")
VIRTUAL_PREFIXES += ("vxlan", "dummy", "lxc", "lxd", "podman", "kube-ipvs", "nodelocaldns", "weave")


def _routable(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def _one_of(names: list[str], node: Node) -> str:
    if not names:
        return f"the interface that holds {node.name} (this node has none other nodes can reach)"
    return names[0] if len(names) == 1 else "one of " + ", ".join(names)


def reachable_interfaces(node: Node) -> list[str]:
    """The interfaces other nodes can reach this node through, the one holding the node's Ray
    address first: an address that is not loopback or link-local, on a device that is no
    loopback, traffic-shaping (ifb), tunnel or container/VM bridge, unless it holds the Ray
    address. Without the probe's addresses (an older agent), by name only."""
    names: list[str] = node.facts.get("interfaces") or []
    held: dict[str, list[str]] | None = node.facts.get("addresses")
    ray_ip = node.ip.split("%")[0]
    own = [n for n in names if held is not None and ray_ip in held.get(n, [])]
    rest = [
        n
        for n in names
        if n not in own and not n.startswith(VIRTUAL_PREFIXES) and (held is None or any(_routable(a) for a in held.get(n, [])))
    ]
    return own + rest


def network(node: Node, ctx: Context) -> list[Result]:
    facts = node.facts
    env = facts.get("env") or {}
    names: list[str] = facts.get("interfaces") or []
    out: list[Result] = []
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        value = env.get(var)
        if value:
            chosen, _ = _matches(value, names)
            if not chosen:
                out.append(
                    Result(
                        Status.FAIL,
                        f"{var}={value} selects no interface of this node (it has: {', '.join(names)})",
                        "an interface this node has",
                        f"set {var} to {_one_of(reachable_interfaces(node), node)} (runtime_env.env_vars or join --socket-ifname)",
                    )
                )
    hca = env.get("NCCL_IB_HCA")
    devices: list[str] = facts.get("hcas") or []
    if hca and str(env.get("NCCL_IB_DISABLE", "0")) not in ("1", "true"):
        if not devices:
            out.append(
                Result(
                    Status.WARN,
                    f"NCCL_IB_HCA={hca} but this node has no InfiniBand devices: NCCL falls back to TCP sockets",
                    "",
                    "unset NCCL_IB_HCA on nodes without InfiniBand, or pass /dev/infiniband into the container",
                )
            )
        elif not _matches(hca, devices)[0]:
            out.append(
                Result(
                    Status.FAIL,
                    f"NCCL_IB_HCA={hca} selects no HCA of this node (it has: {', '.join(devices)})",
                    "an HCA this node has",
                    f"set NCCL_IB_HCA to one of {', '.join(devices)}",
                )
            )
    if ctx.hosts > 1 and _bridge(node.ip) and "docker0" in names:
        out.append(
            Result(
                Status.WARN,
                f"the node advertises {node.ip}, in the range of Docker's default bridge, and has docker0: other machines may not reach it",
                "the address of a real interface",
                "start it with --node-ip-address ADDRESS (in Docker: --network host)",
            )
        )
    if ctx.hosts > 1 and _unroutable(node.ip):
        out.append(
            Result(
                Status.FAIL,
                f"the node advertises {node.ip}, which other machines cannot reach ({ctx.hosts} machines in this cluster)",
                "an address of a real interface",
                "start it with --node-ip-address ADDRESS (in Docker: --network host)",
            )
        )
    return out or _ok()


def _unroutable(ip: str) -> bool:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return address.is_loopback


def _bridge(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network("172.17.0.0/16")
    except ValueError:
        return False


def memory(node: Node, ctx: Context) -> list[Result]:
    found = node.facts.get("memory") or {}
    total = found.get("total")
    need = ctx.host_need.get(node.node_id, ctx.needs.host_gib if not ctx.host_need else 0.0)
    if total is None:
        return [Result(Status.WARN, "host RAM not reported", f"{need:.0f} GiB", "")]
    if need <= 0:
        return _ok()
    if need > total:
        return [
            Result(
                Status.FAIL,
                f"{total:.0f} GiB host RAM, but the plan puts ~{need:.0f} GiB here (offloaded optimizer states and weights)",
                f"{need:.0f} GiB",
                ctx.host_fix.get(node.node_id) or "spread the training roles over more nodes, or offload less",
            )
        ]
    if need > total * (1 - HOST_HEADROOM):
        return [
            Result(
                Status.WARN,
                f"{total:.0f} GiB host RAM for ~{need:.0f} GiB the plan puts here: under {HOST_HEADROOM:.0%} headroom",
                f"{need / (1 - HOST_HEADROOM):.0f} GiB",
                "",
            )
        ]
    return _ok()


def gpu(node: Node, ctx: Context) -> list[Result]:
    """GPU memory against the plan, and the GPU type against cluster.gpu."""
    return _gpu_memory(node, ctx) + gpu_type(node, ctx)


def gpu_type(node: Node, ctx: Context) -> list[Result]:
    """The type nvidia-smi names (core/gpus.py from_smi) against cluster.gpu: the memory plan
    and the step-time estimate use that type's figures. A type the table lacks is said only
    while cluster.gpu is unset (set, it names the closest type on purpose)."""
    found = node.facts.get("gpu") or {}
    products = sorted({str(g.get("name", "")) for g in found.get("gpus", []) if g.get("name")}) if found.get("reported") else []
    configured, assumed = ctx.needs.gpu_type, ctx.needs.gpu_assumed
    out: list[Result] = []
    for product in products:
        kind = gpus.from_smi(product)
        if kind is None:
            if configured is None:
                known = ", ".join(g.name for g in gpus.GPUS)
                out.append(
                    Result(
                        Status.WARN,
                        f"nvidia-smi names {product!r}, a GPU the step-time estimate's table does not know; "
                        f"cluster.gpu is unset, so the estimate assumes {assumed}",
                        "cluster.gpu",
                        f"set cluster.gpu to the closest of: {known}",
                    )
                )
            continue
        if configured is None:
            out.append(
                Result(
                    Status.WARN,
                    f"nvidia-smi names {product!r} ({kind.name}); cluster.gpu is unset, so the step-time estimate assumes {assumed}"
                    + ("" if kind.name == assumed else f", not {kind.name}"),
                    f"cluster.gpu={kind.name}",
                    f"set cluster.gpu={kind.name}",
                )
            )
        elif kind.name != configured:
            out.append(
                Result(
                    Status.WARN,
                    f"nvidia-smi names {product!r} ({kind.name}), but cluster.gpu is {configured}: the memory plan and the "
                    f"step-time estimate use {configured}'s figures",
                    f"cluster.gpu={kind.name}",
                    f"set cluster.gpu={kind.name}",
                )
            )
    return out or _ok()


def _gpu_memory(node: Node, ctx: Context) -> list[Result]:
    found = node.facts.get("gpu") or {}
    if not found.get("reported"):
        return [
            Result(
                Status.WARN,
                f"GPU memory not reported ({found.get('why', 'unknown')}): the plan's {ctx.needs.gpu_gib:g} GiB per GPU is not checked",
                "",
                "",
            )
        ]
    sizes = [g["memory_gib"] for g in found.get("gpus", [])]
    if not sizes:
        return [Result(Status.WARN, "nvidia-smi lists no GPUs", "", "")]
    smallest = min(sizes)
    peak = ctx.needs.gpu_peak_gib
    if peak is not None and peak > smallest:
        return [
            Result(
                Status.FAIL,
                f"GPUs of {smallest:.0f} GiB, but the plan needs {peak:.1f} GiB per GPU",
                f"{peak:.1f} GiB",
                f"set cluster.gpu_memory_gb={smallest:.0f} and shrink the layout's memory (plan shows by how much)",
            )
        ]
    if smallest + 1 < ctx.needs.gpu_gib:
        return [
            Result(
                Status.WARN,
                f"GPUs of {smallest:.0f} GiB; the config says cluster.gpu_memory_gb {ctx.needs.gpu_gib:g}",
                f"{ctx.needs.gpu_gib:g} GiB",
                f"set cluster.gpu_memory_gb={smallest:.0f}",
            )
        ]
    return _ok()


def disk(node: Node, ctx: Context) -> list[Result]:
    found = node.facts.get("disk")
    if not found:
        return [Result(Status.NA)]
    need, path = ctx.needs.storage_bytes, ctx.needs.ckpt_path
    out = []
    if not found.get("writable"):
        out.append(
            Result(
                Status.FAIL,
                f"{found.get('base')} (where ckpt_path {path} goes) is not writable here",
                "write access",
                "fix the permissions, or choose another checkpoint.ckpt_path",
            )
        )
    free = found.get("free_bytes")
    if free is None:
        out.append(Result(Status.WARN, f"free space at {found.get('base')} not reported ({found.get('error', '')})", "", ""))
    elif need is None:
        out.append(
            Result(
                Status.WARN,
                f"{_size(free)} free at {found.get('base')}; the checkpoints' size is not known (model shape unknown)",
                "",
                "set models.params_billion so the budget can be checked",
            )
        )
    elif need > free:
        out.append(
            Result(
                Status.FAIL,
                f"{_size(free)} free at {found.get('base')}, but the checkpoints need {_size(need)} "
                "(ZeRO checkpoints x max_num, + an HF export)",
                _size(need),
                "free space, lower checkpoint.max_num, or choose a larger volume for checkpoint.ckpt_path",
            )
        )
    if not path.startswith(("/", "~")):
        out.append(
            Result(
                Status.WARN,
                f"ckpt_path {path} is relative: it resolves in each job's working directory, which can change between attempts",
                "an absolute path",
                "give checkpoint.ckpt_path as an absolute path on shared storage",
            )
        )
    return out or _ok()


def shared(node: Node, ctx: Context) -> list[Result]:
    if not ctx.needs.multi_node or len(ctx.answering) < 2:
        return [Result(Status.NA)]
    found = node.facts.get("shared")
    if not found:
        return [Result(Status.WARN, "the shared-storage round trip did not run here", "", "")]
    if found.get("write_error"):
        return [
            Result(
                Status.FAIL,
                f"cannot write at ckpt_path: {found['write_error']}",
                "write access",
                "fix the permissions, or choose another checkpoint.ckpt_path",
            )
        ]
    sees = set(found.get("sees") or [])
    written = set(found.get("written") or [n.node_id for n in ctx.answering])
    missing = [
        n.name for n in ctx.answering if n.node_id in written and n.node_id not in sees and n.node_id != node.node_id and n.gpus != 0
    ]
    if missing:
        return [
            Result(
                Status.FAIL,
                f"ckpt_path {ctx.needs.ckpt_path} is not shared: this node does not see what {', '.join(missing[:4])} wrote there",
                "the same storage on every node",
                "mount shared storage (NFS, Lustre, ...) at the same path on every node: "
                "a multi-node DeepSpeed checkpoint is written by every node",
            )
        ]
    return _ok()


def checkpoints(node: Node, ctx: Context) -> list[Result]:
    listing = node.facts.get("checkpoints") or {}
    roles = listing.get("roles") or {}
    actor = roles.get("_actor")
    if not actor:
        return _ok()
    latest = actor.get("latest") or "no latest"
    return [
        Result(
            Status.WARN,
            f"ckpt_path already holds checkpoints (_actor/{latest}): a new run is refused there",
            "",
            "resume the run that wrote them, choose another checkpoint.ckpt_path, or submit --move-checkpoints-aside",
        )
    ]


CHECKS: tuple[Check, ...] = (
    Check(
        "software",
        "openrlhf against the rendered release; vllm, deepspeed, transformers, flash-attn against its pins; "
        "all of them, ray and Python the same on every node; --deep: each imports",
        software,
    ),
    Check(
        "models",
        "every model directory (config, every shard the index names, tokenizer, chat template) or the hub id in the node's HF cache",
        models,
        gpu_nodes_only=True,
    ),
    Check("data", "the prompt and eval datasets (records have input_key and label_key), reward files", data, gpu_nodes_only=True),
    Check("shm", "/dev/shm size", shm, gpu_nodes_only=True),
    Check("limits", "ulimit -n and -u", limits),
    Check(
        "network",
        "NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and NCCL_IB_HCA name what the node has; addresses other machines can reach",
        network,
    ),
    Check("memory", "host RAM against what the plan puts on the node", memory),
    Check("gpu", "GPU memory and type (nvidia-smi) against the plan and cluster.gpu", gpu, gpu_nodes_only=True),
    Check("disk", "write access and free space at ckpt_path against the checkpoint budget", disk, gpu_nodes_only=True),
    Check("shared", "ckpt_path is the same storage on every node (a file round trip), for multi-node runs", shared, gpu_nodes_only=True),
    Check("checkpoints", "checkpoints already at ckpt_path", checkpoints),
)
NAMES = tuple(c.name for c in CHECKS)


@dataclass(frozen=True)
class Report:
    nodes: tuple[Node, ...]
    cells: dict[tuple[str, str], Status]  # (check, node_id) -> status
    findings: tuple[NodeFinding, ...]
    skipped: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(f.status is Status.FAIL for f in self.findings)

    def failed(self) -> list[NodeFinding]:
        return [f for f in self.findings if f.status is Status.FAIL]

    def as_findings(self) -> list[Finding]:
        return [f.as_finding() for f in self.findings]

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 2),
            "nodes": [{"node_id": n.node_id, "ip": n.ip, "answered": n.answered} for n in self.nodes],
            "checks": {
                check: {n.ip or n.node_id: str(self.cells[(check, n.node_id)]) for n in self.nodes if (check, n.node_id) in self.cells}
                for check in NAMES
                if check not in self.skipped
            },
            "skipped": list(self.skipped),
            "findings": [f.as_dict() for f in self.findings],
        }


def judge(
    needs: Needs,
    nodes: list[Node],
    *,
    host_need: dict[str, float] | None = None,
    host_fix: dict[str, str] | None = None,
    skip: tuple[str, ...] = (),
    seconds: float = 0.0,
) -> Report:
    """Every check on every node. A node that did not answer fails every check it was asked."""
    ctx = Context(needs, tuple(nodes), host_need or {}, host_fix or {})
    cells: dict[tuple[str, str], Status] = {}
    findings: list[NodeFinding] = []
    for node in nodes:
        if not node.answered:
            findings.append(
                NodeFinding(
                    "node",
                    node.name,
                    Status.FAIL,
                    f"did not answer ({node.facts['error']})",
                    "an answer",
                    "check the node (rlhf-launch status); a node that cannot answer a probe cannot run a trainer",
                )
            )
    for check in CHECKS:
        if check.name in skip:
            continue
        for node in nodes:
            if not node.answered:
                cells[(check.name, node.node_id)] = Status.FAIL
                continue
            if check.gpu_nodes_only and node.gpus == 0:
                cells[(check.name, node.node_id)] = Status.NA
                continue
            results = check.judge(node, ctx)
            worst = max((r.status for r in results), key=_rank)
            cells[(check.name, node.node_id)] = worst
            findings += [
                NodeFinding(check.name, node.name, r.status, r.found, r.wanted, r.fix)
                for r in results
                if r.status in (Status.FAIL, Status.WARN)
            ]
    return Report(tuple(nodes), cells, tuple(_merge(findings)), skip, seconds)


def _rank(status: Status) -> int:
    return {Status.NA: 0, Status.PASS: 1, Status.WARN: 2, Status.FAIL: 3}[status]


def _merge(findings: list[NodeFinding]) -> list[NodeFinding]:
    """One finding for what every node reports alike (the same words), naming the nodes."""
    groups: dict[tuple[str, Status, str, str, str], list[str]] = {}
    for f in findings:
        groups.setdefault((f.check, f.status, f.found, f.wanted, f.fix), []).append(f.node)
    out = []
    for (check, status, found, wanted, fix), nodes in groups.items():
        where = nodes[0] if len(nodes) == 1 else f"{len(nodes)} nodes ({', '.join(nodes[:4])}{', ...' if len(nodes) > 4 else ''})"
        out.append(NodeFinding(check, where, status, found, wanted, fix))
    return sorted(out, key=lambda f: (f.status is not Status.FAIL, NAMES.index(f.check) if f.check in NAMES else -1))


def _size(n: float) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
