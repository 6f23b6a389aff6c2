"""The run as KubeRay manifests: a `RayCluster` sized from the plan, or (`rayjob`) a `RayJob`
whose entrypoint is the launcher's own submit and supervision. Pure: config, plan and options
in, manifest dicts out (`render` writes them as multi-document YAML); nothing here talks to
Kubernetes or Ray. Field names and rules are KubeRay v1.7.0's (ray-operator/apis/ray/v1,
controllers/ray/utils/validation.go); tests validate every manifest against its CRDs and
the core Kubernetes schemas.

The shape:
- The head is a GPU node like every worker, as `rlhf-launch up --head` makes it: the config's
  `cluster.nodes` counts GPU nodes, the plan and its placement simulation put roles on all of
  them, and the trainer's PACK placement groups fill the head's GPUs too. So one head plus a
  worker group of `nodes - 1` pods (replicas = minReplicas = maxReplicas, no autoscaler; none
  for one node), every pod alike: `nvidia.com/gpu` = `cluster.gpus_per_node`, requests =
  limits for every resource (Guaranteed QoS: evicted last, and the only class whose CPUs the
  topology manager aligns with the GPUs and NICs).
- Memory: PACK may put the busiest node's roles on any pod, so each asks for the plan's
  busiest node (core/memory.py host need: offloaded optimizer states, sleeping vLLM weights)
  plus HOST_HEADROOM, a process floor per GPU, Ray's own processes, and /dev/shm: a tmpfs
  counts against the pod's memory limit (bringup/sizing.py; the sbatch script's --mem uses it too).
- /dev/shm: KubeRay mounts a memory emptyDir sized to the memory limit (pod.go
  makeEmptyDirVolume) unless one is there; Ray then sizes its object store from it (30% of
  memory, capped by /dev/shm), and the object store can fill the tmpfs NCCL and vLLM need.
  So the object store is set (`object-store-memory`) and /dev/shm mounted explicitly at
  OBJECT_STORE_GIB + SHM_NEED_GIB (NCCL's shared-memory transport, vLLM's and PyTorch's
  inter-process tensors; the figure is the doctor's pass mark, doctor/checks.py SHM_GOOD).
- InfiniBand: when the config's runtime_env sets NCCL_IB_HCA (and NCCL_IB_DISABLE is not 1)
  or `rdma_resource` is given, each pod asks for the RDMA device plugin's resource and
  IPC_LOCK (RDMA pins memory). The config's NCCL_* variables go on every container too.
- Token auth: `authOptions.mode: token` (KubeRay >= 1.5.1 with Ray >= 2.52): the operator makes
  a Secret named after the cluster (key `auth_token`) and puts RAY_AUTH_MODE / RAY_AUTH_TOKEN
  in every Ray container, which is where `rlhf-launch submit` in the head pod reads it.
- Checkpoints: the PVC is mounted at ckpt_path's parent directory on every pod (so a
  save_path beside it, as the presets have, lands on it too); ckpt_path must be absolute.
- Every other absolute path the config names (models, datasets, reward files, save_path) is
  mounted on every pod at the same path: from a PVC (`--volume PATH=CLAIM`) or else from the
  node's own path (hostPath: the shared storage the GPU nodes mount), read-only for models and
  data. A relative path or a hub id is no mount.
- Secrets: HF_TOKEN and WANDB_API_KEY come from the Secret `--secret` names, by secretKeyRef
  (never a value in the manifest); the HF cache (HF_HOME) is a volume, the PVC `--hf-cache`
  names or an emptyDir per pod.
- The RayJob: entrypoint `rlhf-launch submit ... --auto-resume N && rlhf-launch watch`
  (watch follows the run's supervisor to the end and exits non-zero unless the run succeeded
  or was stopped); `backoffLimit: 0` (a KubeRay retry makes a new RayCluster: fresh pods, a
  70B model loaded again; the supervisor resumes in place instead), no
  `activeDeadlineSeconds` (it kills multi-day runs), `shutdownAfterJobFinishes: false` (the
  cluster stays, with its logs). `submissionMode: HTTPMode`: the operator submits through
  the dashboard and reads the job's status from Ray; the default K8sJobMode (and SidecarMode)
  submitter tails `ray job logs --follow` and takes the end of that stream for the end of the
  job, so a dropped stream fails a running job (kuberay#1902, #2317, which names HTTPMode as
  the workaround; #4285, #4921).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from rlhf_launch.bringup.sizing import Sizing, sizing
from rlhf_launch.core import shipped
from rlhf_launch.core.launch import Launch
from rlhf_launch.doctor.checks import GIB
from rlhf_launch.errors import UserError
from rlhf_launch.util import versions

KUBERAY = "v1.7.0"  # the release whose CRDs the manifests are written for (tests/data/kuberay/)
TOKEN_AUTH_MIN_RAY = "2.52.0"  # KubeRay validation.go: authOptions.mode token needs Ray >= 2.52
MAX_CLUSTER_NAME = 53  # KubeRay MaxRayClusterNameLength
MAX_RAYJOB_NAME = 47  # MaxRayJobNameLength: the RayCluster it makes is named NAME-xxxxx
RDMA_RESOURCE = "rdma/rdma_shared_device_a"  # the NVIDIA Network Operator's shared RDMA device plugin
DASHBOARD = "http://127.0.0.1:8265"  # the dashboard as the head pod's own processes reach it
CONFIG_MOUNT = "/etc/rlhf-launch"
LABEL = "app.kubernetes.io/name"

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class K8sOptions:
    config: str  # what the RayJob's submit is given in the head pod: a preset name or a file name
    overrides: tuple[str, ...] = ()
    config_text: str | None = None  # a YAML file's text (not a preset): shipped to the head pod in a ConfigMap
    openrlhf_version: str | None = None
    name: str | None = None  # default: the config's name, as a DNS-1035 label
    namespace: str | None = None
    image: str | None = None  # default: rlhf-launch:<openrlhf version>, what docker/ builds
    ray_version: str | None = None  # the image's Ray (default: the release's pin, which docker/ installs)
    pvc: str | None = None
    rayjob: bool = False
    auto_resume: int = 3
    allow_fresh: bool = False
    skip_check: str = ""
    cpus: int | None = None  # per pod (default: CPUS_PER_GPU per GPU)
    rdma_resource: str | None = None  # NAME or NAME=COUNT; "none" turns it off
    secret: str | None = None  # a Secret with HF_TOKEN and/or WANDB_API_KEY: env of every container, never values here
    hf_cache: str | None = None  # a PVC for the HF cache (default: an emptyDir per pod)
    volumes: tuple[str, ...] = ()  # PATH=CLAIM: a config path from a PVC instead of the node's own path (hostPath)


FILE_SUFFIXES = (".json", ".jsonl", ".parquet", ".arrow", ".csv", ".py")  # a path mounted as a file (hostPath type File)
HF_CACHE_MOUNT = "/mnt/hf-cache"  # HF_HOME on every pod
SECRET_KEYS = ("HF_TOKEN", "WANDB_API_KEY")


@dataclass(frozen=True)
class Mount:
    """A config path on every pod: where, from what, and why."""

    path: str
    keys: tuple[str, ...]  # the config keys that name it (or a path under it)
    claim: str | None  # a PVC, else the node's own path (hostPath)
    host_type: str = "Directory"


@dataclass(frozen=True)
class Bringup:
    docs: list[dict[str, Any]]
    sizing: Sizing
    name: str
    notes: list[str] = field(default_factory=list)  # what the user should know (printed on stderr)

    @property
    def text(self) -> str:
        return render(self.docs)


def render(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=1000)


def default_image(launch: Launch) -> str:
    return f"rlhf-launch:{launch.flags.version}"


def config_paths(launch: Launch) -> dict[str, str]:
    """config key -> the local path it names (models, datasets, reward files, checkpoints),
    absolute paths only: a hub id is no path, a relative one lives in the pod's working dir."""
    cfg = launch.cfg
    out: dict[str, str] = {}
    for key in ("actor", "reward", "critic"):
        value = getattr(cfg.models, key)
        if value and value.startswith("/"):
            out[f"models.{key}"] = value
    for key in ("prompt_dataset", "eval_dataset"):
        value = getattr(cfg.data, key)
        for i, part in enumerate((value or "").split(",")):
            name = part.split("@", 1)[0].strip()
            if name.startswith("/"):
                out[f"data.{key}" + (f"[{i}]" if "," in (value or "") else "")] = name
    for i, url in enumerate(cfg.models.remote_urls):
        if url.startswith("/"):
            out[f"models.reward_remote_url[{i}]"] = url
    for key in ("ckpt_path", "save_path"):
        value = getattr(cfg.checkpoint, key)
        if PurePosixPath(value).is_absolute():
            out[f"checkpoint.{key}"] = value
    return out


def _mounts(launch: Launch, pvc: str | None, ckpt_mount: str | None, volumes: tuple[str, ...]) -> list[Mount]:
    """One mount per path the config names, none under another: the checkpoint PVC first, then
    each PATH=CLAIM given, then the node's own path (hostPath) for the rest."""
    claims: dict[str, str] = {}
    for item in volumes:
        path, sep, claim = item.partition("=")
        if not sep or not PurePosixPath(path).is_absolute() or not _SUBDOMAIN.match(claim):
            raise UserError(f"--volume {item!r} is not PATH=CLAIM", hint="e.g. --volume /mnt/shared/models=models-pvc")
        claims[str(PurePosixPath(path))] = claim
    mounts: list[Mount] = []
    if pvc is not None and ckpt_mount is not None:
        mounts.append(Mount(ckpt_mount, ("checkpoint.ckpt_path",), pvc))
    mounts += [Mount(path, (), claim) for path, claim in claims.items() if all(m.path != path for m in mounts)]
    for key, path in config_paths(launch).items():
        owner = next((m for m in mounts if _under(path, m.path)), None)
        if owner is not None:
            mounts[mounts.index(owner)] = Mount(owner.path, (*owner.keys, key), owner.claim, owner.host_type)
            continue
        is_file = PurePosixPath(path).suffix in FILE_SUFFIXES
        kind = "DirectoryOrCreate" if key.startswith("checkpoint.") else ("File" if is_file else "Directory")
        mounts.append(Mount(path, (key,), None, kind))
    return [m for m in mounts if m.keys]


def manifests(launch: Launch, opts: K8sOptions) -> Bringup:
    """The RayCluster (or the RayJob, and the ConfigMap holding a config file) for a launch."""
    cfg = launch.cfg
    notes: list[str] = []
    name = _name(opts.name or cfg.name, MAX_RAYJOB_NAME if opts.rayjob else MAX_CLUSTER_NAME, given=opts.name is not None)
    if opts.namespace is not None and not _DNS1123.match(opts.namespace):
        raise UserError(f"--namespace {opts.namespace!r} is not a Kubernetes namespace name", hint="lowercase letters, digits and '-'")
    ray_version = opts.ray_version or launch.flags.ray_pin
    if not ray_version:
        raise UserError(f"openrlhf {launch.flags.version} pins no Ray version", hint="pass --ray-version, the Ray of the image")
    try:
        too_old = versions.parse(ray_version) < versions.parse(TOKEN_AUTH_MIN_RAY)
    except ValueError:
        raise UserError(f"--ray-version {ray_version!r} is not a version", hint="e.g. --ray-version 2.55.0") from None
    if too_old:
        raise UserError(
            f"Ray {ray_version} (openrlhf {launch.flags.version}'s pin) is older than {TOKEN_AUTH_MIN_RAY}: "
            "KubeRay's token auth needs it, and so does rlhf-launch",
            hint=f"build docker/ with --build-arg RAY_VERSION=X (X >= {TOKEN_AUTH_MIN_RAY}) and pass --ray-version X",
        )
    size = sizing(launch, opts.cpus)
    if cfg.cluster.host_memory_gb is not None and size.memory_gib > cfg.cluster.host_memory_gb:
        raise UserError(
            f"each pod needs {size.memory_gib} GiB of memory (the busiest node's ~{size.host_need_gib:.0f} GiB of host RAM, "
            f"/dev/shm and the processes) and a node has {cfg.cluster.host_memory_gb:g} (cluster.host_memory_gb)",
            hint=launch.memory.host_fix() if launch.memory is not None else "spread the training roles over more nodes",
        )
    mount = _checkpoint_mount(cfg.checkpoint.ckpt_path, opts.pvc)
    if opts.pvc is None and not PurePosixPath(cfg.checkpoint.ckpt_path).is_absolute():
        notes.append(
            "no --pvc: checkpoints stay in each pod's own filesystem and go with it"
            + ("; multi-node DeepSpeed checkpoints need storage every pod shares" if cfg.cluster.nodes > 1 else "")
        )
    if opts.pvc is not None and not _SUBDOMAIN.match(opts.pvc):
        raise UserError(f"--pvc {opts.pvc!r} is not a PersistentVolumeClaim name", hint="lowercase letters, digits, '-' and '.'")
    save = cfg.checkpoint.save_path
    if not PurePosixPath(save).is_absolute():
        notes.append(f"checkpoint.save_path {save} is relative: the final model stays in the pod's working directory")
    if opts.secret is not None and not _SUBDOMAIN.match(opts.secret):
        raise UserError(f"--secret {opts.secret!r} is not a Secret name", hint="lowercase letters, digits, '-' and '.'")
    if opts.hf_cache is not None and not _SUBDOMAIN.match(opts.hf_cache):
        raise UserError(f"--hf-cache {opts.hf_cache!r} is not a PersistentVolumeClaim name", hint="lowercase letters, digits, '-' and '.'")
    paths = _mounts(launch, opts.pvc, mount, opts.volumes)
    for m in paths:
        if m.claim is None:
            other = f"--volume {m.path}=CLAIM takes it from a PVC"
            if "checkpoint.ckpt_path" in m.keys:
                other = "--pvc CLAIM mounts a PVC over ckpt_path's directory"
            notes.append(f"{', '.join(m.keys)}: {m.path} is mounted from the node's own {m.path} (hostPath, shared storage); {other}")
    hub = [v for v in (cfg.models.actor, cfg.models.reward, cfg.models.critic) if v and not v.startswith(("/", ".", "~"))]
    if opts.secret is None and (hub or cfg.logging.wandb.project):
        notes.append(
            "no --secret: "
            + ("hub models (a gated one needs HF_TOKEN): " + ", ".join(hub) + "; " if hub else "")
            + ("W&B logging needs WANDB_API_KEY; " if cfg.logging.wandb.project else "")
            + "kubectl create secret generic NAME --from-literal=HF_TOKEN=... --from-literal=WANDB_API_KEY=..., then --secret NAME"
        )
    if opts.hf_cache is None:
        notes.append(f"HF cache: an emptyDir per pod at {HF_CACHE_MOUNT} (each pod downloads the hub models); --hf-cache CLAIM shares one")
    rdma = _rdma(cfg.runtime_env.env_vars, opts.rdma_resource)
    if rdma is not None and opts.rdma_resource is None:
        notes.append(
            f"the config sets NCCL_IB_HCA: every pod asks for {rdma[1]} x {rdma[0]} and IPC_LOCK "
            "(--rdma-resource NAME[=N] names your RDMA device plugin's resource; --rdma-resource none drops it)"
        )
    image = opts.image or default_image(launch)
    if opts.image is None:
        notes.append(f"image {image}: build docker/Dockerfile, push it where the cluster pulls from, and pass --image")
    labels = {LABEL: "rlhf-launch", "app.kubernetes.io/instance": name, "rlhf-launch/openrlhf": launch.flags.version}
    config_map = f"{name}-config" if opts.rayjob and opts.config_text is not None else None
    nodes = cfg.cluster.nodes
    notes.append(
        (f"each of the {nodes} pods (head + {nodes - 1} workers)" if nodes > 1 else "the one pod (the head alone)")
        + f" requests {size.gpus} GPUs, {size.cpus} CPUs and {size.memory_gib}Gi of memory: {size.why()}; "
        f"the plan's host RAM per node: {size.per_node() or 'none'} (Ray PACK may put the busiest node's roles on any pod)"
    )
    spec = _cluster_spec(launch, size, image, ray_version, labels, paths, rdma, config_map, opts)
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if opts.namespace is not None:
        meta["namespace"] = opts.namespace
    if not opts.rayjob:
        docs: list[dict[str, Any]] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}]
        return Bringup(docs, size, name, notes)
    docs = []
    if config_map is not None:
        _refuse_local_files(launch)
        cm_meta = {**meta, "name": config_map}
        data = {PurePosixPath(opts.config).name: opts.config_text}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm_meta, "data": data})
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": meta,
        "spec": {
            "entrypoint": entrypoint(opts, config_map is not None),
            "submissionMode": "HTTPMode",
            "backoffLimit": 0,
            "shutdownAfterJobFinishes": False,
            "rayClusterSpec": spec,
        },
    }
    docs.append(job)
    return Bringup(docs, size, name, notes)


def entrypoint(opts: K8sOptions, from_config_map: bool) -> str:
    """What the RayJob runs on the head: submit (node checks, record, trainer, supervisor), then
    watch the supervisor to the run's end."""
    config = f"{CONFIG_MOUNT}/{PurePosixPath(opts.config).name}" if from_config_map else opts.config
    submit = ["rlhf-launch", "submit", config, *opts.overrides, "--address", DASHBOARD, "--auto-resume", str(opts.auto_resume)]
    if opts.openrlhf_version:
        submit += ["--openrlhf-version", opts.openrlhf_version]
    if opts.allow_fresh:
        submit.append("--allow-fresh")
    if opts.skip_check:
        submit += ["--skip-check", opts.skip_check]
    watch = ["rlhf-launch", "watch", "--address", DASHBOARD]
    return f"{shlex.join(submit)} && {shlex.join(watch)}"


def _cluster_spec(
    launch: Launch,
    size: Sizing,
    image: str,
    ray_version: str,
    labels: Mapping[str, str],
    paths: list[Mount],
    rdma: tuple[str, int] | None,
    config_map: str | None,
    opts: K8sOptions,
) -> dict[str, Any]:
    params = {"object-store-memory": str(size.object_store_gib * GIB)}
    head = _template(launch, size, image, labels, "head", paths, rdma, config_map, opts)
    spec: dict[str, Any] = {
        "rayVersion": ray_version,
        "enableInTreeAutoscaling": False,
        "authOptions": {"mode": "token"},
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0", **params}, "template": head},
    }
    workers = launch.cfg.cluster.nodes - 1
    if workers:
        spec["workerGroupSpecs"] = [
            {
                "groupName": "gpu",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "numOfHosts": 1,
                "rayStartParams": dict(params),
                "template": _template(launch, size, image, labels, "worker", paths, rdma, None, opts),
            }
        ]
    return spec


def _template(
    launch: Launch,
    size: Sizing,
    image: str,
    labels: Mapping[str, str],
    kind: str,
    paths: list[Mount],
    rdma: tuple[str, int] | None,
    config_map: str | None,
    opts: K8sOptions,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpu": str(size.cpus), "memory": f"{size.memory_gib}Gi", "nvidia.com/gpu": size.gpus}
    if rdma is not None:
        resources[rdma[0]] = rdma[1]
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{size.shm_gib}Gi"}}]
    mounts: list[dict[str, Any]] = [{"name": "shm", "mountPath": "/dev/shm"}]
    for i, m in enumerate(paths):
        name = "checkpoints" if m.keys[0] == "checkpoint.ckpt_path" and m.claim is not None else f"path-{i}"
        source: dict[str, Any] = (
            {"persistentVolumeClaim": {"claimName": m.claim}}
            if m.claim is not None
            else {"hostPath": {"path": m.path, "type": m.host_type}}
        )
        volumes.append({"name": name, **source})
        read_only = all(k.startswith(("models.", "data.")) for k in m.keys)  # what the run only reads
        mounts.append({"name": name, "mountPath": m.path, **({"readOnly": True} if read_only else {})})
    cache: dict[str, Any] = {"persistentVolumeClaim": {"claimName": opts.hf_cache}} if opts.hf_cache else {"emptyDir": {}}
    volumes.append({"name": "hf-cache", **cache})
    mounts.append({"name": "hf-cache", "mountPath": HF_CACHE_MOUNT})
    if config_map is not None:
        volumes.append({"name": "config", "configMap": {"name": config_map}})
        mounts.append({"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True})
    container: dict[str, Any] = {
        "name": f"ray-{kind}",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": mounts,
    }
    env: list[dict[str, Any]] = [{"name": "HF_HOME", "value": HF_CACHE_MOUNT}]
    if opts.secret is not None:  # from the Secret, by reference: no value in the manifest
        wandb = bool(launch.cfg.logging.wandb.project)
        for key in SECRET_KEYS:
            optional = key != "WANDB_API_KEY" or not wandb  # W&B logging without its key fails: the pod must not start
            env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": opts.secret, "key": key, "optional": optional}}})
    env += [{"name": k, "value": v} for k, v in sorted(launch.cfg.runtime_env.env_vars.items()) if k.startswith("NCCL_")]
    container["env"] = env
    if rdma is not None:
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    return {
        "metadata": {"labels": {**labels, "rlhf-launch/node": kind}},
        "spec": {
            "containers": [container],
            "volumes": volumes,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def _name(raw: str, limit: int, *, given: bool) -> str:
    if given:
        if not _DNS1035.match(raw) or len(raw) > limit:
            raise UserError(
                f"--name {raw!r} is not a KubeRay name", hint=f"a lowercase letter, then letters, digits or '-'; {limit} long at most"
            )
        return raw
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = f"r-{name}".rstrip("-")
    return name[:limit].rstrip("-")


def _checkpoint_mount(ckpt_path: str, pvc: str | None) -> str | None:
    """Where the PVC goes: ckpt_path's parent directory (ckpt_path itself when that is /)."""
    if pvc is None:
        return None
    path = PurePosixPath(ckpt_path)
    if not path.is_absolute() or ".." in path.parts:
        raise UserError(
            f"checkpoint.ckpt_path {ckpt_path} is not an absolute path: every pod mounts the PVC at the same path, "
            "and a relative one moves with each job's working directory",
            hint="e.g. checkpoint.ckpt_path=/mnt/ckpt/run/checkpoints checkpoint.save_path=/mnt/ckpt/run/final",
        )
    parent = path.parent
    return str(parent if parent != PurePosixPath("/") else path)


def _under(path: str, mount: str) -> bool:
    return PurePosixPath(path) == PurePosixPath(mount) or PurePosixPath(mount) in PurePosixPath(path).parents


def _rdma(env: Mapping[str, str], option: str | None) -> tuple[str, int] | None:
    """(resource, count) each pod asks for: the option's, or the default when the config uses InfiniBand."""
    if option is not None:
        if option.lower() == "none":
            return None
        name, _, count = option.partition("=")
        if not re.match(r"^[a-z0-9.-]+/[A-Za-z0-9_.-]+$", name) or (count and not count.isdigit()) or count == "0":
            raise UserError(f"--rdma-resource {option!r} is not a resource", hint=f"NAME or NAME=COUNT, e.g. {RDMA_RESOURCE}=1")
        return name, int(count or 1)
    if env.get("NCCL_IB_HCA") and env.get("NCCL_IB_DISABLE", "0") != "1":
        return RDMA_RESOURCE, 1
    return None


def _refuse_local_files(launch: Launch) -> None:
    """A config file goes to the head pod alone: what it names on this machine does not."""
    cfg = launch.cfg
    local = [key for key in shipped.FILES if getattr(cfg.models, key.split(".")[1])]
    if cfg.runtime_env.working_dir:
        local.append("runtime_env.working_dir")
    if local:
        raise UserError(
            f"--rayjob runs submit in the head pod, which has none of this machine's files: {', '.join(local)}",
            hint="submit from here through kubectl port-forward (drop --rayjob), or put the files in the image and use a preset",
        )
