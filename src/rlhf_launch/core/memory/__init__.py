"""Memory feasibility: per role group and phase GPU memory, and per node host memory, before
submission. Pure. `measure` (model.py) gives the numbers, what each peak is made of and its
margin (what a layout search ranks by); `judge` (judge.py) makes them findings and hints;
`estimate` is both, as `plan` shows them.

The model. Each GPU runs a sequence of phases; a phase's need is the sum of what is resident
on that GPU then, and the GPU's figure is the peak over phases, never the sum of the phases.

Phases (OpenRLHF's loop, trainer/ppo_trainer.py, ppo_utils/experience_maker.py):
  generate         vLLM generates: its whole share is awake.
  experience:ROLE  actor, critic, ref and reward each run a no-grad forward over the rollouts.
                   Colocated models run one at a time (the dispatcher waits and empties the
                   cache between them when the models share GPUs: experience_maker.py calls
                   empty_cache on each group). The reference model's forward on the actor's
                   GPUs (colocate actor+ref) is its own phase, with the actor's states resident.
  train:ROLE       critic, then actor, train. One at a time when deepspeed.enable_sleep
                   (reload -> fit -> offload) and, up to 0.8.x, under colocate-all; at once
                   otherwise (both in one `train` phase).
  sync             the weight sync to vLLM after training (trainer/ppo_trainer.py
                   broadcast_to_vllm): a sleeping vLLM wakes its weights only (0.11:
                   wake_up(tags=["weights"])), the actor (offloaded again when it sleeps)
                   gathers one parameter at a time and clones it for CUDA IPC
                   (trainer/ray/ppo_actor.py): 4 B x the largest layer.

The terms, per GPU (P parameters, n GPUs of the role, t DeepSpeed tensor parallel), and where
each comes from:
  model states   mixed-precision Adam (ZeRO paper: 16 B/param): bf16 params 2P, bf16 grads 2P,
                 fp32 master + two moments 12P, partitioned over n/t ranks by the ZeRO stage
                 (1: optimizer; 2: + grads; 3: + params). ZeRO-3 adds 2P/n and 4 B x the
                 largest layer, as DeepSpeed's estimate_zero3_model_states_mem_needs
                 (runtime/zero/stage3.py) does: the gathered-layer working set.
  reduce_bucket  the gradient reduce bucket: OpenRLHF's get_train_ds_config
                 (utils/deepspeed/deepspeed_utils.py, every tag v0.8.0..v0.11) sets
                 reduce_bucket_size, stage3_prefetch_bucket_size and stage3_max_live_parameters
                 to "auto", which DeepSpeed's config loader drops (runtime/config_utils.py),
                 leaving its defaults (runtime/zero/config.py): a 5e8-element reduce bucket
                 (bf16: 0.93 GiB while training), a 5e7-element prefetch bucket and up to 1e9
                 live gathered parameters (2 B each: at 70B, about one layer plus the
                 embeddings, inside the 4 B x largest layer above). A user's DeepSpeed config
                 print under OpenRLHF shows exactly these (OpenRLHF#742: reduce_bucket_size=
                 500000000, prefetch_bucket_size=50000000, max_live_parameters=1000000000).
  adam_offload   offload_optimizer=cpu: master, moments and fp32 grads (16P/n) in host RAM.
  enable_sleep   OpenRLHF's offload_deepspeed_states: optim_states, hp_params,
                 contiguous_grad_buffer and (DeepSpeed >= 0.16.5) lp_grads go to pinned host
                 RAM after each fit; lp_params stay (OpenRLHF PR #808). Nothing with adam_offload.
  ref, reward    bf16 params under their ZeRO stage (3 when training uses 3, else 0), in host
                 RAM with ref_reward_offload.
  vLLM           gpu_memory_utilization x GPU memory while awake, taken at start before the
                 trainer's models load: KV cache = that share - weights (2P/TP) - activations
                 and CUDA graphs (RUNTIME_OVERHEAD_GIB). With vllm.enable_sleep (colocate-all
                 only; OpenRLHF calls sleep(level=1), trainer/ray/vllm_engine.py): weights to
                 host RAM, KV cache discarded; what stays (CUDA context, NCCL, the CUDA-graph
                 pool) is VLLM_ASLEEP_GIB (vLLM docs, sleep mode: "up to 90%+").
  cuda_context   each DeepSpeed process on a GPU: CUDA context and NCCL buffers (CUDA_CONTEXT_GIB,
                 +- CONTEXT_SPREAD_GIB: driver, NCCL channels, the number of communicators).
Working sets, only while the role computes:
  activations    per micro batch, layer_bytes_per_token: a gated-MLP layer (Llama, Qwen, Mistral)
                 saves 22h + 8 x intermediate + 8 x kv width bytes per token with flash or SDPA
                 attention (Korthikanti et al. 2022 count 34h for GPT's 4h MLP; the fp32 RMSNorms
                 and the gated MLP hold 1.3-1.9x that), plus 5 x heads x s with eager attention.
                 Gradient checkpointing (HF, non-reentrant) keeps each layer's input (2h per
                 token) plus one layer recomputed.
  logits         actor (models/actor.py): HF returns bf16 logits, OpenRLHF casts them to fp32;
                 the loss saves the fp32 logits, backward allocates fp32 dlogits and their bf16
                 cast for lm_head: 10 B x tokens x vocab while training, 6 B (bf16 + fp32 copy)
                 in a no-grad forward (actor, ref). A critic has a value head, no logits.
  forward        a no-grad forward otherwise holds about one layer (34 B x hidden per token).
  fragmentation  PyTorch's caching allocator reserves more than it allocates: FRAGMENTATION of
                 the working sets, and its range 0-2x (the resident states are allocated once).
                 One public OOM shows the figure (OpenRLHF#398, 8B on 40 GB: "38.34 GiB is
                 allocated by PyTorch, and 385.64 MiB is reserved by PyTorch but unallocated").
Tokens per micro batch per GPU: micro batch x max_len (prompt + generated) sequences; packed
  (packing_samples), one sequence of micro batch x max_len tokens, split over ring_attn_size
  GPUs. Dynamic batching fills a micro batch up to max_tokens_per_gpu x ring_attn_size x
  tensor_parallel tokens (utils/seqlen_balancing.py), so max_tokens_per_gpu per GPU after the
  ring split; max_len is only a bound (a longer sequence is a micro batch of its own).
The margin of each phase (GroupMemory.ranges): the fragmentation range and the context spread,
  and at its high end only: GROWTH (after updates with micro batches of varying length the
  caching allocator holds blocks cut for earlier shapes; torch's OOM text names it, "reserved
  but unallocated ... expandable_segments"; 0 until a measurement backs a figure: torch frees
  its cache and retries before it raises, so no OOM line shows it)
  and NCCL_COMMUNICATOR_GIB per NCCL communicator beyond the first (DeepSpeed's world and
  data-parallel groups; the actor's vLLM weight-sync group, ppo_actor.py model_update_group).
  A peak under the GPU whose high end is over it is warned "expect out-of-memory after some
  updates", with the range; an unsized role whose bracket's high end is over the GPU likewise.
  Neither refuses.

Not covered: the entropy term (actor.entropy_coef set: another ~8 B x tokens x vocab),
tensor-parallel splitting of activations (kept whole: an over-estimate), dataloader and
tokenizer memory, host memory while loading checkpoints.
"""

from __future__ import annotations

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.memory.judge import host_fix, judge
from rlhf_launch.core.memory.model import (
    CUDA_CONTEXT_GIB,
    FORWARD_LOGIT_BYTES,
    FRAGMENTATION,
    GIB,
    HEADROOM,
    OVER_MARGIN,
    RUNTIME_OVERHEAD_GIB,
    TRAIN_LOGIT_BYTES,
    VLLM_ASLEEP_GIB,
    Batch,
    Estimate,
    GroupMemory,
    MemoryReport,
    RoleMemory,
    Unsized,
    activations,
    batches,
    host_on,
    host_sources_on,
    layer_bytes_per_token,
    measure,
    model_states,
    shapes_of,
)
from rlhf_launch.core.plan import Plan
from rlhf_launch.core.settings import Settings

__all__ = [
    "CUDA_CONTEXT_GIB",
    "FORWARD_LOGIT_BYTES",
    "FRAGMENTATION",
    "GIB",
    "HEADROOM",
    "OVER_MARGIN",
    "RUNTIME_OVERHEAD_GIB",
    "TRAIN_LOGIT_BYTES",
    "VLLM_ASLEEP_GIB",
    "Batch",
    "Estimate",
    "GroupMemory",
    "MemoryReport",
    "RoleMemory",
    "Unsized",
    "activations",
    "batches",
    "estimate",
    "host_fix",
    "host_on",
    "host_sources_on",
    "judge",
    "layer_bytes_per_token",
    "measure",
    "model_states",
    "shapes_of",
]


def estimate(cfg: LaunchConfig, plan: Plan, settings: Settings | None = None) -> MemoryReport:
    """The numbers and their judgement, as `plan` reports them."""
    est = measure(cfg, plan, settings)
    findings = judge(est, cfg, plan, settings)
    kv = est.vllm.sequences if est.vllm is not None else None
    return MemoryReport(
        est.roles, est.groups, est.host_per_node, est.gpu_limit, est.host_limit, findings, kv, est.host_sources, est.unsized
    )
