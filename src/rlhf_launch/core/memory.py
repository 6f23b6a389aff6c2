"""Memory feasibility: per-role GPU memory and per-node host memory, before submission. Pure.

Training roles (actor, critic), mixed-precision Adam (ZeRO paper: 16 bytes/param):
  bf16 params 2 B, bf16 grads 2 B, fp32 master + two Adam moments 12 B, partitioned over
  the role's GPUs by the ZeRO stage (1: optimizer; 2: + grads; 3: + params). Under ZeRO-3
  DeepSpeed's own estimator (estimate_zero3_model_states_mem_needs) adds 2 B/param and
  4 B x the largest layer; we add the same, so our figures equal DeepSpeed's.
  adam_offload (DeepSpeed offload_optimizer=cpu): fp32 master, moments and fp32 grads,
  16 B/param, live in host RAM, partitioned across the role's ranks; the GPU keeps the bf16
  params and DeepSpeed's largest-layer buffer.
  Activations per micro batch (Korthikanti et al. 2022, 16-bit): a layer holds
  s*b*h*(34 + 5*a*s/h) bytes, the attention-score term gone with flash attention; with
  gradient checkpointing only each layer's input (2*s*b*h) is kept plus one layer being
  recomputed. The logits buffer is micro batch x seq x vocab x 4 bytes (fp32).
Tokens per micro batch (s x b above): micro batch x max_len (prompt + generated) sequences;
  packed (packing_samples), one sequence of micro batch x max_len tokens. Dynamic batching
  fills each micro batch up to its token budget (train / rollout max_tokens_per_gpu): that is
  the plan, and max_len only a bound (one longer sequence is a micro batch of its own), so
  needing more than a GPU has only in that worst case is a warning. Ring attention splits
  each sequence over ring_attn_size GPUs.
Inference roles (ref, reward): bf16 params under their ZeRO stage, on the host with
  ref_reward_offload; a forward pass's working set (one layer) and, for ref, fp32 logits.
vLLM engines: weights 2P/TP per GPU; KV-cache budget = gpu_memory_gb x utilization -
  weights - RUNTIME_OVERHEAD_GIB (CUDA graphs, activations, NCCL); the engine takes its whole
  utilization share.
Colocation: what shares a GPU adds up per phase; vLLM sleep frees its share while
  DeepSpeed trains, DeepSpeed sleep moves actor/critic states to host RAM while vLLM
  generates. The peak phase is reported.
Not covered: fragmentation, NCCL buffers outside vLLM, the CUDA context of each process,
  dataloader and tokenizer memory, host memory while loading checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.placement import NodeFree, declared_nodes, simulate
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.shapes import Shape, from_fields, lookup

GIB = 1024**3
RUNTIME_OVERHEAD_GIB = 3.0
HEADROOM = 0.10


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
        gpu["zero3_buffers"] = 4 * largest + (0 if offload else 2 * p / n)
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
    parts: dict[str, float]  # GiB per GPU
    phase: str  # train | generate | always
    host_parts: dict[str, float] = field(default_factory=dict)  # GiB per rank
    sleeps: bool = False  # leaves the GPU outside its phase
    notes: list[str] = field(default_factory=list)
    kv_sequences: float | None = None  # vLLM: sequences of max_len its KV cache holds

    @property
    def gpu(self) -> float:
        return sum(self.parts.values())

    @property
    def host_per_rank(self) -> float:
        return sum(self.host_parts.values())


@dataclass
class GroupMemory:
    name: str
    roles: list[str]
    phases: dict[str, float]  # GiB per GPU in each phase

    @property
    def peak(self) -> float:
        return max(self.phases.values()) if self.phases else 0.0

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
                    "gpu_gib_limit": self.gpu_limit,
                    "peak_phase": group.peak_phase if group else r.phase,
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
    ring = settings.ring_attn_size if settings else 1
    if settings is not None and settings.dynamic_batch:
        train_budget = settings.train_max_tokens_per_gpu or max_len
        rollout_budget = settings.rollout_max_tokens_per_gpu or train_budget
        if worst:
            train_budget, rollout_budget = max(train_budget, max_len), max(rollout_budget, max_len)
        return Batch(1, -(-train_budget // ring)), Batch(1, -(-rollout_budget // ring))
    if settings is not None and settings.packing:
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
    groups = _groups(cfg, plan, roles)
    for g in groups:
        _check_gpu(g, limit, findings, cfg)
    if settings is not None and batches(cfg, settings, worst=True) != batches(cfg, settings):
        worst = _groups(cfg, plan, _roles(cfg, plan, settings, [], worst=True))
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
    host = _host(plan, roles)
    _check_host(host, cfg.cluster.host_memory_gb, findings)
    return MemoryReport(roles, groups, host, limit, cfg.cluster.host_memory_gb, findings, kv_sequences)


def _roles(cfg: LaunchConfig, plan: Plan, settings: Settings | None, findings: list[Finding], *, worst: bool) -> list[RoleMemory]:
    ds = cfg.deepspeed
    limit = cfg.cluster.gpu_memory_gb
    shapes = _shapes(cfg)
    roles: list[RoleMemory] = []
    colocate_all = cfg.colocated("all")
    train, rollout = batches(cfg, settings, worst)
    flash = ds.flash_attn if settings is None else "flash_attention" in settings.attention

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
        p = shape.params
        if role in ("actor", "critic"):
            gpu, host = model_states(p, shape.largest_layer, ds.zero_stage, rp.gpus, ds.adam_offload)
            parts = {k: gib(v) for k, v in gpu.items()}
            parts["activations"] = gib(activations(shape, train.sequences, train.seq, ds.gradient_checkpointing, flash))
            if role == "actor":
                parts["logits"] = gib(train.tokens * shape.vocab * 4)
            roles.append(
                RoleMemory(
                    role,
                    shape.name,
                    rp.gpus,
                    parts,
                    "train",
                    {k: gib(v) for k, v in host.items()},
                    sleeps=colocate_all and ds.enable_sleep,
                )
            )
        else:
            n = rp.gpus if ds.zero_stage == 3 else 1
            params_gpu = 0.0 if ds.ref_reward_offload else 2 * p / n
            host_bytes = 2 * p / n if ds.ref_reward_offload else 0.0
            parts = {"params": gib(params_gpu)}
            if ds.zero_stage == 3 or ds.ref_reward_offload:
                parts["gather_buffer"] = gib(4 * shape.largest_layer)
            parts["forward"] = gib(rollout.tokens * shape.hidden * 34)
            if role == "ref":
                parts["logits"] = gib(rollout.tokens * shape.vocab * 4)
            roles.append(RoleMemory(role, shape.name, rp.gpus, parts, "always", {"params": gib(host_bytes)} if host_bytes else {}))

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
    sleeps = cfg.colocated("all") and v.enable_sleep
    return RoleMemory("vllm", shape.name, plan.vllm_gpus, parts, "generate", sleeps=sleeps, notes=notes, kv_sequences=sequences)


# Parts that exist only while their role works: training activations and logits, a forward
# pass's working set. Weights, optimizer states, buffers and vLLM's reserved share stay.
TRANSIENT = ("activations", "logits", "forward")
# When each role works: vLLM generates, ref and reward score the rollouts (make experience),
# actor and critic train. Phases run one after the other, so what shares a GPU only adds
# up its persistent parts plus the working set of the role that is working.
ROLE_PHASE = {"vllm": "generate", "ref": "experience", "reward": "experience", "actor": "train", "critic": "train"}


def _groups(cfg: LaunchConfig, plan: Plan, roles: list[RoleMemory]) -> list[GroupMemory]:
    by_role = {r.role: r for r in roles}
    out = []
    for g in plan.groups:
        members = [by_role[r] for r in g.roles if r in by_role]
        if not members:
            continue
        if len(members) == 1:
            phases = {members[0].phase: members[0].gpu}
        else:
            phases = {}
            for phase in ("generate", "experience", "train"):
                working = [r for r in members if ROLE_PHASE.get(r.role) == phase]
                if not working:
                    continue
                total = 0.0
                for r in members:
                    transient = sum(v for k, v in r.parts.items() if k in TRANSIENT)
                    if r in working:
                        total += r.gpu
                    elif not r.sleeps:
                        total += r.gpu - transient
                phases[phase] = total
        out.append(GroupMemory(g.name, [r.role for r in members], phases))
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
    if roles & {"ref", "reward"} and not cfg.deepspeed.ref_reward_offload:
        tips.append("deepspeed.ref_reward_offload: true")
    if "vllm" in roles and cfg.colocated("all") and not cfg.placement.vllm.enable_sleep:
        tips.append("placement.vllm.enable_sleep: true")
    if "vllm" in roles and len(roles) > 1:
        tips.append(f"a lower placement.vllm.gpu_memory_utilization (vLLM takes {cfg.placement.vllm.gpu_memory_utilization:g} of each GPU)")
    tips.append("more GPUs for the role")
    if "gpu_memory_gb" not in cfg.cluster.model_fields_set:  # the estimate is only as good as the size it assumes
        tips.append(f"or, if your GPUs have more than {cfg.cluster.gpu_memory_gb:g} GiB (assumed), set cluster.gpu_memory_gb")
    return "; ".join(tips)


def _check_gpu(group: GroupMemory, limit: float, findings: list[Finding], cfg: LaunchConfig) -> None:
    key = f"placement.{group.roles[0]}"
    shared = f"{'+'.join(group.roles)} ({group.peak_phase} phase)" if len(group.roles) > 1 else group.roles[0]
    if group.peak > limit:
        findings.append(
            error(
                key,
                f"{shared} needs {group.peak:.1f} GiB per GPU but a GPU has {limit:g} GiB",
                _fixes(group, cfg),
                reason="memory",
            )
        )
    elif group.peak > limit * (1 - HEADROOM):
        findings.append(
            warning(key, f"{shared} needs {group.peak:.1f} of {limit:g} GiB per GPU: under {HEADROOM:.0%} headroom", _fixes(group, cfg))
        )


def host_on(report: MemoryReport, plan: Plan, nodes: list[NodeFree]) -> dict[str, float]:
    """Host GiB per node of a real cluster (node_id -> GiB), where Ray PACK would put each rank."""
    return _host(plan, report.roles, nodes)


def _host(plan: Plan, roles: list[RoleMemory], nodes: list[NodeFree] | None = None) -> dict[str, float]:
    """Host GiB per node (default: the declared nodes): each rank's host share, where Ray PACK would put it."""
    per_rank = {r.role: r.host_per_rank for r in roles}
    vllm = next((r for r in roles if r.role == "vllm"), None)
    if vllm is not None and vllm.sleeps:
        per_rank["vllm"] = vllm.parts["weights"]  # vLLM sleep (level 1) moves weights to host RAM
    ds_sleep = {r.role: r.parts.get("params", 0.0) for r in roles if r.role in ("actor", "critic") and r.sleeps}
    nodes = nodes if nodes is not None else declared_nodes(plan.cluster_nodes, plan.cluster_gpus_per_node)
    sim = simulate(plan.groups, nodes)
    out = {n.node_id: 0.0 for n in nodes}
    for placed in sim.placements:
        for node, bundles in placed.per_node.items():
            for role in placed.group.roles:
                out[node] += bundles * (per_rank.get(role, 0.0) + ds_sleep.get(role, 0.0))
    return out


def _check_host(host: dict[str, float], limit: float | None, findings: list[Finding]) -> None:
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
                "spread the training roles over more nodes, or turn off deepspeed.ref_reward_offload",
                reason="memory",
            )
        )
    elif need > limit * (1 - HEADROOM):
        findings.append(
            warning(
                "cluster.host_memory_gb", f"the busiest node needs ~{need:.0f} of {limit:g} GiB host RAM: under {HEADROOM:.0%} headroom"
            )
        )
