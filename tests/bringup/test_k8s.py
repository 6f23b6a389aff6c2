"""`rlhf-launch k8s`: KubeRay manifests for every shipped preset, validated against the real
schemas: KubeRay v1.7.0's published CRDs (tests/data/kuberay/, their openAPIV3Schema, unknown
fields refused as `kubectl apply`'s strict field validation does) and the core Kubernetes types
(kubernetes-validate's schemas of the Kubernetes KubeRay v1.7.0 builds against), then checked
for what the run needs: the plan's GPUs, /dev/shm, the checkpoint PVC, the RayJob's policy."""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from rlhf_launch.bringup import k8s
from rlhf_launch.cli.app import main
from rlhf_launch.core.launch import Launch, from_config
from rlhf_launch.doctor.checks import GIB, SHM_GOOD

from conftest import ROOT

KUBERAY = ROOT / "tests" / "data" / "kuberay" / "v1.7.0"
# git blob ids of ray-operator/config/crd/bases/<file> at tag v1.7.0 (commit 59d663ae): the data is upstream's, byte for byte
BLOBS = {
    "ray.io_rayclusters.yaml": "ff0be58ada3bd457605eff1f258c16df21e61e21",
    "ray.io_rayjobs.yaml": "c7d3f081af8cf08c256a8c33a0c3b6ea28b816a0",
}
KUBERNETES = "1.36.0"  # KubeRay v1.7.0's go.mod: k8s.io/api v0.36.0
PRESETS = sorted([*(ROOT / "src" / "rlhf_launch" / "presets").glob("*.yaml"), *(ROOT / "configs").glob("*.yaml")])
# /dev/shm beside Ray's object store: NCCL's user guide asks Docker users for --shm-size=1g, vLLM's
# Kubernetes example mounts a 2Gi memory emptyDir for tensor parallelism, and our doctor passes a
# node from SHM_GOOD (10 GiB) up. The manifests must pass the doctor, the strictest of the three.
SHM_NEED = max(1 * GIB, 2 * GIB, SHM_GOOD)


def crd_bytes(name: str) -> bytes:
    return gzip.decompress((KUBERAY / f"{name}.gz").read_bytes())


@functools.cache
def crd_validator(kind: str) -> jsonschema.Draft4Validator:
    crd = yaml.load(crd_bytes(f"ray.io_{kind.lower()}s.yaml"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1" and v["served"] and v["storage"])
    return jsonschema.Draft4Validator(strict(version["schema"]["openAPIV3Schema"]))


def strict(node: Any) -> Any:
    """The schema with unknown fields refused: the API server prunes them silently, `kubectl apply`
    (strict field validation, its default) refuses them; a typo must not pass here."""
    if isinstance(node, dict):
        node = {k: strict(v) for k, v in node.items()}
        if "properties" in node and "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [strict(v) for v in node]
    return node


def validate_core(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def validate_template(template: dict[str, Any]) -> None:
    """A pod template as core Kubernetes has it (PodTemplateSpec, inside a v1 PodTemplate)."""
    validate_core({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template})


def cluster_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]


def validate(docs: list[dict[str, Any]]) -> None:
    """Every document against its schema; every pod template against core Kubernetes too."""
    for doc in docs:
        if doc["kind"] in ("RayCluster", "RayJob"):
            assert doc["apiVersion"] == "ray.io/v1"
            crd_validator(doc["kind"]).validate(doc)
            spec = cluster_spec(doc)
            for template in [spec["headGroupSpec"]["template"], *(g["template"] for g in spec.get("workerGroupSpecs", []))]:
                validate_template(template)
        else:
            validate_core(doc)


def pods(doc: dict[str, Any]) -> list[tuple[dict[str, Any], int, dict[str, str]]]:
    """(template, how many pods, rayStartParams) of the head and each worker group."""
    spec = cluster_spec(doc)
    head = spec["headGroupSpec"]
    return [(head["template"], 1, head["rayStartParams"])] + [
        (g["template"], g["replicas"], g["rayStartParams"]) for g in spec.get("workerGroupSpecs", [])
    ]


def quantity(text: str | int) -> float:
    m = re.fullmatch(r"([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(text))
    assert m, text
    scale = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    return float(m.group(1)) * scale[m.group(2)]


def shm_bytes(template: dict[str, Any]) -> float:
    """/dev/shm as the pod gets it: an emptyDir mounted there, or else the one KubeRay adds, sized
    to the container's memory limit (ray-operator/controllers/ray/common/pod.go makeEmptyDirVolume)."""
    container = template["spec"]["containers"][0]
    mount = next((m for m in container.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"), None)
    if mount is None:
        return quantity(container["resources"]["limits"]["memory"])
    volume = next(v for v in template["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"]["medium"] == "Memory"
    return quantity(volume["emptyDir"].get("sizeLimit") or container["resources"]["limits"]["memory"])


def absolute(launch_path: str, name: str) -> list[str]:
    """Overrides that put a preset's relative checkpoint paths under /mnt/ckpt (a PVC needs an absolute path)."""
    if PurePosixPath(launch_path).is_absolute():
        return []
    return [f"checkpoint.ckpt_path=/mnt/ckpt/{name}/checkpoints", f"checkpoint.save_path=/mnt/ckpt/{name}/final"]


def preset_launch(path: Path) -> tuple[Launch, list[str]]:
    plain = from_config(str(path), [])
    overrides = absolute(plain.cfg.checkpoint.ckpt_path, plain.cfg.name)
    return (from_config(str(path), overrides) if overrides else plain), overrides


def pinned_ray() -> tuple[str, str]:
    """The Ray of docker/Dockerfile and of pyproject's `cluster` extra (what the image installs)."""
    docker = re.search(r"^ARG RAY_VERSION=(\S+)$", (ROOT / "docker" / "Dockerfile").read_text(), re.M)
    extra = re.search(r"^cluster = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    pin = re.search(r'"ray\[default\]==([^"]+)"', extra.group(1)) if extra else None
    assert docker and pin
    return docker.group(1), pin.group(1)


def test_the_crds_are_kuberays_published_files():
    for name, blob in BLOBS.items():
        data = crd_bytes(name)
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name
    assert "v1.7.0" in (ROOT / "tests" / "data" / "kuberay" / "README.md").read_text() and k8s.KUBERAY == "v1.7.0"


@pytest.mark.parametrize("rayjob", [False, True], ids=["raycluster", "rayjob"])
@pytest.mark.parametrize("path", PRESETS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_preset_makes_valid_manifests_that_hold_the_run(path, rayjob):
    launch, overrides = preset_launch(path)
    preset = path.stem
    done = k8s.manifests(launch, k8s.K8sOptions(config=preset, overrides=tuple(overrides), pvc="ckpt", rayjob=rayjob))
    validate(done.docs)
    (doc,) = [d for d in done.docs if d["kind"] == ("RayJob" if rayjob else "RayCluster")]
    spec = cluster_spec(doc)
    plan = launch.plan

    # KubeRay's own admission rules (validation.go): a DNS-1035 name short enough, token auth on a Ray that has it
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    assert len(doc["metadata"]["name"]) <= (47 if rayjob else 53)
    assert spec["authOptions"] == {"mode": "token"}
    assert tuple(map(int, spec["rayVersion"].split("."))) >= (2, 52, 0)
    # rayVersion is the image's Ray: the release's pin, what docker/ and the cluster extra install
    assert spec["rayVersion"] == launch.flags.ray_pin
    if launch.flags.version == "0.11.2":
        assert pinned_ray() == (spec["rayVersion"], spec["rayVersion"])

    # GPUs: every pod alike, requests = limits, a fixed-size group, and the plan's GPUs in all
    assert spec["enableInTreeAutoscaling"] is False
    for group in spec.get("workerGroupSpecs", []):
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"]
    gpus = 0
    for template, count, params in pods(doc):
        resources = template["spec"]["containers"][0]["resources"]
        assert resources["requests"] == resources["limits"]
        gpus += count * int(resources["limits"]["nvidia.com/gpu"])
        assert int(resources["limits"]["cpu"]) > int(resources["limits"]["nvidia.com/gpu"])  # a CPU per GPU bundle, and the drivers'
        # /dev/shm holds Ray's object store and what NCCL and vLLM need; the memory limit holds that
        # tmpfs and the plan's busiest node's host RAM
        shm = shm_bytes(template)
        store = float(params.get("object-store-memory", 0))
        assert shm >= store + SHM_NEED
        need = max(launch.memory.host_per_node.values()) * GIB
        assert quantity(resources["limits"]["memory"]) >= need + shm
    assert gpus == plan.cluster_gpus == launch.cfg.cluster.nodes * launch.cfg.cluster.gpus_per_node
    assert gpus >= plan.gpus_required

    # the checkpoint PVC at ckpt_path (its directory) on every pod
    ckpt = PurePosixPath(launch.cfg.checkpoint.ckpt_path)
    for template, _, _ in pods(doc):
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in template["spec"]["volumes"] if "persistentVolumeClaim" in v}
        mounts = [m for m in template["spec"]["containers"][0]["volumeMounts"] if claims.get(m["name"]) == "ckpt"]
        assert len(mounts) == 1
        assert PurePosixPath(mounts[0]["mountPath"]) in (ckpt, *ckpt.parents)
        assert PurePosixPath(mounts[0]["mountPath"]) != PurePosixPath("/")

    if rayjob:
        job = doc["spec"]
        assert job["backoffLimit"] == 0
        assert "activeDeadlineSeconds" not in job
        assert job["shutdownAfterJobFinishes"] is False
        assert job["submissionMode"] == "HTTPMode"
        submit, watch = job["entrypoint"].split(" && ")
        assert shlex.split(watch)[:2] == ["rlhf-launch", "watch"]
        argv = shlex.split(submit)
        assert argv[:3] == ["rlhf-launch", "submit", preset] and "--auto-resume" in argv
        assert main([*argv[1:], "--dry-run"]) == 0  # what the head pod runs is a submit the CLI accepts


BROKEN = {
    "replicas as text": lambda d: d["spec"]["workerGroupSpecs"][0].__setitem__("replicas", "3"),
    "a misspelt spec field": lambda d: d["spec"].__setitem__("workerGroupSpec", d["spec"].pop("workerGroupSpecs")),
    "no head template": lambda d: d["spec"]["headGroupSpec"].pop("template"),
    "a misspelt container field": lambda d: d["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].__setitem__(
        "imagePullPolcy", "Always"
    ),
    "memory that is no quantity": lambda d: d["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
        "limits"
    ].__setitem__("memory", "lots"),
    "an emptyDir medium that is no medium": lambda d: d["spec"]["headGroupSpec"]["template"]["spec"]["volumes"][0]["emptyDir"].__setitem__(
        "medium", 7
    ),
}


@pytest.mark.parametrize("breakage", list(BROKEN))
def test_the_validators_refuse_a_broken_manifest(breakage):
    launch = from_config("llama70b-4node", [])
    docs = k8s.manifests(launch, k8s.K8sOptions(config="llama70b-4node", pvc="ckpt")).docs
    validate(docs)
    broken = copy.deepcopy(docs)
    BROKEN[breakage](broken[0])
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        validate(broken)


def test_the_core_validator_alone_refuses_a_broken_pod_template():
    launch = from_config("tiny-1node", [])
    doc = k8s.manifests(launch, k8s.K8sOptions(config="tiny-1node")).docs[0]
    template = copy.deepcopy(doc["spec"]["headGroupSpec"]["template"])
    template["spec"]["containers"][0]["ports"] = [{"containerPort": "http"}]
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_template(template)


def test_infiniband_in_the_config_asks_for_rdma_and_keeps_nccl_variables():
    env = ["runtime_env.env_vars.NCCL_IB_HCA=mlx5_0,mlx5_1", "runtime_env.env_vars.NCCL_SOCKET_IFNAME=ib0"]
    launch = from_config("llama70b-8node", env)
    done = k8s.manifests(launch, k8s.K8sOptions(config="llama70b-8node", pvc="ckpt"))
    validate(done.docs)
    for template, _, _ in pods(done.docs[0]):
        container = template["spec"]["containers"][0]
        assert container["resources"]["limits"][k8s.RDMA_RESOURCE] == container["resources"]["requests"][k8s.RDMA_RESOURCE] == 1
        assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
        assert {"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1"} in container["env"]
        assert {"name": "NCCL_SOCKET_IFNAME", "value": "ib0"} in container["env"]
    assert any("NCCL_IB_HCA" in n for n in done.notes)

    named = k8s.manifests(launch, k8s.K8sOptions(config="x", rdma_resource="nvidia.com/hostdev=2")).docs[0]
    validate([named])
    assert all(t["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/hostdev"] == 2 for t, _, _ in pods(named))

    for off in (from_config("llama70b-8node", [*env, "runtime_env.env_vars.NCCL_IB_DISABLE=1"]), from_config("llama70b-8node", [])):
        plain = k8s.manifests(off, k8s.K8sOptions(config="x")).docs[0]
        assert all(k8s.RDMA_RESOURCE not in t["spec"]["containers"][0]["resources"]["limits"] for t, _, _ in pods(plain))
        assert all("securityContext" not in t["spec"]["containers"][0] for t, _, _ in pods(plain))


def test_a_one_node_run_is_a_head_alone():
    launch = from_config("tiny-1node", [])
    doc = k8s.manifests(launch, k8s.K8sOptions(config="tiny-1node")).docs[0]
    validate([doc])
    assert "workerGroupSpecs" not in doc["spec"]
    assert doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8


def test_cli_writes_the_manifests_it_would_print(tmp_path, capsys):
    out = tmp_path / "ray.yaml"
    assert (
        main(["k8s", "llama70b-2node-hybrid", "--pvc", "ckpt", "-n", "rlhf", "--image", "reg.example/rlhf-launch:0.11.2", "-o", str(out)])
        == 0
    )
    docs = list(yaml.safe_load_all(out.read_text()))
    validate(docs)
    (doc,) = docs
    assert doc["metadata"]["namespace"] == "rlhf"
    assert {t["spec"]["containers"][0]["image"] for t, _, _ in pods(doc)} == {"reg.example/rlhf-launch:0.11.2"}
    assert "kubectl apply -f" in capsys.readouterr().err
    assert main(["k8s", "llama70b-2node-hybrid", "--pvc", "ckpt", "-n", "rlhf", "--image", "reg.example/rlhf-launch:0.11.2"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == docs


def test_a_rayjob_from_a_file_carries_the_file_to_the_head(tmp_path, capsys):
    source = (ROOT / "configs" / "llama70b-4node.yaml").read_text()
    path = tmp_path / "My_Run.yaml"
    path.write_text(source.replace("name: llama70b-4node", "name: My_Run.v2", 1))
    assert main(["k8s", str(path), "train.seed=7", "--rayjob", "--pvc", "ckpt"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    validate(docs)
    config_map, job = docs
    assert config_map["kind"] == "ConfigMap" and config_map["data"] == {"My_Run.yaml": path.read_text()}
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", job["metadata"]["name"]) and "run" in job["metadata"]["name"]
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    volume = next(v for v in head["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    mount = next(m for m in head["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    argv = shlex.split(job["spec"]["entrypoint"].split(" && ")[0])
    assert argv[2] == f"{mount['mountPath']}/My_Run.yaml" and argv[3] == "train.seed=7"


@pytest.mark.parametrize(
    "args, says",
    [
        (["tiny-1node", "--pvc", "ckpt"], "not an absolute path"),
        (["llama70b-4node", "--ray-version", "2.48.0"], "older than 2.52.0"),
        (["llama70b-4node", "--name", "Not_A_Name"], "--name"),
        (["llama70b-4node", "--pvc", "Bad/Claim"], "--pvc"),
        (["llama70b-4node", "--namespace", "UPPER"], "--namespace"),
        (["llama70b-4node", "--cpus", "4"], "--cpus 4"),
        (["llama70b-4node", "--rdma-resource", "mlx=0"], "--rdma-resource"),
        (["tiny-1node", "cluster.host_memory_gb=300"], "cluster.host_memory_gb"),
        (["qwen2.5-7b-grpo", "--rayjob", "--auto-resume", "3", "checkpoint.save_steps=-1"], "--auto-resume 3"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_user_errors_exit_2_with_one_message(args, says, capsys):
    assert main(["k8s", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], captured.err
    assert "Traceback" not in captured.err


def test_a_rayjob_refuses_a_file_that_names_local_files(tmp_path, capsys):
    (tmp_path / "reward.py").write_text("def reward_func(queries, prompts, labels):\n    return None\n")
    source = (ROOT / "configs" / "qwen2.5-7b-grpo.yaml").read_text().replace("reward_func: math_reward.py", "reward_func: reward.py")
    path = tmp_path / "q.yaml"
    path.write_text(source)
    assert main(["k8s", str(path), "--rayjob"]) == 2
    assert "models.reward_func" in capsys.readouterr().err
    assert main(["k8s", str(path)]) == 0  # a RayCluster: submit from here uploads the file as usual


def test_allow_fresh_reaches_the_heads_submit(capsys):
    assert main(["k8s", "llama70b-4node", "--rayjob", "checkpoint.save_steps=-1", "--allow-fresh"]) == 0
    (job,) = yaml.safe_load_all(capsys.readouterr().out)
    argv = shlex.split(job["spec"]["entrypoint"].split(" && ")[0])
    assert "--allow-fresh" in argv and "checkpoint.save_steps=-1" in argv
    assert main([*argv[1:], "--dry-run"]) == 0


def _mount_paths(template: dict[str, Any]) -> list[PurePosixPath]:
    return [PurePosixPath(m["mountPath"]) for m in template["spec"]["containers"][0]["volumeMounts"]]


def _named_paths(launch: Launch) -> dict[str, str]:
    """Every absolute local path the config names, read here from the config itself."""
    cfg = launch.cfg
    values = {
        "models.actor": cfg.models.actor,
        "models.reward": cfg.models.reward,
        "models.critic": cfg.models.critic,
        "data.prompt_dataset": cfg.data.prompt_dataset,
        "data.eval_dataset": cfg.data.eval_dataset,
        "checkpoint.ckpt_path": cfg.checkpoint.ckpt_path,
        "checkpoint.save_path": cfg.checkpoint.save_path,
    }
    values.update({f"models.reward_remote_url[{i}]": u for i, u in enumerate(cfg.models.remote_urls)})
    return {k: v for k, v in values.items() if v and v.startswith("/")}


@pytest.mark.parametrize("pvc", ["ckpt", None], ids=["pvc", "no-pvc"])
@pytest.mark.parametrize("path", PRESETS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_path_the_config_names_is_mounted_on_every_pod(path, pvc):
    launch, overrides = preset_launch(path)
    done = k8s.manifests(launch, k8s.K8sOptions(config=path.stem, overrides=tuple(overrides), pvc=pvc))
    validate(done.docs)
    named = _named_paths(launch)
    assert "checkpoint.ckpt_path" in named
    for template, _, _ in pods(done.docs[0]):
        mounts = _mount_paths(template)
        for key, value in named.items():
            assert any(m == PurePosixPath(value) or m in PurePosixPath(value).parents for m in mounts), (key, value, mounts)


def test_the_70b_reward_model_is_mounted_and_the_secrets_come_from_a_secret(capsys):
    launch = from_config("llama70b-4node", [])
    done = k8s.manifests(launch, k8s.K8sOptions(config="llama70b-4node", pvc="ckpt", secret="rlhf-keys", hf_cache="hf-cache"))
    validate(done.docs)
    text = done.text
    for template, _, _ in pods(done.docs[0]):
        container = template["spec"]["containers"][0]
        assert PurePosixPath("/mnt/shared/models/llama-2-70b-rm") in _mount_paths(template)
        env = {e["name"]: e for e in container["env"]}
        for key in ("HF_TOKEN", "WANDB_API_KEY"):
            assert env[key]["valueFrom"]["secretKeyRef"] == {**env[key]["valueFrom"]["secretKeyRef"], "name": "rlhf-keys", "key": key}
            assert "value" not in env[key]
        # the HF cache on a volume every pod shares, where HF_HOME points
        cache = next(m for m in container["volumeMounts"] if m["mountPath"] == env["HF_HOME"]["value"])
        volume = next(v for v in template["spec"]["volumes"] if v["name"] == cache["name"])
        assert volume["persistentVolumeClaim"]["claimName"] == "hf-cache"
    assert "hf_" not in text.lower().replace("hf_token", "").replace("hf_home", "")  # no token value
    # what each pod requests, and why, is said
    size = k8s.sizing(launch)
    said = [n for n in done.notes if f"{size.memory_gib}Gi" in n]
    assert said and "deepspeed.adam_offload" in said[0] and "4 pods" in said[0]
    # without --secret: a note says how to make one
    plain = k8s.manifests(launch, k8s.K8sOptions(config="llama70b-4node", pvc="ckpt"))
    assert any("--secret NAME" in n and "HF_TOKEN" in n for n in plain.notes)


def test_a_path_from_a_claim(capsys):
    launch = from_config("llama70b-4node", [])
    done = k8s.manifests(launch, k8s.K8sOptions(config="x", pvc="ckpt", volumes=("/mnt/shared/models=models",)))
    validate(done.docs)
    template = pods(done.docs[0])[0][0]
    mount = next(m for m in template["spec"]["containers"][0]["volumeMounts"] if m["mountPath"] == "/mnt/shared/models")
    assert mount.get("readOnly") is True
    volume = next(v for v in template["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["persistentVolumeClaim"]["claimName"] == "models"
