"""Startup rules: OpenRLHF's own asserts and silent corrections in `train_ppo_ray` on the
layout, and ours (DeepSpeed's batch arithmetic, tensor parallelism, capacity). Pure: config +
plan + flag set + the trainer's settings (core/settings.py, which replays the checks on single
settings) -> findings. An error for something OpenRLHF's start-up accepts names its `reason`.
"""

from __future__ import annotations

import re

from rlhf_launch.core.config import LaunchConfig, odd_reward_urls
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.placement import declared_nodes, simulate
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.shapes import attention_heads, tp_refusal, tp_sizes
from rlhf_launch.openrlhf.flagset import FlagSet, load, newest_version


def _same(plan: Plan, a: str, b: str) -> bool:
    ra, rb = plan.role(a), plan.role(b)
    return (ra.nodes, ra.gpus_per_node) == (rb.nodes, rb.gpus_per_node)


def _shape(plan: Plan, role: str) -> str:
    r = plan.role(role)
    return f"{r.nodes}x{r.gpus_per_node}"


# What a fork's own flag must be about for its trainer to meet a stock start-up requirement its
# own way: prompts made otherwise (lfy-123/WIST's --web_corpus_path), a reward of its own
# (ZefanW/openRLHF_o1's --process_reward_pretrain).
PROMPT_WORDS = re.compile(r"(?i)data|prompt|corpus|dataset|input|env|task|query|question")
REWARD_WORDS = re.compile(r"(?i)reward|(?:^|_)rm(?:_|$)|judge|verif|score|grader|rule")


def _fork_may_differ(flags: FlagSet | None, about: re.Pattern[str]) -> str:
    """For a fork with a flag of its own `about` the requirement, how messages name it (its
    trainer may meet the stock start-up requirement its own way); else ''."""
    if flags is None or flags.fork is None or not any(about.search(name) for name in flags.fork.only):
        return ""
    return flags.label


def _fork_engines(cfg: LaunchConfig, flags: FlagSet | None) -> list[Finding]:
    """placement.vllm.engines left unset for a fork whose own default makes engines (EIT-EAST-Lab/C3's
    -1, "auto"): the trainer places vLLM engines the plan does not count."""
    if flags is None or flags.fork is None or cfg.placement.vllm.engines is not None:
        return []
    for name in ("vllm.num_engines", "vllm_num_engines"):
        flag = flags.get(name)
        if flag is not None and flag.default not in (None, 0, "0"):
            return [
                warning(
                    "placement.vllm.engines",
                    f"unset: {flags.label} defaults --{name} to {flag.default!r} and makes its own vLLM engines, which the plan "
                    "neither places nor counts (GPUs, placement, memory)",
                    "set placement.vllm.engines (and placement.vllm.tensor_parallel_size) to what the fork will make",
                )
            ]
    return []


def required(cfg: LaunchConfig, plan: Plan, flags: FlagSet | None = None) -> list[Finding]:
    out = _fork_engines(cfg, flags)
    fork = _fork_may_differ(flags, PROMPT_WORDS)
    if not cfg.models.actor:
        out.append(error("models.actor", "no actor model", "set models.actor to a HF model name or path", reason="trainer_init"))
    if not cfg.data.prompt_dataset:
        if fork:
            out.append(
                warning(
                    "data.prompt_dataset",
                    f"no prompt dataset: stock OpenRLHF refuses to start without one; {fork} has flags of its own "
                    "and may make its prompts otherwise",
                    "check that the fork's own flags (extra_args) give it its prompts, or set data.prompt_dataset",
                )
            )
        else:
            out.append(
                error("data.prompt_dataset", "no prompt dataset", "set data.prompt_dataset to a HF dataset or path", reason="trainer_init")
            )
    if not cfg.models.reward and not cfg.models.remote_reward and not plan.extras.agent and not plan.extras.builtin_reward:
        # With gae OpenRLHF's start-up itself fails (the critic comes from the reward model).
        gae = cfg.train.advantage_estimator == "gae" and not cfg.models.critic
        fork = _fork_may_differ(flags, REWARD_WORDS)
        if fork:
            out.append(
                warning(
                    "models.reward",
                    f"no reward model and no remote reward URL: stock OpenRLHF cannot score rollouts; {fork} has flags "
                    "of its own and may score them its own way",
                    "check that the fork's own flags (extra_args) give it its reward, or set models.reward, "
                    "models.reward_remote_url or models.reward_func",
                )
            )
        else:
            out.append(
                error(
                    "models.reward",
                    "no reward model and no remote reward URL: the trainer cannot score rollouts",
                    "set models.reward (a reward model), models.reward_remote_url or models.reward_func",
                    reason="" if gae else "trainer_init",
                )
            )
    odd = odd_reward_urls(cfg.models.remote_urls) if cfg.models.reward_remote_url else []
    if odd:
        out.append(
            warning(
                "models.reward_remote_url",
                f"{', '.join(odd)} is not an http(s) URL: OpenRLHF's published trainer posts rollouts to each URL "
                "and fails at the first reward unless the image runs a fork that reads this form",
                "give http(s)://host:port/path URLs (comma-separated for several servers), or keep it for a fork's trainer",
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
            # OpenRLHF places rank i of the role on bundle i of the actor's group: fewer GPUs work.
            if plan.role(role).gpus > actor_gpus:
                out.append(
                    error(
                        f"placement.{role}",
                        f"under colocate all, {role} shares the actor's {actor_gpus} GPUs and cannot have more: "
                        f"actor {_shape(plan, 'actor')}, {role} {_shape(plan, role)}",
                        f"remove placement.{role} (it defaults to the actor's)",
                        reason="placement",
                    )
                )
        if plan.extras.async_train:
            out.append(
                warning(
                    "placement.colocate",
                    "with async training, colocate all only colocates the DeepSpeed models; vLLM gets its own GPUs",
                )
            )
        if plan.vllm_engines > 0 and not cfg.placement.vllm.enable_sleep and not plan.extras.async_train:
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
    """Group estimators and samples per prompt (packing and the rest: core/settings.py; an
    estimator the release lacks: its choices, checked where the argv is rendered)."""
    out = []
    estimator = cfg.train.advantage_estimator
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


def batches(cfg: LaunchConfig, plan: Plan, settings: Settings | None = None) -> list[Finding]:
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
            warning(
                "train.micro_rollout_batch_size",
                f"rollout_batch_size x n_samples_per_prompt = {samples} is not divisible by "
                f"micro_rollout_batch_size {t.micro_rollout_batch_size}: the last micro batch is shorter",
            )
        )
    out += deepspeed_batches(cfg, plan, settings)
    if t.train_batch_size > samples:
        out.append(
            warning(
                "train.train_batch_size",
                f"train_batch_size {t.train_batch_size} exceeds the {samples} samples one rollout makes: no optimizer step would run",
                "lower train.train_batch_size or raise train.rollout_batch_size",
            )
        )
    return out


def deepspeed_batches(cfg: LaunchConfig, plan: Plan, settings: Settings | None = None) -> list[Finding]:
    """DeepSpeed checks train_batch = micro x grad-accum x data-parallel size for every group it
    builds (actor and critic train, ref and reward evaluate), when the models initialize. OpenRLHF
    hands it train_batch x ring x TP over all the group's GPUs: per data-parallel rank, train_batch
    must be a positive multiple of micro x (GPUs / ring / TP). With dynamic batching the trained
    models set micro = grad-accum = 1 and no train_batch; ref and reward still check it."""
    out = []
    t = cfg.train
    ring, ds_tp = plan.extras.ring_attn_size, plan.extras.ds_tensor_parallel_size
    dynamic = settings is not None and settings.dynamic_batch
    for role in ("actor", "critic", "ref", "reward"):
        rp = plan.role(role)
        if not rp.enabled or (dynamic and role in ("actor", "critic")):
            continue
        if rp.gpus % (ring * ds_tp):
            out.append(
                error(
                    f"placement.{role}",
                    f"{role} has {rp.gpus} GPUs, not a multiple of ring_attn_size x DeepSpeed tensor_parallel_size = {ring} x {ds_tp}: "
                    "DeepSpeed cannot build its device mesh",
                    f"give {role} a multiple of {ring * ds_tp} GPUs",
                    reason="trainer_init",
                )
            )
            continue
        data_parallel = rp.gpus // ring // ds_tp
        step = t.micro_train_batch_size * data_parallel
        if t.train_batch_size % step:
            if role == "actor":
                message = (
                    f"train_batch_size {t.train_batch_size} is not divisible by micro_train_batch_size x actor "
                    f"data-parallel size = {t.micro_train_batch_size} x {data_parallel} = {step}"
                )
            else:
                message = (
                    f"DeepSpeed checks the batch of every model: train_batch_size {t.train_batch_size} is not divisible by "
                    f"micro_train_batch_size x {role} data-parallel size = {t.micro_train_batch_size} x {data_parallel} = {step}"
                )
            key = "train.train_batch_size" if role == "actor" else f"placement.{role}"
            out.append(error(key, message, f"use a train_batch_size that is a multiple of {step}", reason="deepspeed_batch"))
    return out


def tensor_parallel(cfg: LaunchConfig, plan: Plan) -> list[Finding]:
    """vLLM refuses a TP that does not divide the model's heads (where its shape is known).
    Engines spanning nodes work (vLLM's Ray workers span them), only slower."""
    tp, per_node = plan.vllm_tp, cfg.cluster.gpus_per_node
    if plan.vllm_engines == 0:
        return []
    heads = attention_heads(cfg.models)
    if heads is not None and tp_refusal(heads[0], heads[1], tp):
        n_heads, kv_heads, source = heads
        working = tp_sizes(n_heads, kv_heads, max(per_node, min(tp, n_heads)))
        return [
            error(
                "placement.vllm.tensor_parallel_size",
                f"vLLM refuses TP {tp} for the actor ({n_heads} attention heads, {kv_heads} KV heads; {source}): "
                f"{tp_refusal(n_heads, kv_heads, tp)}",
                f"use placement.vllm.tensor_parallel_size {' or '.join(', '.join(map(str, working)).rsplit(', ', 1))}",
                reason="trainer_init",
            )
        ]
    if tp > per_node:
        return [
            warning(
                "placement.vllm.tensor_parallel_size",
                f"TP {tp} does not fit on one node of {per_node} GPUs: each engine spans nodes, its all-reduces cross the network",
                f"use a TP that divides {per_node}",
            )
        ]
    if per_node % tp:
        return [
            warning(
                "placement.vllm.tensor_parallel_size",
                f"TP {tp} does not divide the {per_node} GPUs of a node: some engines may span nodes",
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
                reason="placement",
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


def check(
    cfg: LaunchConfig, plan: Plan, flags: FlagSet, *, wandb_key_present: bool = False, settings: Settings | None = None
) -> list[Finding]:
    """Every rule, errors and warnings, in a stable order."""
    return [
        *required(cfg, plan, flags),
        *colocation(cfg, plan),
        *generation(cfg, plan, flags),
        *tensor_parallel(cfg, plan),
        *batches(cfg, plan, settings),
        *capacity(cfg, plan),
        *checkpoints(cfg, plan),
        *wandb(cfg, wandb_key_present),
    ]
