"""What to look at on every node, from a launch: pure. The result travels to the nodes as
JSON (cluster/probes/doctor.py `facts` reads it); `needs` is what the checks judge against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.estimate import gpu_of
from rlhf_launch.core.launch import Launch
from rlhf_launch.core.secrets import SECRET_ENV
from rlhf_launch.core.settings import FLASH

# The variables NCCL, Gloo and the HF hub read that the checks judge (never a secret's value).
ENV_NAMES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "HF_HOME", "HF_HUB_OFFLINE", "NCCL_IB_DISABLE")
SECRET_NAMES = (SECRET_ENV, "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@dataclass(frozen=True)
class Needs:
    """What the run needs of every node."""

    openrlhf: str  # the release whose flags were rendered
    pins: dict[str, str]  # package -> the version that release pins
    packages: tuple[str, ...]  # packages the trainer imports
    host_gib: float  # host RAM of the busiest node of the plan
    gpu_gib: float  # GPU memory the plan assumes (cluster.gpu_memory_gb)
    gpu_peak_gib: float | None  # the plan's peak per GPU
    storage_bytes: float | None  # free space ckpt_path needs (None: model size unknown)
    multi_node: bool  # the trainer spans nodes: ckpt_path must be shared storage
    ckpt_path: str
    input_key: str
    label_key: str | None
    remote_files: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # An OpenRLHF fork (openrlhf.source): the sha256 of the train_ppo_ray.py the flags were read
    # from, which every node's openrlhf must have; None for a stock release. fork_shipped: the
    # fork is the job's working_dir, which Ray ships to every node (nothing to compare).
    fork_sha256: str | None = None
    fork_modules: tuple[str, ...] = ()  # the fork's other modules its parser is built in (hashed with the trainer)
    fork_root: str = ""
    fork_shipped: bool = False
    gpu_type: str | None = None  # cluster.gpu as the GPU table names it (None: unset)
    gpu_assumed: str | None = None  # the type the step-time estimate assumes (cluster.gpu, else by memory size)


def needs(launch: Launch) -> Needs:
    cfg, plan = launch.cfg, launch.plan
    settings = launch.settings
    attention = settings.attention if settings else cfg.deepspeed.attention
    wanted = ["openrlhf", "deepspeed", "transformers", "torch", "ray"]
    if plan.vllm_engines:
        wanted.append("vllm")
    if attention == FLASH or (settings is not None and settings.packing):
        wanted.append("flash-attn")
    memory = launch.memory
    host = max(memory.host_per_node.values(), default=0.0) if memory else 0.0
    peak = max((g.peak for g in memory.groups), default=None) if memory else None
    storage = getattr(launch, "storage", None)
    required = storage.required if storage is not None else None
    remote = settings.remote_reward if settings else tuple(cfg.models.remote_urls)
    files = tuple(r for r in remote if r.endswith(".py") and "://" not in r and r not in launch_shipped(launch))
    return Needs(
        openrlhf=launch.flags.version,
        pins=dict(launch.flags.pins),
        packages=tuple(wanted),
        host_gib=host,
        gpu_gib=cfg.cluster.gpu_memory_gb,
        gpu_peak_gib=peak,
        storage_bytes=required,
        multi_node=plan.cluster_nodes > 1,
        ckpt_path=cfg.checkpoint.ckpt_path,
        input_key=cfg.data.input_key,
        label_key=cfg.data.label_key,
        remote_files=files,
        env={k: v for k, v in cfg.runtime_env.env_vars.items() if k not in SECRET_NAMES},
        fork_sha256=launch.flags.fork.sha256 if launch.flags.fork else None,
        fork_modules=launch.flags.fork.modules if launch.flags.fork else (),
        fork_root=launch.flags.fork.root if launch.flags.fork else "",
        fork_shipped=bool(launch.flags.fork and launch.flags.fork.via == "runtime_env.working_dir"),
        gpu_type=gpu_of(cfg)[0].name if cfg.cluster.gpu else None,
        gpu_assumed=gpu_of(cfg)[0].name,
    )


def launch_shipped(launch: Launch) -> set[str]:
    """Files the job ships itself (a reward function in its working_dir): not looked for on nodes."""
    from rlhf_launch.core import shipped

    return set(shipped.plan(launch.cfg).paths.values())


def models(launch: Launch) -> dict[str, str]:
    """Roles -> the model the trainer loads for them (the reference model is the actor's; the
    critic starts from the reward model unless it has its own)."""
    s, m = launch.settings, launch.cfg.models
    actor = (s.actor_model if s else None) or m.actor
    reward = (s.reward_model if s else None) or (None if m.remote_reward else m.reward)
    critic = (s.critic_model if s else None) or m.critic
    out = {"actor": actor, "reward": reward if not (s and s.remote_reward) else None}
    if launch.plan.role("critic").enabled:
        out["critic"] = critic or out["reward"] or actor
    roles: dict[str, list[str]] = {}
    for role, value in out.items():
        if value:
            roles.setdefault(value, []).append(role)
    return {"/".join(names): value for value, names in roles.items()}  # one look per model: "reward/critic"


def datasets(launch: Launch) -> dict[str, str]:
    s, d = launch.settings, launch.cfg.data
    out = {
        "data.prompt_dataset": (s.prompt_dataset if s else None) or d.prompt_dataset,
        "data.eval_dataset": (s.eval_dataset if s else None) or d.eval_dataset,
    }
    return {k: v for k, v in out.items() if v}


DEEP_IMPORT_SECONDS = 90.0  # cluster/probes/doctor.py's limit on one node's --deep imports


def build(launch: Launch, *, nonce: str, version: str, deep: bool = False, timeout: float = 30.0) -> dict[str, Any]:
    """The JSON the node probe takes."""
    need = needs(launch)
    return {
        "env": need.env,
        "env_names": list(ENV_NAMES),
        "models": models(launch),
        "datasets": datasets(launch),
        "data_keys": [k for k in (need.input_key, need.label_key) if k],
        "chat_template": launch.cfg.data.apply_chat_template,
        "files": list(need.remote_files),
        "ckpt_path": need.ckpt_path,
        "nonce": nonce,
        "deep": deep,
        "deep_packages": list(need.packages),
        "version": version,
        "timeout": timeout + DEEP_IMPORT_SECONDS if deep else timeout,  # the node's imports run in parallel, up to that long
        "trainer_hash": bool(need.fork_sha256),  # hash the node's openrlhf/cli/train_ppo_ray.py
        "trainer_modules": list(need.fork_modules),  # ... with the modules its parser is built in
    }
