"""Memory feasibility: per-role GPU memory and per-node host memory, before submission. Pure.

The model. Each GPU runs a sequence of phases; a phase's need is the sum of what is resident
on that GPU then, and the GPU's figure is the peak over phases, never the sum of the phases.

Phases (OpenRLHF's loop, trainer/ppo_trainer.py, ppo_utils/experience_maker.py):
  generate         vLLM generates: its whole share is awake.
  experience:ROLE  actor, critic, ref and reward each run a no-grad forward over the rollouts.
                   Colocated models run one at a time (the dispatcher waits and empties the
                   cache between them when the models share GPUs).
  train:ROLE       critic, then actor, train. One at a time when deepspeed.enable_sleep
                   (reload -> fit -> offload) and, up to 0.8.x, under colocate-all; at once
                   otherwise (both in one `train` phase).
  The weight sync to vLLM is not a phase of its own: it holds vLLM's weights (0.11: only
  the weights are woken) beside the actor's resident states, less than `generate`.

What is resident, per GPU (P parameters, n GPUs of the role, t DeepSpeed tensor parallel):
  Trained models, mixed-precision Adam (ZeRO paper: 16 B/param): bf16 params 2P, bf16
  grads 2P, fp32 master + two moments 12P, partitioned over n/t ranks of P/t by the ZeRO
  stage (1: optimizer; 2: + grads; 3: + params). Under ZeRO-3 DeepSpeed's own estimator
  (estimate_zero3_model_states_mem_needs) adds 2P/n and 4 B x the largest layer; we add the
  same, so our figures equal DeepSpeed's. The 4 B x largest layer (one gathered layer) is
  a working set: only while the model computes.
  adam_offload (offload_optimizer=cpu): master, moments and fp32 grads (16P/n) live in host
  RAM; the GPU keeps the bf16 params.
  deepspeed.enable_sleep (OpenRLHF offload_deepspeed_states): optim_states, hp_params,
  contiguous_grad_buffer and (DeepSpeed >= 0.16.5) lp_grads go to pinned host RAM after
  each fit and come back before the next; lp_params stay on the GPU (OpenRLHF PR #808:
  DeepSpeed does not offload them). With adam_offload it offloads nothing (nothing to).
  Inference models (ref, reward): bf16 params under their ZeRO stage (3 when the trained
  models use 3, else 0), on the host with ref_reward_offload.
  vLLM: gpu_memory_utilization x GPU memory while awake: vLLM sizes its KV cache as that
  share minus weights (2P/TP), activations and CUDA graphs (RUNTIME_OVERHEAD_GIB); the share
  is per instance (docs: engine_args gpu_memory_utilization). With vllm.enable_sleep
  (colocate-all only; OpenRLHF calls sleep(level=1)): weights to host RAM, KV cache
  discarded; what stays (CUDA context, NCCL, CUDA-graph pool) is VLLM_ASLEEP_GIB
  (vLLM docs, sleep mode: "releasing up to 90%+ of GPU memory").
  Each DeepSpeed process on a GPU: CUDA context and NCCL buffers, CUDA_CONTEXT_GIB.
Working sets, only while the role computes:
  Training activations per micro batch (Korthikanti et al. 2022, 16-bit): a layer holds
  s*b*h*(34 + 5*a*s/h) bytes, the attention-score term gone with flash attention; with
  gradient checkpointing only each layer's input (2*s*b*h) is kept plus one layer being
  recomputed. Logits (actor, models/actor.py): HF returns bf16 logits, OpenRLHF casts them
  to fp32; flash-attn's cross_entropy_loss saves the fp32 logits and its backward allocates
  fp32 dlogits (inplace_backward=False): 8 B x tokens x vocab while training, 6 B (bf16 +
  fp32 copy) in a no-grad forward. A no-grad forward otherwise holds one layer (34*s*b*h).
Tokens per micro batch per GPU (s x b above): micro batch x max_len (prompt + generated)
  sequences; packed (packing_samples), one sequence of micro batch x max_len tokens, split
  over ring_attn_size GPUs. Dynamic batching fills a micro batch up to max_tokens_per_gpu x
  ring_attn_size x tensor_parallel tokens (utils/seqlen_balancing.py), so max_tokens_per_gpu
  per GPU after the ring split; max_len is only a bound (one longer sequence is a micro
  batch of its own: ceil(max_len / ring_attn_size) tokens per GPU).

Refusing and warning. The token counts above are bounds the data may never reach, and the
sizes of allocator fragmentation, NCCL and library versions move the figures by several GiB;
the resident parts (states, weights, vLLM's share) do not depend on the data. So:
  refused (reason memory) when clearly over: the resident parts of a phase alone exceed the
    GPU (no micro batch fits), or the peak exceeds the GPU by more than OVER_MARGIN and
    cluster.gpu_memory_gb is stated (an assumed GPU size is not grounds to refuse);
  warned when the peak exceeds the GPU otherwise (with the tokens per GPU that fit), or is
    within HEADROOM under it. vLLM alone on its GPUs is never warned about: it takes its
    share by construction.
Not covered: fragmentation, the entropy term (actor.entropy_coef set: another ~8 B x tokens x
  vocab), tensor-parallel splitting of activations (kept whole: an over-estimate), dataloader
  and tokenizer memory, host memory while loading checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.placement import NodeFree, declared_nodes, simulate
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.shapes import Shape, from_fields, lookup
from rlhf_launch.openrlhf.flagset import version_key

GIB = 1024**3
RUNTIME_OVERHEAD_GIB = 3.0  # vLLM, awake: activations, CUDA graphs, NCCL (inside its share)
VLLM_ASLEEP_GIB = 1.5  # vLLM, asleep: CUDA context, NCCL communicators, CUDA-graph pool
CUDA_CONTEXT_GIB = 0.5  # each DeepSpeed process on a GPU: CUDA context and NCCL buffers
HEADROOM = 0.10  # warn when the peak is within this fraction under the GPU
OVER_MARGIN = 0.15  # refuse (stated GPU size) only when the peak is over the GPU by more than this
TRAIN_LOGIT_BYTES = 8  # fp32 logits saved for the loss + fp32 dlogits
FORWARD_LOGIT_BYTES = 6  # bf16 logits + their fp32 copy, no grad

# Parts that exist only while their role computes (the rest is resident while it is awake).
TRANSIENT = ("activations", "logits", "forward", "gather_buffer")
# Parts a DeepSpeed model keeps on the GPU while it sleeps (offload_deepspeed_states).
KEPT_ASLEEP = ("params", "cuda_context")


def gib(n_bytes: float) -> float:
    return n_bytes / GIB


def model_states(params: float, largest: float, stage: int, world: int, offload: bool) -> tuple[dict[str, float], dict[str, float]]:
    """(GPU parts, host parts) in bytes per rank for mixed-precision Adam training."""
    p, n = params, max(1, world)
    shard = {0: (1, 1, 1), 1: (1, 1, n), 2: (1, n, n), 3: (n, n, n)}[stage]
    gpu = {"params": 2 * p / shard[0]}
    host: dict[str, float] = {}
    if offload:
        host = {"optimizer": 12 * p / n, "fp32_grads": 4 * p / n}  # fp32 master + 2 moments; fp32 grads
    else:
        gpu["grads"] = 2 * p / shard[1]
        gpu["optimizer"] = 12 * p / shard[2]
    if stage == 3:
        if not offload:
            gpu["zero3_extra"] = 2 * p / n
        gpu["gather_buffer"] = 4 * largest
    return gpu, host


def activations(shape: Shape, micro_batch: int, seq: int, checkpointing: bool, flash: bool) -> float:
    s, b, h, a = seq, micro_batch, shape.hidden, shape.heads
    per_layer = s * b * h * (34 + (0 if flash else 5 * a * s / h))
    if checkpointing:
        return 2 * s * b * h * shape.layers + per_layer
    return per_layer * shape.layers


@dataclass
class RoleMemory:
    role: str
    shape: str
    gpus: int
    parts: dict[str, float]  # GiB per GPU while the role does its main work (train / forward / generate)
    phase: str  # train | experience | generate
    host_parts: dict[str, float] = field(default_factory=dict)  # GiB per rank
    sleeps: bool = False  # leaves the GPU outside its phases (vLLM / DeepSpeed sleep)
    notes: list[str] = field(default_factory=list)
    kv_sequences: float | None = None  # vLLM: sequences of max_len its KV cache holds
    forward: dict[str, float] = field(default_factory=dict)  # actor/critic: working set of the no-grad forward
    asleep: dict[str, float] = field(default_factory=dict)  # GiB per GPU kept while asleep
    tokens: int = 0  # tokens per GPU its main working set is for
    forward_tokens: int = 0  # actor/critic: tokens per GPU of the no-grad forward
    host_setting: str = ""  # the config setting that puts host_parts in host RAM ("" when none)

    @property
    def gpu(self) -> float:
        return sum(self.parts.values())

    @property
    def resident(self) -> float:
        """GiB while awake and idle: everything but the working set."""
        return sum(v for k, v in self.parts.items() if k not in TRANSIENT)

    @property
    def idle(self) -> float:
        """GiB while another role's phase runs."""
        return sum(self.asleep.values()) if self.sleeps else self.resident

    @property
    def host_per_rank(self) -> float:
        return sum(self.host_parts.values())


@dataclass
class GroupMemory:
    name: str
    roles: list[str]
    phases: dict[str, float]  # GiB per GPU in each phase
    floors: dict[str, float] = field(default_factory=dict)  # the resident part of each phase (no working sets)
    working: dict[str, tuple[float, int]] = field(default_factory=dict)  # phase -> (working GiB, its tokens per GPU)

    @property
    def peak(self) -> float:
        return max(self.phases.values()) if self.phases else 0.0

    @property
    def floor(self) -> float:
        return max(self.floors.values()) if self.floors else 0.0

    @property
    def peak_phase(self) -> str:
        if not self.phases:
            return ""
        if len(set(round(v, 6) for v in self.phases.values())) == 1 and len(self.phases) > 1:
            return "always"
        return max(self.phases, key=lambda phase: self.phases[phase])


@dataclass
class MemoryReport:
    roles: list[RoleMemory]
    groups: list[GroupMemory]
    host_per_node: dict[str, float]  # GiB, declared node -> need
    gpu_limit: float
    host_limit: float | None
    findings: list[Finding]
    kv_sequences: float | None = None
    host_sources: dict[str, dict[str, float]] = field(default_factory=dict)  # declared node -> setting -> GiB

    def host_fix(self) -> str:
        """The hint for the busiest node's host RAM (core.memory.host_fix)."""
        if not self.host_per_node:
            return host_fix({})
        busiest = max(self.host_per_node, key=lambda n: self.host_per_node[n])
        return host_fix(self.host_sources.get(busiest, {}))

    def group_of(self, role: str) -> GroupMemory | None:
        return next((g for g in self.groups if role in g.roles), None)

    def as_json(self) -> list[dict[str, Any]]:
        out = []
        host_peak = max(self.host_per_node.values(), default=0.0)
        for r in self.roles:
            group = self.group_of(r.role)
            peak = group.peak if group else r.gpu
            out.append(
                {
                    "role": r.role,
                    "shape": r.shape,
                    "gpus": r.gpus,
                    "gpu_gib_own": round(r.gpu, 2),
                    "gpu_gib_peak": round(peak, 2),
                    "gpu_gib_resident": round(group.floor if group else r.resident, 2),
                    "gpu_gib_limit": self.gpu_limit,
                    "peak_phase": group.peak_phase if group else r.phase,
                    "phases": {k: round(v, 2) for k, v in group.phases.items()} if group else {},
                    "shared_with": [x for x in group.roles if x != r.role] if group else [],
                    "host_gib_per_rank": round(r.host_per_rank, 2),
                    "host_parts": {k: round(v, 2) for k, v in r.host_parts.items()},
                    "host_gib_per_node": round(host_peak, 1),
                    "host_gib_limit": self.host_limit,
                    "parts": {k: round(v, 2) for k, v in r.parts.items()},
                    "notes": r.notes,
                }
            )
        return out


@dataclass(frozen=True)
class Batch:
    """What one forward/backward pass holds per GPU: `sequences` of `seq` tokens each."""

    sequences: int
    seq: int

    @property
    def tokens(self) -> int:
        return self.sequences * self.seq


def batches(cfg: LaunchConfig, settings: Settings | None, worst: bool = False) -> tuple[Batch, Batch]:
    """(training micro batch, rollout forward micro batch) per GPU; `worst`: with max_len sequences only."""
    t = cfg.train
    max_len = settings.max_len if settings and settings.max_len else cfg.data.prompt_max_len + cfg.data.generate_max_len
    ring = settings.ring_attn_size if settings else (cfg.deepspeed.ring_attn_size or 1)
    if settings is not None and settings.dynamic_batch:
        # a micro batch holds up to max_tokens_per_gpu x ring tokens, split over the ring: the budget per GPU
        train_budget = settings.train_max_tokens_per_gpu or max_len
        rollout_budget = settings.rollout_max_tokens_per_gpu or train_budget
        if worst:
            longest = -(-max_len // ring)
            train_budget, rollout_budget = max(train_budget, longest), max(rollout_budget, longest)
        return Batch(1, train_budget), Batch(1, rollout_budget)
    if (settings is not None and settings.packing) or (settings is None and cfg.deepspeed.packing_samples):
        return Batch(1, -(-t.micro_train_batch_size * max_len // ring)), Batch(1, -(-t.micro_rollout_batch_size * max_len // ring))
    return Batch(t.micro_train_batch_size, max_len), Batch(t.micro_rollout_batch_size, max_len)


def _shapes(cfg: LaunchConfig) -> dict[str, tuple[Shape | None, str]]:
    m = cfg.models
    explicit = from_fields(m)
    actor = (explicit, "models.* shape keys") if explicit else lookup(m.actor)
    reward = lookup(m.reward) if m.reward else (None, "remote reward")
    if m.critic:
        critic = lookup(m.critic)
    elif m.reward and not m.remote_reward:
        critic = reward  # OpenRLHF initialises the critic from the reward model
    else:
        critic = actor
    return {"actor": actor, "ref": actor, "critic": critic, "reward": reward}


def estimate(cfg: LaunchConfig, plan: Plan, settings: Settings | None = None) -> MemoryReport:
    limit = cfg.cluster.gpu_memory_gb
    findings: list[Finding] = []
    roles = _roles(cfg, plan, settings, findings, worst=False)
    kv_sequences = None
    vllm = next((r for r in roles if r.role == "vllm"), None)
    if vllm is not None:
        kv_sequences = vllm.kv_sequences
    groups = _groups(cfg, plan, roles, settings)
    for g in groups:
        _check_gpu(g, limit, findings, cfg)
    if settings is not None and batches(cfg, settings, worst=True) != batches(cfg, settings):
        worst = _groups(cfg, plan, _roles(cfg, plan, settings, [], worst=True), settings)
        for g in worst:
            planned = next((p for p in groups if p.name == g.name), None)
            if planned is not None and planned.peak <= limit < g.peak:
                findings.append(
                    warning(
                        f"placement.{g.roles[0]}",
                        f"{'+'.join(g.roles)} fits with the token budgets ({planned.peak:.1f} GiB per GPU) but needs {g.peak:.1f} GiB "
                        f"of {limit:g} when a micro batch is one sequence of max_len {settings.max_len} tokens",
                        "lower data.generate_max_len, or raise ring_attn_size",
                    )
                )
    sources = _host_sources(plan, roles)
    host = {node: sum(parts.values()) for node, parts in sources.items()}
    _check_host(host, cfg.cluster.host_memory_gb, findings, sources)
    return MemoryReport(roles, groups, host, limit, cfg.cluster.host_memory_gb, findings, kv_sequences, sources)


def _ds_tp(cfg: LaunchConfig, settings: Settings | None) -> int:
    return settings.ds_tensor_parallel_size if settings is not None else (cfg.deepspeed.tensor_parallel_size or 1)


def _roles(cfg: LaunchConfig, plan: Plan, settings: Settings | None, findings: list[Finding], *, worst: bool) -> list[RoleMemory]:
    ds = cfg.deepspeed
    limit = cfg.cluster.gpu_memory_gb
    shapes = _shapes(cfg)
    roles: list[RoleMemory] = []
    train, rollout = batches(cfg, settings, worst)
    flash = ds.flash_attn if settings is None else "flash_attention" in settings.attention
    tp = _ds_tp(cfg, settings)

    for role in ("actor", "critic", "ref", "reward"):
        rp = plan.role(role)
        if not rp.enabled:
            continue
        shape, source = shapes[role]
        if shape is None:
            key = "models.reward" if role == "reward" else ("models.critic" if role == "critic" else "models.actor")
            findings.append(
                warning(
                    key, f"memory of {role} not estimated: {source}", "point it at a local model directory, or set models.layers/hidden/..."
                )
            )
            continue
        p, largest = shape.params / tp, shape.largest_layer / tp  # DeepSpeed AutoTP splits each layer over t GPUs
        forward = {"forward": gib(rollout.tokens * shape.hidden * 34)}
        if role in ("actor", "ref"):
            forward["logits"] = gib(rollout.tokens * shape.vocab * FORWARD_LOGIT_BYTES)
        context = {"cuda_context": CUDA_CONTEXT_GIB}
        if role in ("actor", "critic"):
            gpu, host = model_states(p, largest, ds.zero_stage, max(1, rp.gpus // tp), ds.adam_offload)
            parts = {k: gib(v) for k, v in gpu.items()}
            parts["activations"] = gib(activations(shape, train.sequences, train.seq, ds.gradient_checkpointing, flash))
            if role == "actor":
                parts["logits"] = gib(train.tokens * shape.vocab * TRAIN_LOGIT_BYTES)
            parts.update(context)
            sleeps = ds.enable_sleep and not ds.adam_offload  # offload_deepspeed_states returns early with adam_offload
            forward = {**({"gather_buffer": parts["gather_buffer"]} if "gather_buffer" in parts else {}), **forward}
            host_parts = {k: gib(v) for k, v in host.items()}
            if sleeps:  # what sleep moves to pinned host RAM between fits
                host_parts = {k: v for k, v in parts.items() if k not in TRANSIENT and k not in KEPT_ASLEEP}
            roles.append(
                RoleMemory(
                    role,
                    shape.name,
                    rp.gpus,
                    parts,
                    "train",
                    host_parts,
                    sleeps=sleeps,
                    forward=forward,
                    asleep={k: v for k, v in parts.items() if k in KEPT_ASLEEP},
                    tokens=train.tokens,
                    forward_tokens=rollout.tokens,
                    host_setting=(
                        "deepspeed.adam_offload" if ds.adam_offload and host_parts else "deepspeed.enable_sleep" if sleeps else ""
                    ),
                )
            )
        else:
            n = max(1, rp.gpus // tp) if ds.zero_stage == 3 else 1
            params_gpu = 0.0 if ds.ref_reward_offload else 2 * p / n
            host_bytes = 2 * p / n if ds.ref_reward_offload else 0.0
            parts = {"params": gib(params_gpu)}
            if ds.zero_stage == 3 or ds.ref_reward_offload:
                parts["gather_buffer"] = gib(4 * largest)
            parts.update(forward)
            parts.update(context)
            roles.append(
                RoleMemory(
                    role,
                    shape.name,
                    rp.gpus,
                    parts,
                    "experience",
                    {"params": gib(host_bytes)} if host_bytes else {},
                    tokens=rollout.tokens,
                    host_setting="deepspeed.ref_reward_offload" if host_bytes else "",
                )
            )

    if plan.vllm_engines:
        shape, source = shapes["actor"]
        if shape is None:
            findings.append(warning("placement.vllm", f"vLLM memory not estimated: {source}"))
        else:
            roles.append(_vllm(cfg, plan, shape, limit, findings))
    return roles


def _vllm(cfg: LaunchConfig, plan: Plan, shape: Shape, limit: float, findings: list[Finding]) -> RoleMemory:
    v = cfg.placement.vllm
    tp = plan.vllm_tp
    weights = gib(2 * shape.params / tp)
    share = limit * v.gpu_memory_utilization
    kv_budget = share - weights - RUNTIME_OVERHEAD_GIB
    kv_heads_per_gpu = max(1, shape.kv_heads // tp)
    per_token = 2 * shape.layers * kv_heads_per_gpu * shape.head_dim * 2
    seq = cfg.data.prompt_max_len + cfg.data.generate_max_len
    sequences = max(0.0, kv_budget) * GIB / (per_token * seq)
    parts = {"weights": weights, "runtime": RUNTIME_OVERHEAD_GIB, "kv_cache": max(0.0, kv_budget)}
    notes = [f"KV cache holds ~{sequences:.0f} sequences of {seq} tokens per engine"]
    if kv_budget <= 0:
        findings.append(
            error(
                "placement.vllm.gpu_memory_utilization",
                f"vLLM weights ({weights:.1f} GiB per GPU at TP {tp}) plus {RUNTIME_OVERHEAD_GIB:g} GiB runtime exceed its "
                f"{v.gpu_memory_utilization:g} x {limit:g} = {share:.1f} GiB share: no room for a KV cache",
                "raise placement.vllm.tensor_parallel_size or gpu_memory_utilization",
                reason="memory",
            )
        )
    elif sequences < cfg.train.micro_rollout_batch_size:
        findings.append(
            warning(
                "placement.vllm",
                f"vLLM's KV cache (~{kv_budget:.1f} GiB per GPU) holds ~{sequences:.1f} sequences of {seq} tokens, "
                f"fewer than micro_rollout_batch_size {cfg.train.micro_rollout_batch_size}",
                "raise tensor_parallel_size or gpu_memory_utilization",
            )
        )
    sleeps = cfg.colocated("all") and v.enable_sleep  # OpenRLHF turns vLLM sleep off without colocate-all
    asleep = {"runtime": VLLM_ASLEEP_GIB}
    return RoleMemory(
        "vllm", shape.name, plan.vllm_gpus, parts, "generate", sleeps=sleeps, notes=notes, kv_sequences=sequences, asleep=asleep
    )


def _sequential_training(cfg: LaunchConfig, settings: Settings | None) -> bool:
    """Critic and actor train one after the other (else at once, on the same GPUs if colocated)."""
    if cfg.deepspeed.enable_sleep:
        return True
    version = settings.version if settings is not None else cfg.openrlhf.version
    try:
        old = version is not None and version_key(version) < version_key("0.9.0")
    except ValueError:
        old = False
    return old and cfg.colocated("all")  # 0.8.x waited for the critic under colocate-all


def _phases(members: list[RoleMemory], sequential: bool) -> list[tuple[str, dict[str, dict[str, float]], int]]:
    """Each phase as (name, {role: the parts it has on the GPU then}, tokens per GPU of its working set)."""
    by_role = {r.role: r for r in members}

    def idle(r: RoleMemory) -> dict[str, float]:
        return dict(r.asleep) if r.sleeps else {k: v for k, v in r.parts.items() if k not in TRANSIENT}

    out: list[tuple[str, dict[str, dict[str, float]], int]] = []
    if "vllm" in by_role:
        out.append(("generate", {r.role: (r.parts if r.role == "vllm" else idle(r)) for r in members}, 0))
    for name in ("reward", "actor", "critic", "ref"):
        r = by_role.get(name)
        if r is None:
            continue
        # a sleeping trainer stays offloaded for its forward: it reloads its states only to fit
        work = {**idle(r), **(r.forward if r.role in ("actor", "critic") else r.parts)}
        tokens = r.forward_tokens if r.role in ("actor", "critic") else r.tokens
        out.append((f"experience:{name}", {m.role: (work if m is r else idle(m)) for m in members}, tokens))
    trained = [by_role[x] for x in ("critic", "actor") if x in by_role]
    if sequential or len(trained) < 2:
        for r in trained:
            out.append((f"train:{r.role}", {m.role: (r.parts if m is r else idle(m)) for m in members}, r.tokens))
    elif trained:
        out.append(("train", {m.role: (m.parts if m in trained else idle(m)) for m in members}, trained[-1].tokens))
    return out


def _groups(cfg: LaunchConfig, plan: Plan, roles: list[RoleMemory], settings: Settings | None = None) -> list[GroupMemory]:
    by_role = {r.role: r for r in roles}
    sequential = _sequential_training(cfg, settings)
    out = []
    for g in plan.groups:
        members = [by_role[r] for r in g.roles if r in by_role]
        if not members:
            continue
        phases: dict[str, float] = {}
        floors: dict[str, float] = {}
        working: dict[str, tuple[float, int]] = {}
        for name, present, tokens in _phases(members, sequential):
            total = sum(sum(parts.values()) for parts in present.values())
            transient = sum(v for parts in present.values() for k, v in parts.items() if k in TRANSIENT)
            phases[name], floors[name] = total, total - transient
            working[name] = (transient, tokens)
        out.append(GroupMemory(g.name, [r.role for r in members], phases, floors, working))
    return out


def _fixes(group: GroupMemory, cfg: LaunchConfig) -> str:
    tips = []
    roles = set(group.roles)
    if roles & {"actor", "critic"}:
        if not cfg.deepspeed.adam_offload:
            tips.append("deepspeed.adam_offload: true")
        if not cfg.deepspeed.gradient_checkpointing:
            tips.append("deepspeed.gradient_checkpointing: true")
        if cfg.deepspeed.zero_stage < 3:
            tips.append("deepspeed.zero_stage: 3")
        if cfg.train.micro_train_batch_size > 1:
            tips.append("a smaller train.micro_train_batch_size")
        if cfg.colocated("all") and not cfg.deepspeed.enable_sleep and not cfg.deepspeed.adam_offload:
            tips.append("deepspeed.enable_sleep: true")
    if roles & {"ref", "reward"} and not cfg.deepspeed.ref_reward_offload:
        tips.append("deepspeed.ref_reward_offload: true")
    if "vllm" in roles and cfg.colocated("all") and not cfg.placement.vllm.enable_sleep:
        tips.append("placement.vllm.enable_sleep: true")
    if "vllm" in roles and len(roles) > 1:
        tips.append(f"a lower placement.vllm.gpu_memory_utilization (vLLM takes {cfg.placement.vllm.gpu_memory_utilization:g} of each GPU)")
    tips.append("more GPUs for the role")
    if not _stated(cfg):  # the estimate is only as good as the size it assumes
        tips.append(f"or, if your GPUs have more than {cfg.cluster.gpu_memory_gb:g} GiB (assumed), set cluster.gpu_memory_gb")
    return "; ".join(tips)


def _stated(cfg: LaunchConfig) -> bool:
    return "gpu_memory_gb" in cfg.cluster.model_fields_set


def _check_gpu(group: GroupMemory, limit: float, findings: list[Finding], cfg: LaunchConfig) -> None:
    key = f"placement.{group.roles[0]}"
    phase = group.peak_phase
    shared = f"{'+'.join(group.roles)} ({phase} phase)" if len(group.roles) > 1 else group.roles[0]
    peak, floor = group.peak, group.floor
    assumed = "" if _stated(cfg) else " (assumed)"
    if floor > limit:
        floor_phase = max(group.floors, key=lambda name: group.floors[name])
        findings.append(
            error(
                key,
                f"{shared} needs {peak:.1f} GiB per GPU but a GPU has {limit:g}{assumed}: its weights, optimizer states and "
                f"reserved shares alone take {floor:.1f} GiB ({floor_phase} phase), whatever the batch",
                _fixes(group, cfg),
                reason="memory",
            )
        )
    elif peak > limit:
        working, tokens = group.working.get(phase, (0.0, 0))
        fit = ""
        if working > 0 and tokens:
            fitting = int(tokens * max(0.0, limit - group.floors[phase]) / working)
            fit = f"; it fits with micro batches of up to ~{fitting} tokens per GPU" if fitting > 0 else ""
        message = (
            f"{shared} needs {peak:.1f} GiB per GPU but a GPU has {limit:g}{assumed}, when micro batches reach "
            f"{tokens} tokens per GPU ({working:.1f} GiB of working sets on {group.floors[phase]:.1f} GiB resident){fit}"
        )
        if _stated(cfg) and peak > limit * (1 + OVER_MARGIN):
            findings.append(error(key, message, _fixes(group, cfg), reason="memory"))
        else:
            findings.append(warning(key, message + ": expect out-of-memory on full micro batches", _fixes(group, cfg)))
    elif peak > limit * (1 - HEADROOM) and set(group.roles) != {"vllm"}:
        message = f"{shared} needs {peak:.1f} of {limit:g} GiB per GPU: under {HEADROOM:.0%} headroom"
        findings.append(warning(key, message, _fixes(group, cfg)))


def host_on(report: MemoryReport, plan: Plan, nodes: list[NodeFree]) -> dict[str, float]:
    """Host GiB per node of a real cluster (node_id -> GiB), where Ray PACK would put each rank."""
    return {node: sum(parts.values()) for node, parts in host_sources_on(report, plan, nodes).items()}


def host_sources_on(report: MemoryReport, plan: Plan, nodes: list[NodeFree]) -> dict[str, dict[str, float]]:
    """Host GiB per node of a real cluster by the setting that puts it there (node_id -> setting -> GiB)."""
    return _host_sources(plan, report.roles, nodes)


def _host_sources(plan: Plan, roles: list[RoleMemory], nodes: list[NodeFree] | None = None) -> dict[str, dict[str, float]]:
    """Host GiB per node (default: the declared nodes) by the setting that puts it in host RAM:
    each rank's host share, where Ray PACK would put it."""
    per_rank = {r.role: (r.host_setting, r.host_per_rank) for r in roles if r.host_per_rank}
    vllm = next((r for r in roles if r.role == "vllm"), None)
    if vllm is not None and vllm.sleeps:
        per_rank["vllm"] = ("placement.vllm.enable_sleep", vllm.parts["weights"])  # vLLM sleep (level 1) moves weights to host RAM
    nodes = nodes if nodes is not None else declared_nodes(plan.cluster_nodes, plan.cluster_gpus_per_node)
    sim = simulate(plan.groups, nodes)
    out: dict[str, dict[str, float]] = {n.node_id: {} for n in nodes}
    for placed in sim.placements:
        for node, bundles in placed.per_node.items():
            for role in placed.group.roles:
                setting, gib_per_rank = per_rank.get(role, ("", 0.0))
                if gib_per_rank:
                    key = setting or "offload"
                    out[node][key] = out[node].get(key, 0.0) + bundles * gib_per_rank
    return out


def host_fix(sources: Mapping[str, float]) -> str:
    """The hint for a node short of host RAM: only the settings that put RAM there (from the
    node's `sources`, setting -> GiB), largest first, with what each accounts for."""
    settings = sorted(((k, v) for k, v in sources.items() if v > 0 and k != "offload"), key=lambda kv: -kv[1])
    spread = "spread the training roles over more nodes"
    if not settings:
        return spread
    offs = " or ".join(f"{k} (~{v:.0f} GiB of it)" for k, v in settings)
    return f"{spread}, or turn off {offs}"


def _check_host(
    host: dict[str, float], limit: float | None, findings: list[Finding], sources: Mapping[str, Mapping[str, float]] | None = None
) -> None:
    if not host:
        return
    node, need = max(host.items(), key=lambda kv: kv[1])
    if limit is None:
        if need > 0:
            findings.append(
                warning(
                    "cluster.host_memory_gb", f"host RAM not checked: the busiest node needs ~{need:.0f} GiB", "set cluster.host_memory_gb"
                )
            )
        return
    if need > limit:
        findings.append(
            error(
                "cluster.host_memory_gb",
                f"the busiest node needs ~{need:.0f} GiB of host RAM (offloaded optimizer states and weights) but has {limit:g}",
                host_fix((sources or {}).get(node, {})),
                reason="memory",
            )
        )
    elif need > limit * (1 - HEADROOM):
        findings.append(
            warning(
                "cluster.host_memory_gb", f"the busiest node needs ~{need:.0f} of {limit:g} GiB host RAM: under {HEADROOM:.0%} headroom"
            )
        )
