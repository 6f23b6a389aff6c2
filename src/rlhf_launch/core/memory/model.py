"""The memory estimate: GiB per GPU for each role group and phase, and host GiB per node, as
plain numbers. Pure; no findings (core/memory/judge.py judges these numbers). The terms and
their sources are in the package docstring (core/memory/__init__.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding
from rlhf_launch.core.placement import NodeFree, declared_nodes, simulate
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.shapes import Shape, from_fields, lookup, near_shapes
from rlhf_launch.openrlhf.flagset import version_key

GIB = 1024**3
RUNTIME_OVERHEAD_GIB = 3.0  # vLLM, awake: activations, CUDA graphs, NCCL (inside its share)
VLLM_ASLEEP_GIB = 1.5  # vLLM, asleep: CUDA context, NCCL communicators, CUDA-graph pool
CUDA_CONTEXT_GIB = 0.5  # each DeepSpeed process on a GPU: CUDA context and NCCL buffers
CONTEXT_SPREAD_GIB = 0.5  # the context and NCCL figure moves this much with driver, NCCL channels and communicators
HEADROOM = 0.10  # warn when the peak is within this fraction under the GPU
# Refuse (stated GPU size) only when the peak at full token budgets is over the GPU by more than
# this: budgets are bounds, and OpenRLHF's own Qwen3-4B thinking example (v0.9.1-v0.10.2, vLLM
# awake at 0.7 beside 16k-token micro batches) reaches 1.36x of an 80 GB GPU at its bounds.
OVER_MARGIN = 0.40
TRAIN_LOGIT_BYTES = 10  # fp32 logits saved for the loss + fp32 dlogits + their bf16 cast for lm_head's backward
FORWARD_LOGIT_BYTES = 6  # bf16 logits + their fp32 copy, no grad
REDUCE_BUCKET_ELEMENTS = 5e8  # DeepSpeed's default reduce_bucket_size: OpenRLHF's "auto" is dropped by DeepSpeed
FRAGMENTATION = 0.10  # PyTorch's caching allocator reserves this fraction of the working sets beyond what it allocates
# The margin's high end only (what a run can reach, not what it usually takes):
# - GROWTH: after some updates with micro batches of varying length (packing, dynamic batching, rollouts of
#   any length up to max_len), the caching allocator holds blocks cut for earlier shapes that a new, larger
#   request cannot reuse; torch's own OOM text points at it ("reserved but unallocated ... expandable_segments",
#   as in OpenRLHF#398's). Not calibrated on a measurement (no public thread shows the allocator's peak before
#   the OOM: torch frees its cache and retries before raising), so it is 0 until one is: a guessed quarter
#   of the working sets gained no OOM report on either half and warned 3 more runs that ran.
# - NCCL_COMMUNICATOR_GIB: each NCCL communicator's buffers (NCCL_BUFFSIZE 4 MiB x channels x send/recv);
#   a trainer process holds more than one: DeepSpeed's world and data-parallel groups, and the actor the
#   vLLM weight-sync group (ppo_actor.py, model_update_group). Counted beyond the one in CUDA_CONTEXT_GIB.
GROWTH = 0.0  # no published measurement yet (see above)
NCCL_COMMUNICATOR_GIB = 0.25
COMMUNICATORS = {"actor": 3, "critic": 2, "ref": 1, "reward": 1}

# Parts that exist only while their role computes (the rest is resident while it is awake).
TRANSIENT = ("activations", "logits", "forward", "gather_buffer", "reduce_bucket", "sync_buffer")
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


def layer_bytes_per_token(shape: Shape, seq: int, flash: bool) -> float:
    """Bytes one decoder layer saves for backward per token (16-bit, gated MLP): two RMSNorms
    computed in fp32 (fp32 input + bf16 output each, 12h), attention (normed input, q, rotated
    q, output: 8h; k, v before and after rotary: 8 x kv width), the MLP (normed input 2h; gate,
    up, SiLU and product: 8 x intermediate). Korthikanti et al. 2022 count 34h for GPT's 4h MLP;
    Llama-style layers hold 1.3-1.9x that. Without flash attention the scores add 5 x heads x s."""
    kv_width = shape.kv_heads * shape.head_dim
    per_token = 22 * shape.hidden + 8 * shape.intermediate + 8 * kv_width
    return per_token + (0 if flash else 5 * shape.heads * seq)


def activations(shape: Shape, micro_batch: int, seq: int, checkpointing: bool, flash: bool) -> float:
    """Training activations of one micro batch (`micro_batch` sequences of `seq` tokens): every
    layer's saved tensors, or with gradient checkpointing each layer's input (2 B x hidden per
    token; HF's non-reentrant checkpoint keeps only the hidden states) plus one layer recomputed."""
    tokens = seq * micro_batch
    per_layer = tokens * layer_bytes_per_token(shape, seq, flash)
    if checkpointing:
        return 2 * tokens * shape.hidden * shape.layers + per_layer
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
    sync: dict[str, float] = field(default_factory=dict)  # actor: working set of the weight sync to vLLM

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
    """One placement group's GPUs (every role on them), phase by phase, GiB per GPU."""

    name: str
    roles: list[str]
    phases: dict[str, float]  # the estimate in each phase (allocated + the allocator's fragmentation)
    floors: dict[str, float] = field(default_factory=dict)  # the resident part of each phase (no working sets)
    working: dict[str, tuple[float, int]] = field(default_factory=dict)  # phase -> (working GiB, its tokens per GPU)
    made_of: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> "role.part" -> GiB
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # phase -> (low, high) GiB: the margin

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

    @property
    def peak_range(self) -> tuple[float, float]:
        phase = max(self.phases, key=lambda name: self.phases[name]) if self.phases else ""
        return self.ranges.get(phase, (self.peak, self.peak))

    def as_json(self, limit: float) -> dict[str, Any]:
        return {
            "group": self.name,
            "roles": self.roles,
            "peak_gib": round(self.peak, 2),
            "peak_phase": self.peak_phase,
            "peak_range_gib": [round(x, 2) for x in self.peak_range],
            "limit_gib": limit,
            "headroom_gib": round(limit - self.peak, 2),
            "phases": {
                name: {
                    "gib": round(total, 2),
                    "range_gib": [round(x, 2) for x in self.ranges.get(name, (total, total))],
                    "resident_gib": round(self.floors.get(name, total), 2),
                    "working_gib": round(self.working.get(name, (0.0, 0))[0], 2),
                    "tokens_per_gpu": self.working.get(name, (0.0, 0))[1],
                    "headroom_gib": round(limit - total, 2),
                    "made_of": {k: round(v, 2) for k, v in sorted(self.made_of.get(name, {}).items(), key=lambda kv: -kv[1])},
                }
                for name, total in self.phases.items()
            },
        }


@dataclass(frozen=True)
class Unsized:
    """A role the estimate could not size, and the bracket it could give: the peak of its group
    with the nearest known shapes below and above the size its name states (None: no bracket)."""

    role: str
    key: str
    why: str
    bracket: tuple[float, float] | None = None
    between: str = ""  # the shapes of the bracket


@dataclass(frozen=True)
class VllmKv:
    """vLLM's share and its KV cache per GPU (GiB), and what that holds."""

    share: float
    weights: float
    kv_budget: float
    sequences: float
    seq: int
    tp: int
    utilization: float


@dataclass
class Estimate:
    """Everything the estimate says, as numbers: per role, per role group and phase, per node."""

    roles: list[RoleMemory]
    groups: list[GroupMemory]
    host_per_node: dict[str, float]  # GiB, declared node -> need
    host_sources: dict[str, dict[str, float]]  # declared node -> setting -> GiB
    gpu_limit: float
    gpu_stated: bool  # cluster.gpu_memory_gb was set (else assumed)
    host_limit: float | None
    unsized: list[Unsized] = field(default_factory=list)
    worst: list[GroupMemory] = field(default_factory=list)  # with one max_len sequence per micro batch (dynamic batching)
    vllm: VllmKv | None = None
    max_len: int = 0


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
    unsized: list[Unsized] = field(default_factory=list)

    def host_fix(self) -> str:
        """The hint for the busiest node's host RAM (core.memory.host_fix)."""
        from rlhf_launch.core.memory.judge import host_fix

        if not self.host_per_node:
            return host_fix({})
        busiest = max(self.host_per_node, key=lambda n: self.host_per_node[n])
        return host_fix(self.host_sources.get(busiest, {}))

    def group_of(self, role: str) -> GroupMemory | None:
        return next((g for g in self.groups if role in g.roles), None)

    def groups_json(self) -> list[dict[str, Any]]:
        return [g.as_json(self.gpu_limit) for g in self.groups]

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


def max_len_of(cfg: LaunchConfig, settings: Settings | None) -> int:
    return settings.max_len if settings and settings.max_len else cfg.data.prompt_max_len + cfg.data.generate_max_len


def batches(cfg: LaunchConfig, settings: Settings | None, worst: bool = False) -> tuple[Batch, Batch]:
    """(training micro batch, rollout forward micro batch) per GPU; `worst`: with max_len sequences only."""
    t = cfg.train
    max_len = max_len_of(cfg, settings)
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


def shapes_of(cfg: LaunchConfig) -> dict[str, tuple[Shape | None, str]]:
    """Each model role's shape and where it came from, or (None, why not)."""
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


_shapes = shapes_of  # the name core/storage.py used


def _model_of(cfg: LaunchConfig, role: str) -> str | None:
    m = cfg.models
    if role == "reward":
        return m.reward
    if role == "critic":
        return m.critic or (m.reward if m.reward and not m.remote_reward else m.actor)
    return m.actor


def measure(cfg: LaunchConfig, plan: Plan, settings: Settings | None = None) -> Estimate:
    """The estimate, as numbers only."""
    shapes = shapes_of(cfg)
    roles = _roles(cfg, plan, settings, shapes, worst=False)
    groups = _groups(cfg, plan, roles, settings)
    worst: list[GroupMemory] = []
    if settings is not None and batches(cfg, settings, worst=True) != batches(cfg, settings):
        worst = _groups(cfg, plan, _roles(cfg, plan, settings, shapes, worst=True), settings)
    sources = _host_sources(plan, roles)
    host = {node: sum(parts.values()) for node, parts in sources.items()}
    unsized = [_unsized(cfg, plan, settings, shapes, role) for role in _sized_roles(cfg, plan) if shapes[_shape_role(role)][0] is None]
    return Estimate(
        roles,
        groups,
        host,
        sources,
        cfg.cluster.gpu_memory_gb,
        "gpu_memory_gb" in cfg.cluster.model_fields_set,
        cfg.cluster.host_memory_gb,
        unsized,
        worst,
        _vllm_kv(cfg, plan, shapes["actor"][0]),
        max_len_of(cfg, settings),
    )


def _shape_role(role: str) -> str:
    return "actor" if role == "vllm" else role  # vLLM serves the actor


def _sized_roles(cfg: LaunchConfig, plan: Plan) -> list[str]:
    roles = [r for r in ("actor", "critic", "ref", "reward") if plan.role(r).enabled]
    return roles + (["vllm"] if plan.vllm_engines else [])


_KEYS = {"actor": "models.actor", "ref": "models.actor", "vllm": "placement.vllm", "critic": "models.critic", "reward": "models.reward"}


def _unsized(cfg: LaunchConfig, plan: Plan, settings: Settings | None, shapes: dict[str, tuple[Shape | None, str]], role: str) -> Unsized:
    """The bracket of an unknown shape: its group's peak with each known shape within 15% of the
    size its name states ("...-14B-..."), lowest and highest; None when the name states no size."""
    why = shapes[_shape_role(role)][1]
    model = _model_of(cfg, _shape_role(role))
    near = near_shapes(model)
    if not near:
        return Unsized(role, _KEYS[role], why)
    peaks = []
    for shape in near:
        # the roles that share this model name take the same stand-in shape
        filled: dict[str, tuple[Shape | None, str]] = {
            r: ((shape, w) if s is None and _model_of(cfg, r) == model else (s, w)) for r, (s, w) in shapes.items()
        }
        groups = _groups(cfg, plan, _roles(cfg, plan, settings, filled, worst=False), settings)
        peaks.append(max((g.peak for g in groups if role in g.roles), default=0.0))
    return Unsized(role, _KEYS[role], why, (min(peaks), max(peaks)), ", ".join(shape.name for shape in near))


def _ds_tp(cfg: LaunchConfig, settings: Settings | None) -> int:
    return settings.ds_tensor_parallel_size if settings is not None else (cfg.deepspeed.tensor_parallel_size or 1)


def _roles(
    cfg: LaunchConfig, plan: Plan, settings: Settings | None, shapes: dict[str, tuple[Shape | None, str]], *, worst: bool
) -> list[RoleMemory]:
    ds = cfg.deepspeed
    roles: list[RoleMemory] = []
    train, rollout = batches(cfg, settings, worst)
    attention = ds.attention if settings is None else settings.attention
    flash = "flash" in attention or "sdpa" in attention  # eager attention alone keeps the scores
    tp = _ds_tp(cfg, settings)

    for role in ("actor", "critic", "ref", "reward"):
        rp = plan.role(role)
        shape = shapes[role][0]
        if not rp.enabled or shape is None:
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
            if ds.zero_stage >= 1:
                # gradients reduced in buckets of reduce_bucket_size bf16 elements
                parts["reduce_bucket"] = gib(2 * min(REDUCE_BUCKET_ELEMENTS, p))
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
                    # one parameter gathered at a time (bf16), and its clone for CUDA IPC (ppo_actor.broadcast_to_vllm)
                    sync={"sync_buffer": gib(4 * largest)} if role == "actor" else {},
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

    actor_shape = shapes["actor"][0]
    if plan.vllm_engines and actor_shape is not None:
        roles.append(_vllm(cfg, plan, actor_shape))
    return roles


def _vllm_kv(cfg: LaunchConfig, plan: Plan, shape: Shape | None) -> VllmKv | None:
    if not plan.vllm_engines or shape is None:
        return None
    v = cfg.placement.vllm
    tp = plan.vllm_tp
    weights = gib(2 * shape.params / tp)
    share = cfg.cluster.gpu_memory_gb * v.gpu_memory_utilization
    kv_budget = share - weights - RUNTIME_OVERHEAD_GIB
    kv_heads_per_gpu = max(1, shape.kv_heads // tp)
    per_token = 2 * shape.layers * kv_heads_per_gpu * shape.head_dim * 2
    seq = cfg.data.prompt_max_len + cfg.data.generate_max_len
    sequences = max(0.0, kv_budget) * GIB / (per_token * seq)
    return VllmKv(share, weights, kv_budget, sequences, seq, tp, v.gpu_memory_utilization)


def _vllm(cfg: LaunchConfig, plan: Plan, shape: Shape) -> RoleMemory:
    kv = _vllm_kv(cfg, plan, shape)
    assert kv is not None
    parts = {"weights": kv.weights, "runtime": RUNTIME_OVERHEAD_GIB, "kv_cache": max(0.0, kv.kv_budget)}
    notes = [f"KV cache holds ~{kv.sequences:.0f} sequences of {kv.seq} tokens per engine"]
    sleeps = cfg.colocated("all") and cfg.placement.vllm.enable_sleep  # OpenRLHF turns vLLM sleep off without colocate-all
    asleep = {"runtime": VLLM_ASLEEP_GIB}
    return RoleMemory(
        "vllm", shape.name, plan.vllm_gpus, parts, "generate", sleeps=sleeps, notes=notes, kv_sequences=kv.sequences, asleep=asleep
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
    vllm, actor = by_role.get("vllm"), by_role.get("actor")
    if vllm is not None and actor is not None:
        # the weight sync after training: a sleeping vLLM wakes its weights only (0.11), the actor
        # (offloaded again when it sleeps) gathers one parameter at a time
        woken = {"weights": vllm.parts["weights"], **vllm.asleep} if vllm.sleeps else vllm.parts
        present = {m.role: idle(m) for m in members}
        present["vllm"], present["actor"] = woken, {**idle(actor), **actor.sync}
        out.append(("sync", present, 0))
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
        group = GroupMemory(g.name, [r.role for r in members], {})
        for name, present, tokens in _phases(members, sequential):
            made_of = {f"{role}.{k}": v for role, parts in present.items() for k, v in parts.items() if v}
            transient = sum(v for parts in present.values() for k, v in parts.items() if k in TRANSIENT)
            allocated = sum(made_of.values())
            fragmentation = FRAGMENTATION * transient
            if fragmentation:
                made_of["allocator.fragmentation"] = fragmentation
            processes = sum(1 for parts in present.values() if "cuda_context" in parts)
            spread = fragmentation + CONTEXT_SPREAD_GIB * processes
            communicators = sum(COMMUNICATORS.get(role, 1) - 1 for role, parts in present.items() if "cuda_context" in parts)
            upper = spread + GROWTH * transient + NCCL_COMMUNICATOR_GIB * communicators
            total = allocated + fragmentation
            group.phases[name], group.floors[name] = total, allocated - transient
            group.working[name] = (transient + fragmentation, tokens)
            group.made_of[name] = made_of
            group.ranges[name] = (total - spread, total + upper)
        out.append(group)
    return out


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
