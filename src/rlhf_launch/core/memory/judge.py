"""The judgement: the estimate's numbers (core/memory/model.py) made into findings and hints. Pure.

Refused (reason memory) when clearly over: a phase's resident parts alone exceed the GPU (no
micro batch fits), or the peak exceeds the GPU by more than OVER_MARGIN and cluster.gpu_memory_gb
is stated (an assumed GPU size is not grounds to refuse). Warned when the peak exceeds the GPU
otherwise (with the tokens per GPU that fit), or is within HEADROOM under it, or a role could not
be sized (with the bracket its stated size gives). vLLM alone on its GPUs is never warned about:
it takes its share by construction. Each hint names the settings that lower the phase, with the
figure each one gives (the estimate measured again with it), those that bring it under first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.memory.model import HEADROOM, OVER_MARGIN, RUNTIME_OVERHEAD_GIB, Estimate, GroupMemory, measure
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings


def judge(est: Estimate, cfg: LaunchConfig, plan: Plan, settings: Settings | None = None) -> list[Finding]:
    findings: list[Finding] = []
    for u in est.unsized:
        if u.role == "vllm":
            findings.append(warning("placement.vllm", f"vLLM memory not estimated: {u.why}"))
            continue
        if u.bracket is not None:
            low, high = u.bracket
            over = "over" if low > est.gpu_limit else "within" if high <= est.gpu_limit else "around"
            span = (
                f"; as the known shapes of its stated size ({u.between}) its GPUs would need "
                f"{low:.0f}-{high:.0f} GiB of {est.gpu_limit:g} ({over})"
            )
            if high > est.gpu_limit:  # uncertain and possibly over: say so as a possible out-of-memory
                span = (
                    f"; as the known shapes of its stated size ({u.between}) it needs {low:.0f}-{high:.0f} GiB per GPU but a GPU "
                    f"has {est.gpu_limit:g} ({over}): expect out-of-memory {'' if over == 'over' else 'at the high end'}"
                ).rstrip()
        else:
            span = f"; its GPUs' need is unknown (anything up to and over {est.gpu_limit:g} GiB): nothing checks this role's memory"
        findings.append(
            warning(
                u.key,
                f"memory of {u.role} not estimated: {u.why}{span}",
                "point it at a local model directory, or set models.layers/hidden/...",
            )
        )
    _check_vllm(est, cfg, findings)
    for group in est.groups:
        _check_gpu(group, est, cfg, plan, settings, findings)
    for g in est.worst:
        planned = next((p for p in est.groups if p.name == g.name), None)
        if planned is not None and planned.peak <= est.gpu_limit < g.peak:
            findings.append(
                warning(
                    f"placement.{g.roles[0]}",
                    f"{'+'.join(g.roles)} fits with the token budgets ({planned.peak:.1f} GiB per GPU) but needs {g.peak:.1f} GiB "
                    f"of {est.gpu_limit:g} when a micro batch is one sequence of max_len {est.max_len} tokens",
                    "lower data.generate_max_len, or raise ring_attn_size",
                )
            )
    _check_host(est.host_per_node, est.host_limit, findings, est.host_sources)
    return findings


def _check_vllm(est: Estimate, cfg: LaunchConfig, findings: list[Finding]) -> None:
    kv = est.vllm
    if kv is None:
        return
    if kv.kv_budget <= 0:
        findings.append(
            error(
                "placement.vllm.gpu_memory_utilization",
                f"vLLM weights ({kv.weights:.1f} GiB per GPU at TP {kv.tp}) plus {RUNTIME_OVERHEAD_GIB:g} GiB runtime exceed its "
                f"{kv.utilization:g} x {est.gpu_limit:g} = {kv.share:.1f} GiB share: no room for a KV cache",
                "raise placement.vllm.tensor_parallel_size or gpu_memory_utilization",
                reason="memory",
            )
        )
    elif kv.sequences < cfg.train.micro_rollout_batch_size:
        findings.append(
            warning(
                "placement.vllm",
                f"vLLM's KV cache (~{kv.kv_budget:.1f} GiB per GPU) holds ~{kv.sequences:.1f} sequences of {kv.seq} tokens, "
                f"fewer than micro_rollout_batch_size {cfg.train.micro_rollout_batch_size}",
                "raise tensor_parallel_size or gpu_memory_utilization",
            )
        )


Change = tuple[str, Callable[[LaunchConfig, Settings | None], tuple[LaunchConfig, Settings | None]]]


def _ds(**update: object) -> Callable[[LaunchConfig, Settings | None], tuple[LaunchConfig, Settings | None]]:
    return lambda cfg, s: (cfg.model_copy(update={"deepspeed": cfg.deepspeed.model_copy(update=update)}), s)


def _vllm(**update: object) -> Callable[[LaunchConfig, Settings | None], tuple[LaunchConfig, Settings | None]]:
    def change(cfg: LaunchConfig, s: Settings | None) -> tuple[LaunchConfig, Settings | None]:
        vllm = cfg.placement.vllm.model_copy(update=update)
        return cfg.model_copy(update={"placement": cfg.placement.model_copy(update={"vllm": vllm})}), s

    return change


def _train(**update: int) -> Callable[[LaunchConfig, Settings | None], tuple[LaunchConfig, Settings | None]]:
    return lambda cfg, s: (cfg.model_copy(update={"train": cfg.train.model_copy(update=update)}), s)


def _budget(**update: int) -> Callable[[LaunchConfig, Settings | None], tuple[LaunchConfig, Settings | None]]:
    return lambda cfg, s: (cfg, replace(s, **update) if s is not None else s)  # type: ignore[arg-type]


def _changes(group: GroupMemory, cfg: LaunchConfig, settings: Settings | None) -> list[Change]:
    """The settings that could lower this group's memory, each as a change to measure."""
    ds, t, roles = cfg.deepspeed, cfg.train, set(group.roles)
    out: list[Change] = []
    dynamic = settings is not None and settings.dynamic_batch
    if roles & {"actor", "critic"}:
        if not ds.adam_offload:
            out.append(("deepspeed.adam_offload: true", _ds(adam_offload=True)))
        if not ds.gradient_checkpointing:
            out.append(("deepspeed.gradient_checkpointing: true", _ds(gradient_checkpointing=True)))
        if ds.zero_stage < 3:
            out.append(("deepspeed.zero_stage: 3", _ds(zero_stage=3)))
        if dynamic and settings is not None and (settings.train_max_tokens_per_gpu or 0) > 1:
            half = (settings.train_max_tokens_per_gpu or 2) // 2
            out.append((f"train.train_max_tokens_per_gpu: {half}", _budget(train_max_tokens_per_gpu=half)))
        elif not dynamic and t.micro_train_batch_size > 1:
            half = t.micro_train_batch_size // 2
            out.append((f"train.micro_train_batch_size: {half}", _train(micro_train_batch_size=half)))
        if cfg.colocated("all") and not ds.enable_sleep and not ds.adam_offload:
            out.append(("deepspeed.enable_sleep: true", _ds(enable_sleep=True)))
    if dynamic and settings is not None and (settings.rollout_max_tokens_per_gpu or 0) > 1:
        half = (settings.rollout_max_tokens_per_gpu or 2) // 2
        out.append((f"train.rollout_max_tokens_per_gpu: {half}", _budget(rollout_max_tokens_per_gpu=half)))
    elif not dynamic and t.micro_rollout_batch_size > 1:
        half = t.micro_rollout_batch_size // 2
        out.append((f"train.micro_rollout_batch_size: {half}", _train(micro_rollout_batch_size=half)))
    if roles & {"ref", "reward"} and not ds.ref_reward_offload:
        out.append(("deepspeed.ref_reward_offload: true", _ds(ref_reward_offload=True)))
    if "vllm" in roles and cfg.colocated("all") and not cfg.placement.vllm.enable_sleep:
        out.append(("placement.vllm.enable_sleep: true", _vllm(enable_sleep=True)))
    return out


def _fixes(group: GroupMemory, est: Estimate, cfg: LaunchConfig, plan: Plan, settings: Settings | None) -> str:
    """Each setting that lowers the group's peak, with the peak it gives (measured again with
    it), those that bring it under the GPU first; then vLLM's share, more GPUs, the GPU size."""
    limit = est.gpu_limit
    tips: list[tuple[float, str]] = []
    for text, change in _changes(group, cfg, settings):
        changed_cfg, changed_settings = change(cfg, settings)
        again = next((g for g in measure(changed_cfg, plan, changed_settings).groups if g.name == group.name), None)
        if again is None or again.peak >= group.peak - 0.05:
            continue
        verdict = "under the GPU" if again.peak <= limit else "still over"
        tips.append((again.peak, f"{text} ({group.peak:.1f} -> {again.peak:.1f} GiB, {verdict})"))
    lines = [tip for _, tip in sorted(tips)]
    roles = set(group.roles)
    if "vllm" in roles and len(roles) > 1:
        util = cfg.placement.vllm.gpu_memory_utilization
        share = util * limit
        need = group.peak - limit * (1 - HEADROOM)
        phase = group.peak_phase
        vllm_counts = cfg.placement.vllm.enable_sleep is False or phase == "generate"
        if vllm_counts and need > 0 and share - need > 0:
            lower = (share - need) / limit
            lines.append(
                f"a lower placement.vllm.gpu_memory_utilization (vLLM takes {util:g} of each GPU): "
                f"{lower:.2f} frees the {need:.1f} GiB needed"
            )
        else:
            lines.append(f"a lower placement.vllm.gpu_memory_utilization (vLLM takes {util:g} of each GPU)")
    lines.append("more GPUs for the role")
    if not est.gpu_stated:  # the estimate is only as good as the size it assumes
        lines.append(f"or, if your GPUs have more than {limit:g} GiB (assumed), set cluster.gpu_memory_gb")
    return "; ".join(lines)


def _check_gpu(
    group: GroupMemory, est: Estimate, cfg: LaunchConfig, plan: Plan, settings: Settings | None, findings: list[Finding]
) -> None:
    limit = est.gpu_limit
    key = f"placement.{group.roles[0]}"
    phase = group.peak_phase
    shared = f"{'+'.join(group.roles)} ({phase} phase)" if len(group.roles) > 1 else group.roles[0]
    peak, floor = group.peak, group.floor
    low, high = group.peak_range
    span = f" (margin {low:.1f}-{high:.1f})"
    assumed = "" if est.gpu_stated else " (assumed)"
    if floor > limit:
        floor_phase = max(group.floors, key=lambda name: group.floors[name])
        findings.append(
            error(
                key,
                f"{shared} needs {peak:.1f} GiB per GPU but a GPU has {limit:g}{assumed}{span}: its weights, optimizer states and "
                f"reserved shares alone take {floor:.1f} GiB ({floor_phase} phase), whatever the batch",
                _fixes(group, est, cfg, plan, settings),
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
            f"{shared} needs {peak:.1f} GiB per GPU but a GPU has {limit:g}{assumed}{span}, when micro batches reach "
            f"{tokens} tokens per GPU ({working:.1f} GiB of working sets on {group.floors[phase]:.1f} GiB resident){fit}"
        )
        if est.gpu_stated and peak > limit * (1 + OVER_MARGIN):
            findings.append(error(key, message, _fixes(group, est, cfg, plan, settings), reason="memory"))
        else:
            findings.append(warning(key, message + ": expect out-of-memory on full micro batches", _fixes(group, est, cfg, plan, settings)))
    elif high > limit and set(group.roles) != {"vllm"}:
        message = (
            f"{shared} needs {peak:.1f} GiB per GPU, up to {high:.1f} at its margin's high end (allocator growth after updates of "
            f"varying length, NCCL communicators), but a GPU has {limit:g}{assumed}{span}: expect out-of-memory after some updates"
        )
        findings.append(warning(key, message, _fixes(group, est, cfg, plan, settings)))
    elif peak > limit * (1 - HEADROOM) and set(group.roles) != {"vllm"}:
        message = f"{shared} needs {peak:.1f}{span} of {limit:g} GiB per GPU: under {HEADROOM:.0%} headroom"
        findings.append(warning(key, message, _fixes(group, est, cfg, plan, settings)))


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
