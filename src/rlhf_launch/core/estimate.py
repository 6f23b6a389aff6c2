"""How long one PPO step takes, and the run: seconds per phase, steps, hours, GPU-hours. Pure.

    estimate_step(cfg, plan, gpu, settings=..., constants=DEFAULT) -> StepEstimate

One global step of OpenRLHF's loop (trainer/ppo_trainer.py) runs four phases, one after the
other unless async training overlaps them:

  generate         vLLM decodes rollout_batch_size x n_samples_per_prompt sequences over E
                   engines of TP t. Decode is memory-bandwidth bound: each decode step reads
                   the engine's weights (2P bytes over t GPUs) once for the whole batch, and
                   each sequence's KV cache (2 x layers x kv_heads x head_dim x 2 B per
                   token of context). The batch an engine runs at once is bounded by vLLM's
                   max_num_seqs and by its KV cache: gpu_memory_utilization x GPU memory
                   minus weights and runtime, per GPU (as core/memory.py sizes it). Steps =
                   the engine's tokens / batch, plus the long tail: the batch ends with its
                   longest sample (generate_max_len), while the mean sample is shorter. A
                   decode step is also never faster than its FLOPs (2P per token) allow.
                   TP adds two all-reduces per layer per decode step (latency + bytes over
                   NVLink). Prefill: 2P FLOPs per prompt token.
  make_experience  no-grad forwards of actor, ref, critic and reward over prompt+response
                   tokens, 2P FLOPs per token each, at a forward MFU. Models on the same
                   GPUs run one after another; separate placement groups at once.
                   ZeRO-3 gathers each model's weights per micro batch (over the inter-node
                   link when the role spans nodes): the slower of compute and gathers counts.
  train            critic and actor: max_epochs x 6P FLOPs per token (8P with gradient
                   checkpointing) plus causal attention (6 x layers x hidden x context per
                   token), at a training MFU; ZeRO-3 moves 3 x 2P bytes per micro batch per
                   rank (gather forward, gather backward, reduce-scatter grads); adam_offload
                   steps Adam on the CPU (P/n parameters per rank per optimizer step, plus
                   the bf16 params and grads over PCIe); deepspeed.enable_sleep reloads and
                   offloads the optimizer states every step. Critic and actor train at once
                   on separate GPUs, one after the other on shared ones or with sleep.
  weight_sync      the actor's bf16 weights to every engine: NCCL broadcast over the network
                   (NVLink on one node), per-tensor overheads, and ZeRO-3's gather of each
                   parameter first; CUDA IPC when vLLM shares the actor's GPUs.
  colocation       vLLM's wake (weights back from host RAM over PCIe) and sleep under
                   colocate-all with vllm.enable_sleep, counted in generate.
  async_train      generation of the next batch overlaps make_experience + train: a step is
                   max(generate, make_experience + train) + weight_sync.

Not modelled: start-up (model loading, CUDA-graph capture), checkpoint saves, evaluation,
dynamic filtering's extra rounds, remote reward servers, DeepSpeed tensor parallelism.

Constants are data (`Constants`); the defaults are derived from first principles and typical
published efficiencies, then fitted on published step times (tests/data/estimate, split
"fit") where those exist; `Constants.origin` says which. A figure the tables lack is derived
and labelled so in the assumptions, never presented as a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from rlhf_launch.core import gpus
from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.gpus import GpuType
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.shapes import Shape, from_fields, lookup
from rlhf_launch.core.steps import planned_steps, release_key

GIB = 1024**3
PHASES = ("generate", "make_experience", "train", "weight_sync")
VLLM_RUNTIME_GIB = 3.0  # vLLM awake: activations, CUDA graphs, NCCL (core/memory.py RUNTIME_OVERHEAD_GIB)


@dataclass(frozen=True, kw_only=True)
class Constants:
    """The model's few free figures. `origin`: "derived" (first principles and typical
    published efficiencies) or "fitted on N published runs"."""

    # Fitted (core/calibrate.py FITTED) on the published runs of tests/data/estimate marked
    # split: fit; tests/core/test_estimate_field.py refits them and scores the held-out runs.
    decode_efficiency: float = 0.90  # share of HBM bandwidth vLLM decode reaches (weights + KV reads)
    decode_step_s: float = 0.00353  # fixed seconds per decode step (scheduling, sampling, launches): the tail's floor
    forward_mfu: float = 0.60  # no-grad forward of the DeepSpeed models (make_experience)
    train_mfu: float = 0.343  # training MFU (DeepSpeed ZeRO-2/3)
    no_vllm_slowdown: float = 5.01  # HF generate in the actor (no engines) vs. vLLM at the same bandwidth
    # Derived: typical figures, not fitted (the published runs do not tell them apart).
    prefill_mfu: float = 0.45  # prefill (and the decode FLOP floor) MFU
    response_fill: float = 0.5  # mean generated length / generate_max_len
    prompt_fill: float = 0.5  # mean prompt length / prompt_max_len
    max_num_seqs: int = 256  # vLLM's default sequences per engine at once (EngineArgs.max_num_seqs)
    allreduce_latency_s: float = 15e-6  # one small NCCL all-reduce inside a node
    link_efficiency: float = 0.7  # share of a link's bandwidth NCCL reaches
    cpu_adam_params_per_s: float = 1.0e9  # DeepSpeedCPUAdam per rank, parameters per second
    tensor_overhead_s: float = 1.5e-3  # per weight tensor of the sync (gather + broadcast + load)
    wake_sleep_s: float = 4.0  # vLLM wake_up + sleep, fixed part
    # The band: about the worst error on the published runs, fit and held-out (README).
    band_low: float = 0.6  # low end of the band, x the estimate
    band_high: float = 1.4  # high end of the band, x the estimate
    origin: str = "fitted on 8 published runs"


DEFAULT = Constants()


@dataclass(frozen=True)
class StepEstimate:
    step_s: float
    phases_s: dict[str, float]  # generate, make_experience, train, weight_sync
    steps: int | None  # global steps of the run (None: data.max_samples unset)
    gpus: int  # GPUs the layout holds
    gpu: str
    assumptions: list[str]
    limits: list[str]  # what bounds the step (the slowest phase first)
    parts_s: dict[str, float] = field(default_factory=dict)  # the phases' parts, e.g. generate.tail
    overlapped: bool = False  # async training: generate overlaps make_experience + train
    band: tuple[float, float] = (DEFAULT.band_low, DEFAULT.band_high)

    @property
    def run_h(self) -> float | None:
        return None if self.steps is None else self.steps * self.step_s / 3600

    @property
    def gpu_hours(self) -> float | None:
        return None if self.run_h is None else self.run_h * self.gpus

    @property
    def low_h(self) -> float | None:
        return None if self.run_h is None else self.run_h * self.band[0]

    @property
    def high_h(self) -> float | None:
        return None if self.run_h is None else self.run_h * self.band[1]

    @property
    def bottleneck(self) -> str:
        return max(self.phases_s, key=lambda k: self.phases_s[k])

    @property
    def limited_by(self) -> str:
        """A short label of what bounds the step, for a table of layouts: the slowest phase
        and, where the model saw one, why (the KV cache, the long tail, ZeRO traffic)."""
        why = {"generate": ("KV cache", "long tail", "this release"), "train": ("train critic:", "train actor:")}.get(self.bottleneck, ())
        for limit in self.limits:
            if limit.startswith(why):
                reason = "ZeRO traffic" if limit.startswith("train ") else limit.split(":")[0].split(" sends")[0]
                return f"{self.bottleneck} ({reason})"
        return self.bottleneck

    def as_json(self) -> dict[str, Any]:
        def r(x: float | None, n: int = 2) -> float | None:
            return None if x is None else round(x, n)

        return {
            "step_s": round(self.step_s, 1),
            "phases_s": {k: round(v, 1) for k, v in self.phases_s.items()},
            "steps": self.steps,
            "run_h": r(self.run_h),
            "gpu_hours": r(self.gpu_hours, 1),
            "low_h": r(self.low_h),
            "high_h": r(self.high_h),
            "gpus": self.gpus,
            "gpu": self.gpu,
            "overlapped": self.overlapped,
            "limited_by": self.limited_by,
            "limits": self.limits,
            "assumptions": self.assumptions,
        }


def gpu_of(cfg: LaunchConfig) -> tuple[GpuType, bool]:
    """The config's GPU type and whether it is assumed (cluster.gpu unset: an A100 of the
    stated memory size, the common GPU of OpenRLHF's published runs)."""
    if cfg.cluster.gpu:
        return gpus.get(cfg.cluster.gpu), False
    return gpus.get("A100-40GB" if cfg.cluster.gpu_memory_gb <= 48 else gpus.DEFAULT_GPU), True


def _shapes(cfg: LaunchConfig, plan: Plan) -> tuple[dict[str, Shape], list[str]]:
    """Shapes of actor, ref, critic, reward (the actor's where another is unknown)."""
    m = cfg.models
    actor = from_fields(m) or lookup(m.actor)[0]
    if actor is None:
        return {}, []
    notes: list[str] = []
    reward = lookup(m.reward)[0] if m.reward else None
    critic = lookup(m.critic)[0] if m.critic else reward
    out = {"actor": actor, "ref": actor, "critic": critic or actor, "reward": reward or actor}
    for role, shape in (("critic", critic), ("reward", reward)):
        if shape is None and plan.role(role).enabled:
            notes.append(f"{role} model shape unknown: taken as the actor's ({actor.name})")
    return out, notes


def _kv_bytes_per_token(shape: Shape) -> float:
    return 2.0 * shape.layers * shape.kv_heads * shape.head_dim * 2


@dataclass(frozen=True)
class _Lengths:
    prompt: float  # mean prompt tokens
    response: float  # mean generated tokens
    longest: float  # the longest sample's generated tokens (the tail)
    sequences: int  # sequences per step


def _lengths(cfg: LaunchConfig, settings: Settings | None, c: Constants) -> _Lengths:
    d, t = cfg.data, cfg.train
    rollout = settings.rollout_batch if settings is not None else t.rollout_batch_size
    n = settings.n_samples if settings is not None else t.n_samples_per_prompt
    longest = float(d.generate_max_len)
    if d.generate_to_max_len and settings is not None and settings.max_len:
        longest = settings.max_len - d.prompt_max_len * c.prompt_fill
    return _Lengths(d.prompt_max_len * c.prompt_fill, longest * c.response_fill, longest, rollout * n)


def _link(gpu: GpuType, spans_nodes: bool, c: Constants, per_node: int = 1) -> float:
    """Bytes/s of a collective's bus: NVLink (one direction) in a node; across nodes NCCL runs
    one ring per NIC, so a group of `per_node` GPUs on each node gets their NICs together
    (nccl-tests' bus bandwidth), never more than NVLink."""
    gbps = gpu.nvlink_gbps / 2
    if spans_nodes:
        gbps = min(gbps, gpu.internode_gbps * per_node)
    return gbps * 1e9 * c.link_efficiency


def _calls(cfg: LaunchConfig, plan: Plan, lengths: _Lengths, per_engine: int, engines: int, release: str | None) -> tuple[int, int]:
    """(generate calls each engine serves one after another, sequences per call), per release:
    before 0.5.0 each actor rank sent micro_rollout_batch_size prompts per call; 0.5.0-0.5.7
    each rank sent its whole share in one call, an engine serving its ranks in turn; from 0.5.8
    (vllm_engine.add_requests) an engine generates all its ranks' requests at once."""
    key = release_key(release)
    ranks = max(1, plan.role("actor").gpus)
    if key is not None and key < (0, 5, 0):
        micro = cfg.train.micro_rollout_batch_size
        return math.ceil(per_engine / micro), min(micro, per_engine)
    if key is not None and key < (0, 5, 8) and ranks > engines:
        share = math.ceil(lengths.sequences / ranks)
        return math.ceil(per_engine / share), share
    return 1, per_engine


def _generate(
    cfg: LaunchConfig, plan: Plan, gpu: GpuType, shape: Shape, lengths: _Lengths, c: Constants, release: str | None = None
) -> tuple[float, dict[str, float], list[str]]:
    engines, tp, slowdown = plan.vllm_engines, plan.vllm_tp, 1.0
    limits: list[str] = []
    if engines == 0:  # no vLLM: the actor's DeepSpeed ranks generate with HF generate
        engines, tp, slowdown = max(1, plan.role("actor").gpus), 1, c.no_vllm_slowdown
        limits.append("no vLLM engines: the actor generates with HF generate")
    per_engine = math.ceil(lengths.sequences / engines)
    weights = 2.0 * shape.params
    kvb = _kv_bytes_per_token(shape)
    share = cfg.cluster.gpu_memory_gb * cfg.placement.vllm.gpu_memory_utilization
    kv_cache = max(0.0, (share - VLLM_RUNTIME_GIB) * GIB * tp - weights)
    in_flight = lengths.prompt + lengths.response / 2  # mean context of a running sequence
    by_kv = kv_cache / (kvb * (lengths.prompt + lengths.longest))  # vLLM admits what fits at full length
    calls, per_call = _calls(cfg, plan, lengths, per_engine, engines, release)
    batch = max(1.0, min(float(per_call), float(c.max_num_seqs), by_kv))
    if by_kv < min(per_call, c.max_num_seqs):
        limits.append(f"KV cache: {max(by_kv, 0):.0f} sequences at once per engine, of {per_call}")
    if calls > 1:
        limits.append(f"this release sends each engine {calls} generate calls of {per_call} sequences, one after another")
    tokens = per_engine * lengths.response
    waves = per_call * lengths.response / batch
    steps = calls * max(lengths.longest, waves + (lengths.longest - lengths.response))
    if calls * lengths.longest >= 0.5 * steps:
        limits.append(f"long tail: each generate call ends with its longest sample ({lengths.longest:.0f} tokens)")
    bandwidth = gpu.hbm_gbps * 1e9 * tp * c.decode_efficiency
    reads = steps * weights / bandwidth + tokens * in_flight * kvb / bandwidth
    flops = 2.0 * shape.params * tokens / (tp * gpu.bf16_tflops * 1e12 * c.prefill_mfu)
    decode = max(reads, flops) + steps * c.decode_step_s
    allreduce = 0.0
    if tp > 1:
        mean_batch = tokens / steps
        payload = 2 * (tp - 1) / tp * mean_batch * shape.hidden * 2
        allreduce = steps * shape.layers * 2 * (c.allreduce_latency_s + payload / _link(gpu, False, c))
    prefill = 2.0 * shape.params * per_engine * lengths.prompt / (tp * gpu.bf16_tflops * 1e12 * c.prefill_mfu)
    wake = 0.0
    if cfg.colocated("all") and cfg.placement.vllm.enable_sleep and plan.vllm_engines:
        wake = c.wake_sleep_s + weights / tp / (gpu.pcie_gbps * 1e9)
    parts = {
        "generate.decode": decode * slowdown,
        "generate.tp_allreduce": allreduce,
        "generate.prefill": prefill * slowdown,
        "generate.wake_sleep": wake,
    }
    return sum(parts.values()), parts, limits


def _zero3_gather(params: float, plan: Plan, role: str, gpu: GpuType, c: Constants) -> float:
    """Seconds to all-gather a ZeRO-3 model's bf16 weights once on each of its ranks."""
    r = plan.role(role)
    n = r.gpus
    return 2.0 * params * (n - 1) / n / _link(gpu, _spans(plan, role), c, r.gpus_per_node) if n > 1 else 0.0


def _spans(plan: Plan, role: str) -> bool:
    return plan.role(role).nodes > 1


def _forwards(
    cfg: LaunchConfig, plan: Plan, gpu: GpuType, shapes: dict[str, Shape], lengths: _Lengths, c: Constants
) -> tuple[float, dict[str, float], list[str]]:
    packed = cfg.deepspeed.packing_samples
    per_seq = lengths.prompt + (lengths.response if packed else lengths.longest)
    tokens = lengths.sequences * per_seq
    micro = cfg.train.micro_rollout_batch_size
    zero3 = cfg.deepspeed.zero_stage == 3
    per_role: dict[str, float] = {}
    for role in ("actor", "ref", "critic", "reward"):
        r = plan.role(role)
        if not r.enabled:
            continue
        p = shapes[role].params
        compute = 2.0 * p * tokens / (r.gpus * gpu.bf16_tflops * 1e12 * c.forward_mfu)
        gathers = 0.0
        if zero3:
            micro_batches = math.ceil(lengths.sequences / (r.gpus * micro))
            gathers = micro_batches * _zero3_gather(p, plan, role, gpu, c)
        per_role[role] = max(compute, gathers)
    by_group: dict[str, float] = {}
    for role, seconds in per_role.items():
        by_group[plan.role(role).group] = by_group.get(plan.role(role).group, 0.0) + seconds
    total = max(by_group.values(), default=0.0)
    limits = []
    if len(by_group) < len(per_role) and per_role:
        limits.append("make_experience: colocated models run their forwards one after another")
    return total, {f"make_experience.{k}": v for k, v in per_role.items()}, limits


def _train(
    cfg: LaunchConfig, plan: Plan, gpu: GpuType, shapes: dict[str, Shape], lengths: _Lengths, c: Constants
) -> tuple[float, dict[str, float], list[str]]:
    ds, t = cfg.deepspeed, cfg.train
    packed = ds.packing_samples
    context = lengths.prompt + (lengths.response if packed else lengths.longest)
    tokens = lengths.sequences * context * t.max_epochs
    multiplier = 8.0 if ds.gradient_checkpointing else 6.0
    optimizer_steps = max(1, lengths.sequences * t.max_epochs // t.train_batch_size)
    parts: dict[str, float] = {}
    limits: list[str] = []
    for role in ("critic", "actor"):
        r = plan.role(role)
        if not r.enabled:
            continue
        shape, n = shapes[role], r.gpus
        p = shape.params
        per_token = multiplier * p + multiplier * shape.layers * shape.hidden * context  # causal attention
        compute = per_token * tokens / (n * gpu.bf16_tflops * 1e12 * c.train_mfu)
        comm = 0.0
        if ds.zero_stage == 3:
            micro_batches = math.ceil(lengths.sequences * t.max_epochs / (n * t.micro_train_batch_size))
            comm = micro_batches * 3 * _zero3_gather(p, plan, role, gpu, c)
        elif n > 1:  # ZeRO-0/1/2: gradients reduced once per optimizer step
            comm = optimizer_steps * 2 * 2.0 * p * (n - 1) / n / _link(gpu, _spans(plan, role), c, r.gpus_per_node)
        if comm > compute:
            where = "the inter-node link" if _spans(plan, role) else "NVLink"
            limits.append(f"train {role}: ZeRO weight traffic over {where} exceeds its compute")
        optimizer = 0.0
        if ds.adam_offload:
            optimizer = optimizer_steps * (p / n / c.cpu_adam_params_per_s + 2 * 2.0 * p / n / (gpu.pcie_gbps * 1e9))
        elif ds.enable_sleep:  # optimizer states, master weights and grads off and back once per step
            optimizer = 2 * 14.0 * p / n / (gpu.pcie_gbps * 1e9)
        parts[f"train.{role}"] = max(compute, comm) + optimizer
        if ds.adam_offload:
            parts[f"train.{role}.cpu_adam"] = optimizer
    trained = [parts[f"train.{r}"] for r in ("critic", "actor") if f"train.{r}" in parts]
    shared = plan.role("critic").enabled and plan.role("critic").group == plan.role("actor").group
    sequential = ds.enable_sleep or shared
    return (sum(trained) if sequential else max(trained, default=0.0)), parts, limits


def _weight_sync(cfg: LaunchConfig, plan: Plan, gpu: GpuType, shape: Shape, c: Constants) -> tuple[float, dict[str, float]]:
    if not plan.vllm_engines:
        return 0.0, {}
    weights = 2.0 * shape.params
    tensors = shape.layers * 9 + 3  # q, k, v, o, gate, up, down, two norms per layer; embeddings, head, norm
    if plan.sync_colocate_all:  # CUDA IPC handles on the same GPUs
        move = weights / plan.vllm_tp / (gpu.hbm_gbps * 1e9 * 0.5)
    else:
        move = weights / _link(gpu, plan.cluster_nodes > 1, c)
    gather = _zero3_gather(shape.params, plan, "actor", gpu, c) if cfg.deepspeed.zero_stage == 3 else 0.0
    parts = {"weight_sync.transfer": move, "weight_sync.gather": gather, "weight_sync.per_tensor": tensors * c.tensor_overhead_s}
    return sum(parts.values()), parts


def estimate_step(
    cfg: LaunchConfig,
    plan: Plan,
    gpu: GpuType | None = None,
    *,
    settings: Settings | None = None,
    constants: Constants = DEFAULT,
    version: str | None = None,
) -> StepEstimate | None:
    """Seconds per step by phase, the run's steps, hours and GPU-hours; None when the actor's
    shape is unknown (no model size, no estimate). `gpu`: the config's (cluster.gpu) when None."""
    c = constants
    assumed = False
    if gpu is None:
        gpu, assumed = gpu_of(cfg)
    shapes, notes = _shapes(cfg, plan)
    if not shapes:
        return None
    lengths = _lengths(cfg, settings, c)
    actor = shapes["actor"]
    release = version or (settings.version if settings is not None else cfg.openrlhf.version)
    generate, gen_parts, gen_limits = _generate(cfg, plan, gpu, actor, lengths, c, release)
    forwards, fwd_parts, fwd_limits = _forwards(cfg, plan, gpu, shapes, lengths, c)
    train, train_parts, train_limits = _train(cfg, plan, gpu, shapes, lengths, c)
    sync, sync_parts = _weight_sync(cfg, plan, gpu, actor, c)
    phases = {"generate": generate, "make_experience": forwards, "train": train, "weight_sync": sync}
    overlapped = bool(settings.async_train if settings is not None else cfg.train.async_train)
    if overlapped:
        step = max(generate, forwards + train) + sync
    else:
        step = generate + forwards + train + sync
    slowest = max(phases, key=lambda k: phases[k])
    limits = [f"{slowest} is {phases[slowest] / step:.0%} of the step"] + gen_limits + fwd_limits + train_limits
    if overlapped:
        limits.append("async training: generation overlaps make_experience + train")
    steps = planned_steps(cfg, release)
    origin = c.origin
    assumptions = [
        f"GPU {gpu.name}: {gpu.bf16_tflops:g} TFLOP/s bf16, {gpu.hbm_gbps:g} GB/s HBM, {gpu.internode_gbps:g} GB/s per GPU "
        f"between nodes (typical)" + (" (assumed: set cluster.gpu)" if assumed else ""),
        f"decode at {c.decode_efficiency:.0%} of HBM bandwidth + {c.decode_step_s * 1e3:.1f} ms a step, "
        f"training MFU {c.train_mfu:.0%}, forward MFU {c.forward_mfu:.0%} ({origin}); prefill at {c.prefill_mfu:.0%} MFU "
        + ("(calibrated with the decode)" if origin.startswith("calibrated") else "(derived)"),
        f"prompts average {c.prompt_fill:.0%} of prompt_max_len, responses {c.response_fill:.0%} of generate_max_len; "
        f"the longest reaches {lengths.longest:.0f} tokens (derived)",
        f"vLLM runs up to {c.max_num_seqs} sequences at once per engine (its max_num_seqs default)",
        "excludes start-up, checkpoint saves and evaluation",
        *notes,
    ]
    if steps is None:
        assumptions.append("steps unknown: data.max_samples is unset (the dataset's size decides)")
    return StepEstimate(
        step_s=step,
        phases_s=phases,
        steps=steps,
        gpus=plan.gpus_required,
        gpu=gpu.name,
        assumptions=assumptions,
        limits=limits,
        parts_s={**gen_parts, **fwd_parts, **train_parts, **sync_parts},
        overlapped=overlapped,
        band=(c.band_low, c.band_high),
    )


def with_constants(base: Constants, **changes: float) -> Constants:
    """`base` with some figures changed (the calibration's entry point)."""
    return replace(base, **changes)  # type: ignore[arg-type]
