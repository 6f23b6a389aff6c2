"""The code the rule table (rules.py) refers to by name: predicates (`retriable_by`,
`when`), hints (`hint_by`) and phase functions (`phase_by`), each registered under its
function's name. A rule names them; rules.py checks every name once, at import."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from rlhf_launch.diagnose.context import Ctx, exception_of, infer_phase
from rlhf_launch.diagnose.taxonomy import LOOP, STARTUP

__all__ = ["HINTS", "PHASE_OF", "PREDICATES"]

Predicate = Callable[[Ctx], bool]
Text = Callable[[Ctx], str]
PhaseOf = Callable[[Ctx], "str | None"]
F = TypeVar("F", bound=Callable[..., object])

PREDICATES: dict[str, Predicate] = {}
HINTS: dict[str, Text] = {}
PHASE_OF: dict[str, PhaseOf] = {}


def _register(table: dict[str, F]) -> Callable[[F], F]:
    def add(fn: F) -> F:
        name = fn.__name__
        if name in table:
            raise ValueError(f"{name} is registered twice")
        table[name] = fn
        return fn

    return add


predicate = _register(PREDICATES)
hint = _register(HINTS)
phase = _register(PHASE_OF)

TRANSIENT = re.compile(r"(?i)timed? ?out|timeout|wait_for\(|connection (?:reset|refused|aborted)|temporar|\b50[234]\b|try again")
PERMANENT_ENV = re.compile(r"(?i)too large|exceeds the maximum|does not exist|no such file|not found|permission denied|conflict")
TIMEOUT = re.compile(r"(?i)timed out|TimeoutError|Timeout\(ms\)|timeout after|deadline exceeded")
VLLM_PREFIX = re.compile(r"^\s*(?:\|\s*)?\((?:\w*LLMRayActor|RolloutRayActor|RayWorkerVllm|RayWorkerWrapper|EngineCore\w*)\b")
TRACEBACK_FRAME = re.compile(r'File "[^"]+", line \d+')


# ---------------------------------------------------------------- predicates


@predicate
def mid_run(ctx: Ctx) -> bool:
    return ctx.step is not None or ctx.phase in LOOP


@predicate
def not_at_startup(ctx: Ctx) -> bool:
    """A component without training state (a vLLM engine) that crashed: a new one starts from
    the weights, so retry unless the log puts the crash at start-up (its configuration)."""
    return ctx.step is not None or ctx.phase not in STARTUP


# torch's OOM line with what it asked for and what the GPU had free (the rules oom_not_shortage* match it)
OOM_FREE_LINE = (
    r"Tried to allocate (?P<ask>[\d.]+) (?P<au>[KMG])iB\. GPU \d+ has a total capacity of [\d.]+ [KMG]iB"
    r" of which (?P<free>[\d.]+) (?P<fu>[KMG])iB is free"
)
_OOM_NUMBERS = re.compile(OOM_FREE_LINE)
_UNIT = {"K": 1 / (1 << 20), "M": 1 / 1024, "G": 1.0}


def _free_far_over(text: str) -> bool:
    m = _OOM_NUMBERS.search(text)
    if m is None:
        return False
    ask, free = float(m.group("ask")) * _UNIT[m.group("au")], float(m.group("free")) * _UNIT[m.group("fu")]
    return free >= 1.0 and free >= 10 * ask


@predicate
def free_far_over_request(ctx: Ctx) -> bool:
    """torch's OOM line says at least 1 GiB and ten times the request was free: no shortage."""
    return _free_far_over(ctx.text)


@predicate
def free_far_over_request_with_vllm_sleep(ctx: Ctx) -> bool:
    return _free_far_over(ctx.text) and bool(re.search(r"cumem|wake[ _]up|\bsleep\b|enable_sleep", ctx.before() + ctx.after()))


@predicate
def after_a_step(ctx: Ctx) -> bool:
    """A crash (a CUDA fault, a segfault) after the run logged a step: the same code ran the
    same kernels many times before, so it is taken as rare and retried; before any step it is
    what the code or its set-up does every time."""
    return ctx.step is not None


@predicate
def host_oom_retriable(ctx: Ctx) -> bool:
    """Retry unless the log shows the kill came before the first step: during start-up or
    model load, in an actor's constructor, before the first rollout finished, or with vLLM
    engines as the memory hogs (their host RAM, sleep-mode weights and swap, is fixed size):
    all sizing problems that would repeat. With no evidence either way, retry: the
    same-class-same-step rule stops a repeat. A full object store holds objects still in scope
    (Ray says they cannot be evicted): the same data fills it again, so it is never retried."""
    if "ObjectStoreFull" in ctx.text:
        return False
    if ctx.step is not None:
        return True
    if ctx.phase in ("startup", "placement", "model_load", "generate"):
        return False
    near = ctx.near()
    if re.search(r"name=\w+\.__init__|creation task", near):
        return False
    return not re.search(r"\bray::(?:LLMRayActor|RolloutRayActor)\b", near)


@predicate
def env_transient(ctx: Ctx) -> bool:
    near = ctx.near()
    return bool(TRANSIENT.search(near)) and not PERMANENT_ENV.search(near)


@predicate
def weight_sync_retriable(ctx: Ctx) -> bool:
    return bool(TIMEOUT.search(ctx.near())) and ctx.phase == "weight_sync"


@predicate
def after_frame(ctx: Ctx) -> bool:
    """The line is code quoted in a traceback (the line before it names a frame)."""
    previous = ctx.previous_lines(1)
    return bool(previous and TRACEBACK_FRAME.search(previous[0]))


@predicate
def in_trainer_frame(ctx: Ctx) -> bool:
    """Raised by the trainer script itself: its innermost frame is OpenRLHF's cli/."""
    frames = [line for line in ctx.previous_lines(8) if TRACEBACK_FRAME.search(line)]
    return bool(frames) and bool(re.search(r"openrlhf/cli/\w+\.py\"|train_ppo_ray\.py\"", frames[-1]))


@predicate
def sizes_named(ctx: Ctx) -> bool:
    """An error (not a warning) about batch, sample, device or parallel sizes."""
    return bool(re.search(r"Error\b|Exception\b|ERROR|assert", ctx.text)) and bool(
        re.search(
            r"(?i)batch|generations|samples|rollout|chunks?\b|world[_ ]size|gpus?\b|nodes?\b|devices|parallel|\btp\b|\bdp\b|heads|ranks?\b",
            ctx.text,
        )
    )


@predicate
def error_line(ctx: Ctx) -> bool:
    """An error line, not a warning."""
    return bool(re.search(r"Error\b|Exception\b|ERROR|assert", ctx.text))


@predicate
def dataset_key_context(ctx: Ctx) -> bool:
    if "not in the dataset" in ctx.text:
        return True
    return any(re.search(r"dataset|data\[|prompt|input_key|label_key", line) for line in ctx.previous_lines(8))


def vllm_line(ctx: Ctx) -> bool:
    return bool(VLLM_PREFIX.search(ctx.text) or "cumem_allocator" in ctx.text)


# ---------------------------------------------------------------- phases


@phase
def gpu_oom_phase(ctx: Ctx) -> str | None:
    if vllm_line(ctx):
        return "generate" if ctx.phase in LOOP or ctx.step is not None else "model_load"
    return ctx.phase


@phase
def reward_phase(ctx: Ctx) -> str | None:
    if "agent.py" in ctx.text or "(RolloutRayActor" in ctx.text:
        return "generate"
    return "make_experience"


@phase
def runtime_env_phase(ctx: Ctx) -> str | None:
    return "placement" if "Could not create the actor" in ctx.near() else "startup"


@phase
def import_phase(ctx: Ctx) -> str | None:
    """From the traceback; an import failing at a script's top level is start-up; vLLM and
    transformers' model modules are imported when the engines and models are built."""
    if ctx.phase is not None:
        return ctx.phase
    if re.search(r'File "[^"]+", line \d+, in <module>', ctx.before()[-4096:]) and "train_ppo_ray.py" not in ctx.before()[-4096:]:
        return "startup"
    return "model_load" if re.search(r"\bvllm\b|transformers\.models\.", ctx.near()) else "startup"


@phase
def unknown_fault_phase(ctx: Ctx) -> str | None:
    if "lazily at initialization" in ctx.near():
        return "model_load"
    return ctx.phase


@hint
def unknown_fault_hint(ctx: Ctx) -> str:
    what = exception_of(ctx.text) or ctx.match.group(0).strip()
    return f"a CUDA fault or crash outside the known classes ({what}): a code bug, or a fault the log does not explain; see the evidence"


@phase
def sync_rpc_phase(ctx: Ctx) -> str | None:
    return "model_load" if "init_process_group" in ctx.text else (ctx.phase or "weight_sync")


# ---------------------------------------------------------------- hints


# What a gpu_oom hint offers is said in two parts: changes `rlhf-launch resume` keeps the
# checkpoint for (runs/compat.py: the micro batches, checkpointing, offload, vLLM), then, after
# NEW_RUN, those the checkpoint cannot take (the ZeRO stage, a trained role's GPU count).
NEW_RUN = "a new run (the checkpoint pins them):"


@hint
def gpu_oom_hint(ctx: Ctx) -> str:
    if re.search(r"\bwake_up\b|reload_weights|cumem_allocator", ctx.near()):
        return (
            "vLLM ran out of GPU memory waking from sleep mode: what else holds the GPU (the trainer's states, a colocated "
            "model) leaves too little; resume with a lower `placement.vllm.gpu_memory_utilization`"
        )
    if vllm_line(ctx) or ctx.phase == "generate":
        return (
            "vLLM ran out of GPU memory: resume with a lower `placement.vllm.gpu_memory_utilization` (colocated with training) "
            "or a higher `placement.vllm.tensor_parallel_size`"
        )
    if ctx.phase == "make_experience":
        return (
            "resume with a lower `train.micro_rollout_batch_size` (ref/critic/reward forward passes) or `deepspeed.ref_reward_offload=true`"
        )
    if ctx.phase == "model_load":
        return (
            "the models do not fit: resume with `deepspeed.adam_offload=true` or a lower `placement.vllm.gpu_memory_utilization` "
            f"when colocated; or {NEW_RUN} `deepspeed.zero_stage=3`, more GPUs per role (`placement.actor.gpus_per_node`)"
        )
    if ctx.phase == "weight_sync":
        return (
            "the weight update needs room on both sides: resume with a lower `placement.vllm.gpu_memory_utilization`; "
            f"or {NEW_RUN} `deepspeed.zero_stage=3`"
        )
    return (
        "resume with a lower `train.micro_train_batch_size`, `deepspeed.gradient_checkpointing=true` or "
        f"`deepspeed.adam_offload=true`; or {NEW_RUN} `deepspeed.zero_stage=3` to shard more"
    )


@hint
def host_oom_hint(ctx: Ctx) -> str:
    if host_oom_retriable(ctx):
        return "a node ran out of host RAM after training had started (growth or a leak): resuming from the checkpoint resets it"
    return (
        "a node ran out of host RAM: turn off `deepspeed.adam_offload` / `deepspeed.ref_reward_offload` / "
        "`placement.vllm.enable_sleep` if on, spread roles over more nodes, or set `cluster.host_memory_gb` so the plan checks it"
    )


@hint
def worker_sigkill_hint(ctx: Ctx) -> str:
    return "a worker was SIGKILLed (Ray's SYSTEM_ERROR: most often the kernel OOM killer). " + host_oom_hint(ctx)


@hint
def argparse_hint(ctx: Ctx) -> str:
    if "unrecognized arguments" in ctx.text:
        return (
            "the trainer does not know these flags (renamed at 0.10.2, flat to dotted): set `openrlhf.version` to the "
            "release installed on the cluster, or fix `extra_args`"
        )
    return "a value the trainer's parser refuses: fix it in the config or `extra_args` (`rlhf-launch plan` shows the argv)"


@hint
def runtime_env_hint(ctx: Ctx) -> str:
    if env_transient(ctx):
        return "the runtime env set-up failed transiently (several jobs at once, a slow node): a resubmission should pass"
    return "the runtime env could not be set up: see the evidence; `runtime_env.working_dir` and `runtime_env.excludes` shape the upload"


@hint
def dataset_key_hint(ctx: Ctx) -> str:
    key = ctx.match.groupdict().get("key") or "?"
    return f"the dataset has no column '{key}': set `data.input_key` to one it has"


@hint
def nccl_hint(ctx: Ctx) -> str:
    if ctx.step is None and ctx.phase in STARTUP:
        return (
            "NCCL could not build its communicators across nodes: set NCCL_SOCKET_IFNAME / NCCL_IB_HCA in "
            "`runtime_env.env_vars` and check the nodes reach each other"
        )
    if re.search(r"watchdog got stuck|Heartbeat monitor timed out", ctx.text):
        what = "NCCL's watchdog got stuck (a CUDA / NCCL call hung: a peer gone, a GPU fault)"
    else:
        what = "a collective failed or timed out"
    if not nccl_retriable(ctx):
        return (
            f"{what}, and it does not look transient (a CUDA error or misuse inside NCCL, or before the first rollout "
            "finished): check the versions (`rlhf-launch versions`), the NCCL settings in `runtime_env.env_vars` and the network"
        )
    return (
        f"{what} and no node loss or OOM was found before it (a network / InfiniBand fault?): resumable; "
        "NCCL settings go in `runtime_env.env_vars`"
    )


@hint
def vllm_crash_hint(ctx: Ctx) -> str:
    if mid_run(ctx):
        return "a vLLM engine crashed mid-run: resumable from the last checkpoint (`checkpoint.save_steps` bounds the loss)"
    return "a vLLM engine died before training began: its root cause is in the EngineCore lines above the evidence"


@hint
def sync_rpc_hint(ctx: Ctx) -> str:
    if weight_sync_retriable(ctx):
        return "a weight update to vLLM timed out: resumable"
    return (
        "updating vLLM's weights failed: the installed vLLM may not match OpenRLHF (`rlhf-launch versions`); "
        "cross-node sync needs NCCL_SOCKET_IFNAME in `runtime_env.env_vars`"
    )


# ---------------------------------------------------------------- where: the node, the GPU

IP = r"\d{1,3}(?:\.\d{1,3}){3}"
RAY_PREFIX = re.compile(rf"^\s*\((?P<who>[\w.<>-]+)(?:,? ?pid=\d+)?(?:,? ?ip=(?P<ip>{IP}))?\)\s*")
NODE_SIGNS = (  # most specific first; the message's own words before Ray's `(who, ip=...)` prefix
    re.compile(rf"(?:and )?address: (?P<ip>{IP})"),
    re.compile(rf"\{{'node:(?P<ip>{IP})'"),
    re.compile(rf"(?:node_ip_address|node_manager_address|node IP|ip)[=: ]+(?P<ip>{IP})"),
    re.compile(rf"(?<![\d.])(?P<ip>{IP})(?![\d.])"),
    re.compile(r"^\w{3} +\d+ [\d:]+ (?P<host>[\w.-]+) kernel:"),
)
NODE_ID = re.compile(r"(?i)\b(?:node[ _]id|client ID|on node)[=: ]+(?P<id>[0-9a-f]{12,})")
GPU_SIGNS = (
    re.compile(r"\bPCI:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)"),
    re.compile(r"\bGPU (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)"),
    re.compile(r"\b(?P<uuid>GPU-[0-9a-f]{8}-[0-9a-f-]{27})"),
)
XID = re.compile(r"\bX(?:id|ID)\b(?: \(PCI:[^)]*\))?:? ?(?P<xid>\d+)")
APP_XIDS = {13, 31, 43, 45}  # raised by what the program did (a bad access, a killed context), not the hardware


def _node_in(line: str) -> str:
    prefix = RAY_PREFIX.match(line)
    message = line[prefix.end() :] if prefix else line
    name = ""
    for sign in NODE_SIGNS:
        match = sign.search(message)
        if match:
            name = next(v for v in match.groupdict().values() if v)
            break
    name = name or (prefix.group("ip") if prefix and prefix.group("ip") else "")
    found = NODE_ID.search(message)
    node_id = found.group("id")[:12] if found else ""
    if name and node_id:
        return f"{name} (node id {node_id})"
    return name or node_id


def node_of(ctx: Ctx) -> str:
    """The node a failure names: its IP (the message's own words first, then Ray's
    `(who, ip=...)` prefix), else a kernel log's host, else its Ray node id; from the
    decisive line, else the few lines before it; "" when the log does not say."""
    lines = (ctx.text, *reversed(ctx.previous_lines(5)))
    for n, line in enumerate(lines):
        name = _node_in(line)
        if name and not NODE_ID_ONLY.match(name):
            return name
        if name:  # only Ray's node id: the IP of the same block (`ip: 10.0.0.42` of a RayActorError) names it too
            ip = next((found for before in lines[n + 1 :] if (found := _node_in(before)) and not NODE_ID_ONLY.match(found)), "")
            return f"{ip.split(' (')[0]} (node id {name})" if ip else name
    return ""


NODE_ID_ONLY = re.compile(r"^[0-9a-f]{12}$")


def gpu_of(ctx: Ctx) -> str:
    for text in (ctx.text, ctx.near()):
        for sign in GPU_SIGNS:
            match = sign.search(text)
            if match:
                return next(v for v in match.groupdict().values() if v)
    return ""


# ---------------------------------------------------------------- gpu_fault, node_lost


@predicate
def hardware_fault(ctx: Ctx) -> bool:
    """Not an Xid the program itself causes (13, 31, 43, 45: those are code faults)."""
    match = XID.search(ctx.text)
    return match is None or int(match.group("xid")) not in APP_XIDS or "fallen off" in ctx.text or "ECC" in ctx.text


@hint
def gpu_fault_hint(ctx: Ctx) -> str:
    node, gpu = node_of(ctx), gpu_of(ctx)
    xid = XID.search(ctx.text)
    what = "a GPU failed in hardware" + (f" (Xid {xid.group('xid')})" if xid else "")
    where = (f" on node {node}" if node else "") + (f", GPU {gpu}" if gpu else "")
    return (
        f"{what}{where}: drain that node (`ray drain-node`, or cordon it) and have the GPU reset or replaced, "
        "then resume from the checkpoint"
        + ("" if node else " (the log does not name the node: `nvidia-smi -q -d ECC` / `dmesg | grep Xid` on each node finds it)")
    )


@hint
def node_lost_hint(ctx: Ctx) -> str:
    node = node_of(ctx)
    cause = "shut down by the autoscaler" if re.search(r"(?i)autoscaler|DRAIN", ctx.text) else "died or was shut down"
    if re.search(r"(?i)raylet", ctx.text):
        cause = "lost its raylet (it died or was stopped)"
    who = f"node {node}" if node else "a node"
    return f"{who} {cause}: the run resumes once the cluster has the GPUs again (`rlhf-launch status` shows the nodes)"


# ---------------------------------------------------------------- nccl

HARD_NCCL = re.compile(r"unhandled cuda error|invalid usage|invalid argument|SIGSEGV|Segmentation fault")
TRANSIENT_NCCL = re.compile(
    r"(?i)timed? ?out|timeout|watchdog|connection (?:reset|refused|closed)|reset by peer|got completion|completion (?:with )?error"
    r"|remote process exited|retry (?:counter )?exceeded|\bbroken pipe"
)
NCCL_INIT = re.compile(
    r"\binit\.cc\b|ncclCommInit|init_process_group|DistStoreError|waiting for workers|[Rr]endezvous|while trying to connect to"
    r"|_create_c10d_store|failed to listen|failed to connect to|init_communicator|setting up NCCL communicator|ncclUniqueId"
)


@phase
def nccl_phase(ctx: Ctx) -> str | None:
    """Building the communicators (init, rendezvous) happens when the models are set up."""
    if ctx.step is None and ctx.phase not in LOOP and NCCL_INIT.search(ctx.near()):
        return "model_load"
    return ctx.phase


@predicate
def nccl_retriable(ctx: Ctx) -> bool:
    """A collective that failed mid-run for a transient reason (a timeout, a reset link, an
    InfiniBand completion error): yes. Communicators that never came up, a CUDA error or
    misuse inside NCCL, or a failure before the first rollout finished: no."""
    if ctx.phase in STARTUP or HARD_NCCL.search(ctx.text):
        return False
    if ctx.step is not None:
        return True
    if ctx.phase == "generate":
        return False  # the first rollout never finished
    if ctx.phase in LOOP:
        return True
    return bool(TRANSIENT_NCCL.search(ctx.near()))


COLLECTIVE_FAILURE = re.compile(
    r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out|NCCL error"
    r"|nccl(?:Remote|Internal|System|UnhandledCuda)Error|DistBackendError"
)


@predicate
def no_collective_failure_before(ctx: Ctx) -> bool:
    """No collective failed earlier in the failure region (since the last step): a worker
    that died after a watchdog timeout is the timeout's casualty, not its cause."""
    start = max(ctx.boundary, ctx.line.offset - (1 << 20))
    return not COLLECTIVE_FAILURE.search(ctx.source.text(start, ctx.line.offset))


RENDEZVOUS_FRAMES = re.compile(r"torch/distributed/run\.py|elastic/(?:agent|rendezvous)/|\binit_process_group\b|\brendezvous\(")


@predicate
def rendezvous_retriable(ctx: Ctx) -> bool:
    """A store or rendezvous that timed out before the first step, in start-up or in the
    launcher's or init_process_group's frames: the ranks never met (a wrong address, a
    blocked port), which a resubmit meets again. Mid-run (a rank gone, the store's host
    lost): as any NCCL failure."""
    if ctx.step is None and (ctx.phase in STARTUP or RENDEZVOUS_FRAMES.search(_stack_after(ctx))):
        return False
    return nccl_retriable(ctx)


NCCL_STACK = re.compile(r"\bnccl\w*|libnccl|addProxyOp|ProcessGroupNCCL")
VLLM_STACK = re.compile(r"/vllm/|\bvllm\.|flashinfer|\bEngineCore|capture_model|RayWorkerWrapper|VllmWorker")


def _stack_after(ctx: Ctx) -> str:
    """The crash's own lines: the decisive line, the PC line before it and the stack after."""
    return "\n".join(ctx.previous_lines(3)) + "\n" + ctx.text + "\n" + ctx.after()[:2048]


@predicate
def nccl_stack(ctx: Ctx) -> bool:
    return bool(NCCL_STACK.search(_stack_after(ctx)))


@predicate
def vllm_stack(ctx: Ctx) -> bool:
    return bool(VLLM_STACK.search(_stack_after(ctx)))


@predicate
def vllm_nearby(ctx: Ctx) -> bool:
    return bool(VLLM_STACK.search(ctx.near()))


# ---------------------------------------------------------------- weight_sync

SYNC_CONTEXT = re.compile(
    r"init_communicator|(?i:update_?weight)|broadcast_to_vllm|(?i:weights?[_ ]update[_ ]group)|model_update_group"
    r"|weight[_ ]sync|sync_weight|collective_rpc|Worker failed with error '|StatelessProcessGroup"
    r"|\brefit\w*|update_weights_from_\w+|rebuild_cuda_tensor|receive_weights|load_weights_from_\w+"  # NeMo-RL, SGLang, IPC
    r"|sync_model_weights|update_named_param|sync_model_from"  # verl, TRL
    r"|\w*sharding_manager\b|load_dtensor_weights"  # verl's FSDP -> vLLM hand-over
)
PYNCCL = re.compile(r"pynccl|raise RuntimeError\(f\"NCCL error: \{error_str\}\"\)")
VLLM_TP = re.compile(r"VllmWorkerProcess|RayWorkerWrapper|multiproc_worker_utils|ncclAllReduce|all_reduce|EngineCore|execute_model")


@predicate
def sync_context(ctx: Ctx) -> bool:
    """The failure belongs to the trainer -> vLLM weight update: named around it, in its
    phase, or raised by vLLM's pynccl outside vLLM's own tensor-parallel workers (OpenRLHF's
    weight-update group is a pynccl communicator, utils/distributed_util.py)."""
    near = ctx.near()
    if SYNC_CONTEXT.search(near) and "execute_model" not in near:
        return True
    if PYNCCL.search(near) and not VLLM_TP.search(near):
        return True
    return infer_phase(ctx) == "weight_sync"


@predicate
def sync_setup(ctx: Ctx) -> bool:
    """Building the update group (before any step), from vLLM's side or the trainer's."""
    return ctx.step is None and (vllm_line(ctx) or sync_context(ctx))


@hint
def sync_failure_hint(ctx: Ctx) -> str:
    if re.search(r"HTTPError|Server Error|Invalid (?:object|request|argument)", ctx.text):
        return (
            "the engine refused the weight update through its API: the trainer and the engine disagree (versions, the "
            "engines' parallel layout): pin the versions `rlhf-launch versions` lists"
        )
    if sync_transient(ctx):
        return "a network fault during the weight update to vLLM: resumable from the last checkpoint"
    return (
        "the trainer -> vLLM weight update failed (see the evidence): building its group needs the GPUs and devices both "
        "sides expect and NCCL_SOCKET_IFNAME / NCCL_IB_HCA in `runtime_env.env_vars`"
    )


@predicate
def sync_transient(ctx: Ctx) -> bool:
    """A timeout or a network fault during the update itself (not while building its group)."""
    return ctx.phase not in STARTUP and (bool(TIMEOUT.search(ctx.near())) or bool(TRANSIENT_NCCL.search(ctx.text)))


# ---------------------------------------------------------------- reward_remote

# The reward code or its server named around the line (not the bare word: step lines carry
# a `reward` metric); lines of other components' clients are never the reward server's.
REWARD_CONTEXT = re.compile(
    r"(?i)reward\w*\.py|reward_f\w*|reward_model\w*\(|remote_rm|rm_url|reward_remote|get_rewards?\b|\bjudge|verifier"
    r"|\bopenai\b|chat\.completions|compute_score|score_fn|get_score|Reward\w*(?:Worker|Actor|Manager)"
)
NOT_REWARD = re.compile(
    r"(?i)huggingface|hf_hub|wandb|docker|pypi\.org|download|nccl|gloo|c10d|TCPStore|socket\.cpp|raylet|\bgcs\b|dashboard"
)


@predicate
def reward_context(ctx: Ctx) -> bool:
    return bool(REWARD_CONTEXT.search(ctx.near())) and not NOT_REWARD.search(ctx.text)


@predicate
def reward_frames_before(ctx: Ctx) -> bool:
    """An HTTP client's frame called from a reward module (the traceback's frames above it)."""
    return any(re.search(r'File "[^"]*reward[^"]*\.py"', line) for line in ctx.previous_lines(8))


# A 4xx answer (not 408 / 429) means the request itself is wrong: the server will refuse it again.
CLIENT_ERROR = re.compile(
    r"\b(?:BadRequestError|AuthenticationError|PermissionDeniedError|NotFoundError|UnprocessableEntityError)\b"
    r"|(?:Error code|status(?: code)?|status_code|HTTP(?:/[\d.]+)?)[=: ]+4(?!08|29)\d\d\b|\b4(?!08|29)\d\d Client Error"
    r'|"code": ?4(?!08|29)\d\d\b'
)


@predicate
def reward_server_retriable(ctx: Ctx) -> bool:
    """The server may come back (refused, timed out, 5xx): retry, unless the reward code
    needs it at import / start-up, or it answered 4xx (the request is wrong, not the server)."""
    if CLIENT_ERROR.search(ctx.text):
        return False
    return ctx.step is not None or ctx.phase not in STARTUP


OTHER_CLIENT = re.compile(r"(?i)huggingface\.co|hf_hub|huggingface_hub|wandb|pypi\.org|docker|github\.com|download")


@predicate
def no_other_client(ctx: Ctx) -> bool:
    """The HTTP call is not the Hub's, W&B's or a package download's (those have classes of their own)."""
    return not OTHER_CLIENT.search(ctx.text) and not OTHER_CLIENT.search("\n".join(ctx.previous_lines(6)))


@phase
def reward_server_phase(ctx: Ctx) -> str | None:
    around = ctx.before()[-4096:] + "\n" + ctx.text + "\n" + ctx.after()[:1024]
    if re.search(r'exec_module|File "[^"]*reward[^"]*", line \d+, in <module>|get_custom_reward_fn|load_reward', around):
        return "startup"
    return ctx.phase or reward_phase(ctx)


@predicate
def key_subscripted(ctx: Ctx) -> bool:
    """A bare `'key'` line (a KeyError printed by str()) whose key a nearby frame indexes
    with, in code that reads dataset rows."""
    key = ctx.match.groupdict().get("key")
    if not key:
        return False
    near = ctx.near()
    return bool(re.search(rf"\[\s*['\"]{re.escape(key)}['\"]\s*\]", near)) and bool(
        re.search(r"(?i)dataset|inputs|example|sample|batch|prompt|data\[", near)
    )
