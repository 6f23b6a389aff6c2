"""Startup rules: OpenRLHF's own asserts and silent corrections in `train_ppo_ray`, and ours
(batch arithmetic, tensor parallelism, capacity). Pure: config + plan + flag set -> findings.
"""

from __future__ import annotations

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.placement import declared_nodes, simulate
from rlhf_launch.core.plan import Plan
from rlhf_launch.openrlhf import dialect
from rlhf_launch.openrlhf.flagset import FlagSet, load, newest_version


def _same(plan: Plan, a: str, b: str) -> bool:
    ra, rb = plan.role(a), plan.role(b)
    return (ra.nodes, ra.gpus_per_node) == (rb.nodes, rb.gpus_per_node)


def _shape(plan: Plan, role: str) -> str:
    r = plan.role(role)
    return f"{r.nodes}x{r.gpus_per_node}"


def required(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    out = []
    if not cfg.models.actor:
        out.append(error("models.actor", "no actor model", "set models.actor to a HF model name or path"))
    if not cfg.data.prompt_dataset:
        out.append(error("data.prompt_dataset", "no prompt dataset", "set data.prompt_dataset to a HF dataset or path"))
    if not cfg.models.reward and not cfg.models.reward_remote_url and not plan.extras.agent:
        out.append(
            error(
                "models.reward",
                "no reward model and no remote reward URL: the trainer cannot score rollouts",
                "set models.reward (a reward model) or models.reward_remote_url",
            )
        )
    return out


def colocation(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    out = []
    ref_on, critic_on = plan.role("ref").enabled, plan.role("critic").enabled
    colocate_all = cfg.colocated("all")
    if (cfg.colocated("actor_ref") or colocate_all) and ref_on and not _same(plan, "actor", "ref"):
        out.append(
            error(
                "placement.ref",
                f"actor and ref are colocated, so their placement must match: actor {_shape(plan, 'actor')}, ref {_shape(plan, 'ref')}",
                "remove placement.ref (it defaults to the actor's) or make them equal",
            )
        )
    if cfg.colocated("critic_reward") and critic_on and not _same(plan, "critic", "reward"):
        out.append(
            error(
                "placement.reward",
                f"critic and reward are colocated, so their placement must match: critic {_shape(plan, 'critic')}, "
                f"reward {_shape(plan, 'reward')}",
                "remove placement.reward (it defaults to the critic's) or make them equal",
            )
        )
    if colocate_all:
        actor_gpus = plan.role("actor").gpus
        if plan.sync_colocate_all and plan.vllm_engines > 0 and plan.vllm_gpus != actor_gpus:
            out.append(
                error(
                    "placement.vllm",
                    f"colocate all needs vLLM engines x TP == actor GPUs: {plan.vllm_engines}x{plan.vllm_tp} = "
                    f"{plan.vllm_gpus}, actor {actor_gpus}",
                    f"e.g. placement.vllm.engines={max(1, actor_gpus // plan.vllm_tp)} with TP {plan.vllm_tp}",
                )
            )
        shared = [r for r in ("critic", "reward") if plan.role(r).enabled and "actor" in plan.colocated_with(r)]
        for role in shared:
            if not _same(plan, "actor", role):
                out.append(
                    error(
                        f"placement.{role}",
                        f"under colocate all, {role} shares the actor's GPUs and needs the same placement: "
                        f"actor {_shape(plan, 'actor')}, {role} {_shape(plan, role)}",
                        f"remove placement.{role} (it defaults to the actor's)",
                    )
                )
        if plan.extras.async_train:
            out.append(
                warning(
                    "placement.colocate",
                    "with async training, colocate all only colocates the DeepSpeed models; vLLM gets its own GPUs",
                )
            )
        if plan.vllm_engines > 0 and not cfg.placement.vllm.enable_sleep:
            out.append(
                warning(
                    "placement.vllm.enable_sleep",
                    "colocate all without vLLM sleep keeps the KV cache on the GPUs while DeepSpeed trains",
                    "set placement.vllm.enable_sleep: true (and deepspeed.enable_sleep: true)",
                )
            )
    else:
        if cfg.placement.vllm.enable_sleep:
            out.append(
                warning(
                    "placement.vllm.enable_sleep",
                    "OpenRLHF turns vLLM sleep off when not all models are colocated",
                    "remove it, or add 'all' to placement.colocate",
                )
            )
        if cfg.deepspeed.enable_sleep:
            out.append(
                warning(
                    "deepspeed.enable_sleep",
                    "DeepSpeed sleep only helps when all models are colocated",
                    "remove it, or add 'all' to placement.colocate",
                )
            )
    if plan.extras.async_train and cfg.placement.vllm.enable_sleep and colocate_all:
        out.append(error("placement.vllm.enable_sleep", "async training does not support vLLM sleep"))
    return out


def generation(cfg: LaunchConfig, plan: Plan, flags: FlagSet) -> list[Finding]:
    out = []
    if cfg.deepspeed.packing_samples and plan.vllm_engines == 0:
        out.append(
            error(
                "deepspeed.packing_samples",
                "OpenRLHF supports packing_samples only with vLLM engines",
                "set placement.vllm.engines >= 1 or packing_samples: false",
            )
        )
    if cfg.deepspeed.packing_samples and not cfg.deepspeed.flash_attn:
        out.append(warning("deepspeed.flash_attn", "packing_samples makes OpenRLHF switch flash attention on anyway"))
    estimator = cfg.train.advantage_estimator
    flag = flags.get(dialect.flag_for("train.advantage_estimator", flags) or "")
    choices = flag.choices if flag is not None and flag.choices else ()
    if choices and estimator not in choices:
        out.append(
            error(
                "train.advantage_estimator",
                f"openrlhf {flags.version} has no advantage estimator {estimator!r}",
                f"choose one of {', '.join(choices)}",
            )
        )
    if cfg.train.n_samples_per_prompt <= 1:
        message = f"{estimator} compares samples of the same prompt and needs n_samples_per_prompt > 1"
        if estimator in flags.group_estimators:
            out.append(error("train.n_samples_per_prompt", message, "e.g. train.n_samples_per_prompt=8"))
        elif estimator in load(newest_version()).group_estimators:
            out.append(
                warning(
                    "train.n_samples_per_prompt",
                    f"{message}: with one sample every advantage is 0 (openrlhf {flags.version} does not check, "
                    f"{newest_version()} refuses it)",
                    "e.g. train.n_samples_per_prompt=8",
                )
            )
    return out


def batches(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    out = []
    t = cfg.train
    actor_gpus = plan.role("actor").gpus
    ring, ds_tp = plan.extras.ring_attn_size, plan.extras.ds_tensor_parallel_size
    actor_processes = actor_gpus // ring // ds_tp
    samples = t.rollout_batch_size * t.n_samples_per_prompt
    if samples // t.micro_rollout_batch_size < actor_processes:
        out.append(
            error(
                "train.rollout_batch_size",
                f"rollout_batch_size x n_samples_per_prompt / micro_rollout_batch_size = "
                f"{samples // t.micro_rollout_batch_size} sample batches, fewer than the {actor_processes} actor processes",
                "raise train.rollout_batch_size or lower train.micro_rollout_batch_size",
            )
        )
    if samples % t.micro_rollout_batch_size:
        out.append(
            error(
                "train.micro_rollout_batch_size",
                f"rollout_batch_size x n_samples_per_prompt = {samples} is not divisible by "
                f"micro_rollout_batch_size {t.micro_rollout_batch_size}",
            )
        )
    data_parallel = max(1, actor_processes)
    step = t.micro_train_batch_size * data_parallel
    if t.train_batch_size % step:
        out.append(
            error(
                "train.train_batch_size",
                f"train_batch_size {t.train_batch_size} is not divisible by micro_train_batch_size x actor "
                f"data-parallel size = {t.micro_train_batch_size} x {data_parallel} = {step}",
                f"use a multiple of {step}",
            )
        )
    if t.train_batch_size > samples:
        out.append(
            warning(
                "train.train_batch_size",
                f"train_batch_size {t.train_batch_size} exceeds the {samples} samples one rollout makes: no optimizer step would run",
                "lower train.train_batch_size or raise train.rollout_batch_size",
            )
        )
    return out


def tensor_parallel(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    tp, per_node = plan.vllm_tp, cfg.cluster.gpus_per_node
    if plan.vllm_engines == 0:
        return []
    if tp > per_node:
        return [
            error(
                "placement.vllm.tensor_parallel_size",
                f"TP {tp} does not fit on one node of {per_node} GPUs",
                f"use a TP that divides {per_node}",
            )
        ]
    if per_node % tp:
        return [
            error(
                "placement.vllm.tensor_parallel_size",
                f"TP {tp} does not divide the {per_node} GPUs of a node: some engines would span nodes",
                f"use a TP that divides {per_node}",
            )
        ]
    return []


def capacity(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    out = []
    need, have = plan.gpus_required, plan.cluster_gpus
    if need > have:
        out.append(
            error(
                "placement",
                f"the layout needs {need} GPUs ({plan.breakdown()}) but the cluster has {have} "
                f"({plan.cluster_nodes}x{plan.cluster_gpus_per_node})",
                "shrink a role, colocate (placement.colocate), or add nodes",
            )
        )
        return out
    sim = simulate(plan.groups, declared_nodes(plan.cluster_nodes, plan.cluster_gpus_per_node))
    for placed in sim.placements:
        if placed.split_engines:
            out.append(
                warning(
                    "placement.vllm",
                    f"{placed.split_engines} vLLM engine(s) of {placed.group.name} would span nodes as Ray packs the bundles",
                    "make the GPUs placed before vLLM a multiple of the TP size",
                )
            )
    if need < have:
        out.append(warning("placement", f"the layout uses {need} of the cluster's {have} GPUs"))
    for role in plan.roles:
        if role.enabled and role.gpus_per_node > cfg.cluster.gpus_per_node:
            out.append(
                warning(
                    f"placement.{role.role}.gpus_per_node",
                    f"{role.gpus_per_node} GPUs per node but cluster nodes have {cfg.cluster.gpus_per_node}; "
                    "OpenRLHF only uses nodes x gpus_per_node",
                )
            )
    return out


def checkpoints(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    ck = cfg.checkpoint
    multi_node = plan.gpus_required > plan.cluster_gpus_per_node
    if ck.save_steps > 0 and multi_node and not ck.ckpt_path.startswith("/"):
        return [
            warning(
                "checkpoint.ckpt_path",
                f"relative ckpt_path {ck.ckpt_path!r} lands in each node's job directory; multi-node DeepSpeed "
                "checkpoints need storage every node shares",
                "use an absolute path on shared storage, e.g. /mnt/shared/ckpt/<name>",
            )
        ]
    return []


def wandb(cfg: LaunchConfig, key_present: bool) -> list[Finding]:
    if cfg.logging.wandb.project and not key_present:
        return [
            warning(
                "logging.wandb.project",
                "W&B project set but WANDB_API_KEY is not in the environment: W&B stays off",
                "export WANDB_API_KEY before submit",
            )
        ]
    return []


def check(cfg: LaunchConfig, plan: Plan, flags: FlagSet, *, wandb_key_present: bool = False) -> list[Finding]:
    """Every rule, errors and warnings, in a stable order."""
    return [
        *required(cfg, plan),
        *colocation(cfg, plan),
        *generation(cfg, plan, flags),
        *tensor_parallel(cfg, plan),
        *batches(cfg, plan),
        *capacity(cfg, plan),
        *checkpoints(cfg, plan),
        *wandb(cfg, wandb_key_present),
    ]
