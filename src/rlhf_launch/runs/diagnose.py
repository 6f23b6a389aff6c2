"""Why an attempt failed or stalled, from its driver log (and, on a live cluster, Ray's job
message, dead actors and pending placement groups). Pure: text in, a `Diagnosis` out.

Failure classes, in order of precedence (the first that matches wins; a root cause
outranks its symptoms: NCCL timeouts on the survivors of a dead node are `node_lost`, an
actor SIGKILLed by the OOM killer is `host_oom`). docs/diagnose.md has them as a table.

config         the trainer refused its arguments: argparse errors (unknown flag, bad
               value), OpenRLHF's start-up asserts, DeepSpeed's batch-size check, W&B
               refusing the key.
               Retriable: never (the same arguments fail the same way).
runtime_env    Ray could not set up the job's runtime env: upload too large (413, over
               512 MiB), an env var that OpenRLHF's own ray.init also sets, packages that
               failed to install, a set-up that timed out.
               Retriable: only when it looks transient (timeouts, connection resets).
import         a module cannot be imported or does not match another: ModuleNotFoundError,
               ImportError, `undefined symbol` (ABI), an unexpected keyword argument
               between libraries (version mismatch). Retriable: never (the image must change).
model_or_data  a model, tokenizer or dataset cannot be loaded: HF 401/403/404, gated repo,
               missing path, missing dataset key, no chat template. Retriable: never.
gpu_oom        CUDA out of memory in any phase (training, vLLM, weight sync, save).
               Retriable: never (it recurs at the same step; the sizing must change).
weight_sync    updating vLLM's weights from the trainer failed: the broadcast, CUDA IPC,
               a dtype mismatch, the update group's rendezvous.
               Retriable: only a timeout during the sync itself.
vllm           a vLLM engine failed to start (no memory for the KV cache blocks, the max
               length over the KV cache, engine init failed) or crashed.
               Retriable: a crash mid-run; never a start-up failure.
reward_remote  the remote reward server (`models.reward_remote_url`) did not answer, or a
               custom reward function (`models.reward_func`) failed. Retriable: the
               server (connection refused, 5xx); never a reward-function bug.
host_oom       a worker was killed for host memory: Ray's memory monitor, the kernel OOM
               killer, or Ray's generic SYSTEM_ERROR / SIGKILL exit when nothing more
               specific precedes it. Retriable: unless the log shows it came before the
               first step (then it is sizing and would repeat).
node_lost      a node or raylet died (missed heartbeats, preemption), an actor died
               because its node did, the GCS connection was lost.
               Retriable: yes (not a wrong head address at start-up).
nccl           NCCL errors and collective timeouts (watchdog), c10d rendezvous timeouts.
               Retriable: yes, unless the communicators never came up (network config).
unknown        none of the above (CUDA faults, segfaults, code bugs); a hang with
               placement groups still pending reads `unknown` in phase `placement`.
               Retriable: only when the message says to try again.

`retriable` answers: would resubmitting from the latest checkpoint plausibly succeed?
`phase` is one of startup, placement, model_load, generate, make_experience, train,
weight_sync, save (or None): from the failing call's traceback, else the last progress
line before the decisive one. `step` is the last global step seen. `evidence` holds the
decisive lines, redacted (the W&B key of the environment, bearer tokens, `hf_...` tokens,
40-hex keys, `key=`/`token=` values). `hint` names the config key to change.

Reading a huge log (`diagnose_file`, and `classify` the same way): only the part after the
last `Global step` (or `checkpoint_states`) line counts, found by reading backwards at most
256 MiB; what came before it was survived. Its last 4 MiB are searched for every rule. A
failure that leaves survivors hanging (node loss, OOM kills, a GPU OOM on one rank, a vLLM
crash, a failed weight sync, a CUDA fault) can precede the end by a long time, so the rest
is read forwards from the last step in 8 MiB chunks for those rules only, and only lines
holding `rror`, `ERROR`, `memory`, `dead` or `died`; the first chunk with such a cause
decides (the cause comes first, its aftermath after), unless the tail holds a class that
outranks it. Rules read only the lines their literal anchors find, so a 1 GB log takes
~0.01 s with the failure at its end and ~0.4 s with its root cause 100 MB before the end
(bench/run.py --only diagnose); ~1 s when 100 MB follow the last step and hold no cause.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhf_launch.core.secrets import REDACTED, redact, wandb_key
from rlhf_launch.runs.progress import CHECKPOINT_STATES, GLOBAL_STEP
from rlhf_launch.util.enums import StrEnum

__all__ = ["PHASES", "Diagnosis", "FailureClass", "classify", "diagnose_file", "redact_line"]

TAIL = 4 << 20  # searched for every rule
CHUNK = 8 << 20  # reads beyond the tail (backwards for the last step, forwards for causes)
MAX_BACK = 256 << 20  # how far back from the end root causes are looked for
CONTEXT_BEFORE = 16 << 10  # traceback frames read before a decisive line
CONTEXT_AFTER = 4 << 10
MARKER_BACK = 2 << 20  # how far back the last progress line is looked for
EVIDENCE_LINES = 5
EVIDENCE_WIDTH = 400

PHASES = ("startup", "placement", "model_load", "generate", "make_experience", "train", "weight_sync", "save")
_LOOP = ("generate", "make_experience", "train", "weight_sync", "save")


class FailureClass(StrEnum):
    CONFIG = "config"
    IMPORT = "import"
    MODEL_OR_DATA = "model_or_data"
    GPU_OOM = "gpu_oom"
    HOST_OOM = "host_oom"
    NCCL = "nccl"
    NODE_LOST = "node_lost"
    VLLM = "vllm"
    WEIGHT_SYNC = "weight_sync"
    RUNTIME_ENV = "runtime_env"
    REWARD_REMOTE = "reward_remote"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Diagnosis:
    cls: FailureClass
    retriable: bool
    phase: str | None
    step: int | None
    evidence: list[str]
    hint: str
    rule: str = ""  # which rule decided (for tests and bug reports)

    def as_json(self) -> dict[str, Any]:
        return {
            "class": str(self.cls),
            "retriable": self.retriable,
            "phase": self.phase,
            "step": self.step,
            "evidence": list(self.evidence),
            "hint": self.hint,
        }


# ---------------------------------------------------------------- redaction

_SECRETS = (
    (re.compile(r"(?i)\b(bearer|token)(\s+|=|:\s*)[A-Za-z0-9._~+/=-]{8,}"), rf"\1\2{REDACTED}"),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), REDACTED),
    (re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])"), REDACTED),
    (re.compile(r"\bwandb_v\d+_[A-Za-z0-9_]{16,}"), REDACTED),
    (
        re.compile(r"(?i)\b((?:use_wandb|api[_-]?key|(?:access|auth)[_-]?token|token|password|secret)\s*[=:]\s*)(['\"]?)[^'\"\s,)]{6,}\2"),
        rf"\1\2{REDACTED}\2",
    ),
    (re.compile(r"\b(key\s*=\s*)(['\"]?)[^'\"\s,)]{6,}\2"), rf"\1\2{REDACTED}\2"),  # namespace(wandb=namespace(key='...'))
    (re.compile(r"(--(?:use_wandb|logger\.wandb\.key)[ =])\S+"), rf"\1{REDACTED}"),
)


def redact_line(line: str, environ: Mapping[str, str] | None = None) -> str:
    """A log line fit to show: the W&B key of the environment and anything shaped like a
    secret (bearer tokens, `hf_...`, a 40-hex W&B key, `key=`/`token=` values) replaced."""
    line = redact(line, [wandb_key(environ)])
    for pattern, replacement in _SECRETS:
        line = pattern.sub(replacement, line)
    return line


# ---------------------------------------------------------------- reading


class _Source:
    """A log as bytes read by range: a file (pread) or memory, plus synthetic lines from
    Ray's state appended after its end."""

    def __init__(self, data: bytes | None = None, fd: int | None = None, size: int = 0, extra: bytes = b""):
        self.data, self.fd, self.log_size, self.extra = data, fd, size if data is None else len(data), extra
        self.size = self.log_size + len(extra)

    def read(self, lo: int, hi: int) -> bytes:
        lo, hi = max(0, lo), min(self.size, hi)
        if lo >= hi:
            return b""
        out = b""
        if lo < self.log_size:
            end = min(hi, self.log_size)
            if self.data is not None:
                out = self.data[lo:end]
            else:
                assert self.fd is not None
                out = os.pread(self.fd, end - lo, lo)
        if hi > self.log_size:
            out += self.extra[max(0, lo - self.log_size) : hi - self.log_size]
        return out


@dataclass
class _Line:
    offset: int  # in the source
    text: str


def _pool(data: bytes, base: int, anchors: Sequence[bytes], every_line: bool = False) -> _Pool:
    """The lines of `data` containing any anchor (every line when asked), in order, with
    which anchor found which line (a rule only reads the lines of its own anchors)."""
    spans: dict[int, int] = {}
    hits: dict[bytes, list[int]] = {}
    if every_line:
        start = 0
        for piece in data.split(b"\n"):
            spans[start] = start + len(piece)
            start += len(piece) + 1
    else:
        for anchor in anchors:
            found = hits.setdefault(anchor, [])
            i = data.find(anchor)
            while i != -1:
                start = data.rfind(b"\n", 0, i) + 1
                end = data.find(b"\n", i)
                end = len(data) if end == -1 else end
                spans[start] = end
                found.append(start)
                i = data.find(anchor, end)
    order = sorted(spans)
    lines = [_Line(base + s, data[s : spans[s]].decode("utf-8", "replace")) for s in order]
    index = {s: n for n, s in enumerate(order)}
    return _Pool(lines, None if every_line else {a: [index[s] for s in starts] for a, starts in hits.items()})


# ---------------------------------------------------------------- context for a decision


@dataclass
class _Ctx:
    source: _Source
    line: _Line
    match: re.Match[str]
    step: int | None
    boundary: int  # where the failure region starts (after the last step line)
    phase: str | None = None
    _before: str | None = None
    _after: str | None = None

    @property
    def text(self) -> str:
        return self.line.text

    def before(self) -> str:
        """The log just before the decisive line (its traceback frames)."""
        if self._before is None:
            lo = max(0, self.line.offset - CONTEXT_BEFORE)
            self._before = self.source.read(lo, self.line.offset).decode("utf-8", "replace")
        return self._before

    def after(self) -> str:
        if self._after is None:
            end = self.line.offset + len(self.line.text.encode("utf-8", "replace"))
            self._after = self.source.read(end, end + CONTEXT_AFTER).decode("utf-8", "replace")
        return self._after

    def near(self) -> str:
        return self.before()[-2048:] + "\n" + self.text + "\n" + self.after()[:2048]

    def previous_lines(self, n: int) -> list[str]:
        return self.before().splitlines()[-n:]


Predicate = Callable[[_Ctx], bool]
Text = Callable[[_Ctx], str]
PhaseOf = Callable[[_Ctx], "str | None"]


@dataclass(frozen=True)
class _Rule:
    name: str
    cls: FailureClass
    pattern: re.Pattern[str]
    anchors: tuple[bytes, ...]
    retriable: bool | Predicate
    hint: str | Text
    phase: str | PhaseOf | None = None  # fixed, computed, or inferred (None)
    deep: bool = False  # looked for back to the last step, not only in the tail
    when: Predicate | None = None  # an extra condition on the context
    exclude: re.Pattern[str] | None = None


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


TRANSIENT = _rx(r"(?i)timed? ?out|timeout|wait_for\(|connection (?:reset|refused|aborted)|temporar|\b50[234]\b|try again")
PERMANENT_ENV = _rx(r"(?i)too large|exceeds the maximum|does not exist|no such file|not found|permission denied|conflict")
TIMEOUT = _rx(r"(?i)timed out|TimeoutError|Timeout\(ms\)|timeout after|deadline exceeded")
VLLM_PREFIX = _rx(r"^\s*(?:\|\s*)?\((?:\w*LLMRayActor|RolloutRayActor|RayWorkerVllm|RayWorkerWrapper|EngineCore\w*)\b")
TRACEBACK_FRAME = _rx(r'File "[^"]+", line \d+')


def _not_startup(ctx: _Ctx) -> bool:
    """Mid-run (a step seen, or the failure inside the training loop), or nothing says it
    was start-up."""
    return ctx.step is not None or ctx.phase not in ("startup", "placement", "model_load")


def _mid_run(ctx: _Ctx) -> bool:
    return ctx.step is not None or ctx.phase in _LOOP


def _host_oom_retriable(ctx: _Ctx) -> bool:
    """Retry unless the log shows the kill came before the first step: during start-up or
    model load, in an actor's constructor, before the first rollout finished, or with vLLM
    engines as the memory hogs (their host RAM, sleep-mode weights and swap, is fixed size):
    all sizing problems that would repeat. With no evidence either way, retry: the
    same-class-same-step rule stops a repeat."""
    if ctx.step is not None:
        return True
    if ctx.phase in ("startup", "placement", "model_load", "generate"):
        return False
    near = ctx.near()
    if re.search(r"name=\w+\.__init__|creation task", near):
        return False
    return not re.search(r"\bray::(?:LLMRayActor|RolloutRayActor)\b", near)


def _env_transient(ctx: _Ctx) -> bool:
    near = ctx.near()
    return bool(TRANSIENT.search(near)) and not PERMANENT_ENV.search(near)


def _weight_sync_retriable(ctx: _Ctx) -> bool:
    return bool(TIMEOUT.search(ctx.near())) and ctx.phase == "weight_sync"


def _after_frame(ctx: _Ctx) -> bool:
    """The line is code quoted in a traceback (the line before it names a frame)."""
    previous = ctx.previous_lines(1)
    return bool(previous and TRACEBACK_FRAME.search(previous[0]))


def _in_trainer_frame(ctx: _Ctx) -> bool:
    """Raised by the trainer script itself: its innermost frame is OpenRLHF's cli/."""
    frames = [line for line in ctx.previous_lines(8) if TRACEBACK_FRAME.search(line)]
    return bool(frames) and bool(re.search(r"openrlhf/cli/\w+\.py\"|train_ppo_ray\.py\"", frames[-1]))


def _dataset_context(ctx: _Ctx) -> bool:
    return any(re.search(r"dataset|data\[|prompt|input_key|label_key", line) for line in ctx.previous_lines(8))


def _vllm_line(ctx: _Ctx) -> bool:
    return bool(VLLM_PREFIX.search(ctx.text) or "cumem_allocator" in ctx.text)


def _gpu_oom_phase(ctx: _Ctx) -> str | None:
    if _vllm_line(ctx):
        return "generate" if ctx.phase in _LOOP or ctx.step is not None else "model_load"
    return ctx.phase


def _gpu_oom_hint(ctx: _Ctx) -> str:
    if _vllm_line(ctx) or ctx.phase == "generate":
        return (
            "vLLM ran out of GPU memory: lower `placement.vllm.gpu_memory_utilization` (colocated with training) "
            "or raise `placement.vllm.tensor_parallel_size`"
        )
    if ctx.phase == "make_experience":
        return "lower `train.micro_rollout_batch_size` (ref/critic/reward forward passes) or set `deepspeed.ref_reward_offload=true`"
    if ctx.phase == "model_load":
        return (
            "the models do not fit: `deepspeed.zero_stage=3`, `deepspeed.adam_offload=true`, more GPUs per role "
            "(`placement.actor.gpus_per_node`), or a lower `placement.vllm.gpu_memory_utilization` when colocated"
        )
    if ctx.phase == "weight_sync":
        return "the weight update needs room on both sides: lower `placement.vllm.gpu_memory_utilization` or use `deepspeed.zero_stage=3`"
    return (
        "lower `train.micro_train_batch_size`, set `deepspeed.gradient_checkpointing=true` or `deepspeed.adam_offload=true`, "
        "or shard more with `deepspeed.zero_stage=3`"
    )


def _host_oom_hint(ctx: _Ctx) -> str:
    if _host_oom_retriable(ctx):
        return "a node ran out of host RAM after training had started (growth or a leak): resuming from the checkpoint resets it"
    return (
        "a node ran out of host RAM: turn off `deepspeed.adam_offload` / `deepspeed.ref_reward_offload` / "
        "`placement.vllm.enable_sleep` if on, spread roles over more nodes, or set `cluster.host_memory_gb` so the plan checks it"
    )


def _argparse_hint(ctx: _Ctx) -> str:
    if "unrecognized arguments" in ctx.text:
        return (
            "the trainer does not know these flags (renamed at 0.10.2, flat to dotted): set `openrlhf.version` to the "
            "release installed on the cluster, or fix `extra_args`"
        )
    return "a value the trainer's parser refuses: fix it in the config or `extra_args` (`rlhf-launch plan` shows the argv)"


def _reward_phase(ctx: _Ctx) -> str | None:
    if "agent.py" in ctx.text or "(RolloutRayActor" in ctx.text:
        return "generate"
    return "make_experience"


def _runtime_env_phase(ctx: _Ctx) -> str:
    return "placement" if "Could not create the actor" in ctx.near() else "startup"


def _runtime_env_hint(ctx: _Ctx) -> str:
    if _env_transient(ctx):
        return "the runtime env set-up failed transiently (several jobs at once, a slow node): a resubmission should pass"
    return "the runtime env could not be set up: see the evidence; `runtime_env.working_dir` and `runtime_env.excludes` shape the upload"


def _nccl_hint(ctx: _Ctx) -> str:
    if not _not_startup(ctx):
        return (
            "NCCL could not build its communicators across nodes: set NCCL_SOCKET_IFNAME / NCCL_IB_HCA in "
            "`runtime_env.env_vars` and check the nodes reach each other"
        )
    return (
        "a collective failed or timed out and no node loss or OOM was found before it (a network / InfiniBand fault?): "
        "resumable; NCCL settings go in `runtime_env.env_vars`"
    )


def _vllm_crash_hint(ctx: _Ctx) -> str:
    if _mid_run(ctx):
        return "a vLLM engine crashed mid-run: resumable from the last checkpoint (`checkpoint.save_steps` bounds the loss)"
    return "a vLLM engine died before training began: its root cause is in the EngineCore lines above the evidence"


def _nccl_phase(ctx: _Ctx) -> str | None:
    if re.search(r"\binit\.cc\b|ncclCommInit|init_process_group", ctx.text):
        return "model_load"
    return ctx.phase


def _import_phase(ctx: _Ctx) -> str | None:
    """From the traceback; an import failing at a script's top level is start-up; vLLM and
    transformers' model modules are imported when the engines and models are built."""
    if ctx.phase is not None:
        return ctx.phase
    if re.search(r'File "[^"]+", line \d+, in <module>', ctx.before()[-4096:]) and "train_ppo_ray.py" not in ctx.before()[-4096:]:
        return "startup"
    return "model_load" if re.search(r"\bvllm\b|transformers\.models\.", ctx.near()) else "startup"


def _unknown_fault_phase(ctx: _Ctx) -> str | None:
    if "lazily at initialization" in ctx.near():
        return "model_load"
    return ctx.phase


CONFIG, ENV, IMPORT, DATA = FailureClass.CONFIG, FailureClass.RUNTIME_ENV, FailureClass.IMPORT, FailureClass.MODEL_OR_DATA
GPU, HOST, NODE, SYNC = FailureClass.GPU_OOM, FailureClass.HOST_OOM, FailureClass.NODE_LOST, FailureClass.WEIGHT_SYNC
VLLM, REWARD, NCCL, UNKNOWN = FailureClass.VLLM, FailureClass.REWARD_REMOTE, FailureClass.NCCL, FailureClass.UNKNOWN

# Beyond the tail only lines holding one of these are read (each anchor costs a pass over
# the bytes: ~0.1 s per 100 MB): every deep rule's usual line has one (`...Error`, vLLM's
# and Ray's `ERROR`, out of memory, dead / died nodes and actors).
DEEP_ANCHORS = (b"rror", b"ERROR", b"memory", b"dead", b"died")

RULES: tuple[_Rule, ...] = (
    # ------------------------------------------------------------ config
    _Rule(
        "argparse",
        CONFIG,
        _rx(
            r"(?<![\w.-])[\w.-]+(?:\.py)?: error: "
            r"(?:unrecognized arguments|argument |the following arguments are required|ambiguous option)"
        ),
        (b"rror",),
        False,
        _argparse_hint,
        "startup",
    ),
    _Rule(
        "deepspeed_batch",
        CONFIG,
        _rx(r"Check batch related parameters\. train_batch_size is not equal to"),
        (b"rror",),
        False,
        "`train.train_batch_size` must equal `train.micro_train_batch_size` x gradient accumulation x the actor's GPUs "
        "(`placement.actor`): make it a multiple of micro batch x GPUs",
        "model_load",
    ),
    _Rule(
        "trainer_assert",
        CONFIG,
        _rx(r"\b(?:AssertionError|ValueError): \S"),
        (b"rror",),
        False,
        "OpenRLHF's start-up check refused the arguments (see the evidence); `rlhf-launch plan` runs the same checks",
        "startup",
        when=_in_trainer_frame,
        exclude=_rx(r"(?i)runtime.?env"),
    ),
    _Rule(
        "wandb_auth",
        CONFIG,
        _rx(r"(?i)wandb.*(?:\b40[13]\b|unauthori[sz]ed|api_key not configured|invalid api key)|UsageError: api_key"),
        (b"rror", b"ERROR"),
        False,
        "W&B refused the key: export a valid WANDB_API_KEY where you run rlhf-launch (it travels in the job's runtime_env)",
        "startup",
    ),
    # ------------------------------------------------------------ runtime_env
    _Rule(
        "env_too_large",
        ENV,
        _rx(r"Request Entity Too Large|RequestEntityTooLarge|Payload Too Large|exceeds the maximum size of"),
        (b"Large", b"xceeds the maximum"),
        False,
        "the working_dir upload is too large (Ray: 100 MiB through the dashboard, 512 MiB per package): add the big files "
        "to `runtime_env.excludes` or point `runtime_env.working_dir` at a smaller directory",
        "startup",
    ),
    _Rule(
        "env_merge",
        ENV,
        _rx(r"Failed to merge the Job's runtime env"),
        (b"ailed",),
        False,
        "`runtime_env.env_vars` sets a key OpenRLHF's own ray.init sets (TOKENIZERS_PARALLELISM, NCCL_DEBUG, "
        "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS): remove it, or add RAY_OVERRIDE_JOB_RUNTIME_ENV=1",
        "startup",
    ),
    _Rule(
        "env_packages",
        ENV,
        _rx(r"(?i)gone wrong while installing the runtime_env|Failed to install (?:pip|conda|uv)|pip install .* (?:failed|error)"),
        (b"rror", b"ailed"),
        False,
        "the runtime env's packages failed to install: bake them into the cluster image",
        "startup",
    ),
    _Rule(
        "env_setup",
        ENV,
        _rx(
            r"RuntimeEnvSetupError|Failed to set ?up runtime env|runtime env failed to be created|Failed to upload working_dir"
            r"|Failed to (?:create|download) (?:the )?runtime env|runtime env setup error"
        ),
        (b"rror", b"ailed"),
        _env_transient,
        _runtime_env_hint,
        _runtime_env_phase,
    ),
    # ------------------------------------------------------------ import
    _Rule(
        "module_not_found",
        IMPORT,
        _rx(r"ModuleNotFoundError|No module named '"),
        (b"rror",),
        False,
        "a module is missing on the cluster (the driver or a worker's environment): install it in the image every node runs",
        _import_phase,
    ),
    _Rule(
        "undefined_symbol",
        IMPORT,
        _rx(r"undefined symbol: "),
        (b"symbol",),
        False,
        "a compiled extension (flash-attn, vLLM) was built for another torch: install wheels matching the image's torch "
        "(`rlhf-launch versions` lists OpenRLHF's pins)",
        _import_phase,
    ),
    _Rule(
        "import_error",
        IMPORT,
        _rx(r"\bImportError\b|Failed to import (?:from )?[\w.]+"),
        (b"rror", b"ailed to import"),
        False,
        "an import failed on the cluster: the image's packages do not match OpenRLHF's pins (`rlhf-launch versions`)",
        _import_phase,
    ),
    _Rule(
        "version_mismatch",
        IMPORT,
        _rx(r"TypeError: [\w.]+\(\) got an unexpected keyword argument"),
        (b"rror",),
        False,
        "two libraries disagree (a version mismatch, e.g. vLLM newer than this OpenRLHF supports): pin the versions "
        "`rlhf-launch versions` lists for `openrlhf.version`",
        _import_phase,
    ),
    # ------------------------------------------------------------ model_or_data
    _Rule(
        "hf_gated",
        DATA,
        _rx(r"GatedRepoError|gated repo|is gated\. You must|is restricted\. You must|\b40[13] Client Error"),
        (b"rror", b"gated", b"estricted"),
        False,
        "the model is gated or private: accept its licence on the Hub and put HF_TOKEN in `runtime_env.env_vars` "
        "(or the nodes' environment)",
        "model_load",
        exclude=_rx(r"(?i)wandb"),
    ),
    _Rule(
        "hf_missing",
        DATA,
        _rx(
            r"is not a local folder and is not a valid model identifier|RepositoryNotFoundError|Repository Not Found"
            r"|\b404 Client Error|does not appear to have a file named|Can't load (?:the )?(?:tokenizer|config|model)"
            r"|Incorrect path_or_model_id|We couldn't connect to 'https://huggingface\.co'"
        ),
        (b"rror",),
        False,
        "`models.actor` (or reward/critic) is neither a directory present on every node nor a Hub id reachable from them: "
        "use a path on shared storage",
        "model_load",
    ),
    _Rule(
        "chat_template",
        DATA,
        _rx(r"chat_template is not set|Cannot use chat template"),
        (b"rror",),
        False,
        "`data.apply_chat_template` is on but the tokenizer has no chat template: turn it off or use an instruct model",
        "startup",
    ),
    _Rule(
        "dataset_missing",
        DATA,
        _rx(
            r"DatasetNotFoundError|Couldn't find (?:a dataset script|any data file)|doesn't exist on the Hub"
            r"|FileNotFoundError: .*(?:[Dd]ataset|\.jsonl?\b|\.parquet\b|\.csv\b|\.arrow\b)"
        ),
        (b"rror",),
        False,
        "`data.prompt_dataset` cannot be loaded where the trainer runs: a path on shared storage or a Hub id",
        "startup",
    ),
    _Rule(
        "dataset_key",
        DATA,
        _rx(r"KeyError: ['\"](?P<key>[^'\"]*)['\"]|Column .* not in the dataset"),
        (b"rror",),
        False,
        lambda ctx: f"the dataset has no column '{ctx.match.group('key') or '?'}': set `data.input_key` to one it has",
        "startup",
        when=lambda ctx: "not in the dataset" in ctx.text or _dataset_context(ctx),
    ),
    # ------------------------------------------------------------ gpu_oom
    _Rule(
        "cuda_oom",
        GPU,
        _rx(
            r"CUDA out of memory|CUDA [Ee]rror: out of memory|torch\.(?:cuda\.)?OutOfMemoryError"
            r"|HIP out of memory|Cuda failure 'out of memory'"
        ),
        (b"memory",),
        False,
        _gpu_oom_hint,
        _gpu_oom_phase,
        deep=True,
    ),
    # ------------------------------------------------------------ weight_sync (causes)
    _Rule(
        "sync_ipc",
        SYNC,
        _rx(r"pidfd_open syscall needed to use IPC|pidfd_getfd|IPC for CUDA tensors"),
        (b"rror",),
        False,
        "CUDA-IPC weight sync (vLLM colocated) is blocked by the host: drop expandable_segments from PYTORCH_CUDA_ALLOC_CONF "
        "in `runtime_env.env_vars` (old kernels) or set kernel.yama.ptrace_scope=0 on the nodes",
        "weight_sync",
    ),
    _Rule(
        "sync_dtype",
        SYNC,
        _rx(r"mismatch dtype: src"),
        (b"rror",),
        False,
        "the trainer's and vLLM's weight dtypes differ (LoRA, fp32 weights): keep `deepspeed.bf16=true`",
        "weight_sync",
    ),
    # ------------------------------------------------------------ vllm (start-up)
    _Rule(
        "vllm_cache_blocks",
        VLLM,
        _rx(r"No available memory for the cache blocks"),
        (b"memory",),
        False,
        "vLLM has no room for its KV cache after the weights: raise `placement.vllm.gpu_memory_utilization` or "
        "`placement.vllm.tensor_parallel_size`",
        "model_load",
    ),
    _Rule(
        "vllm_kv_too_small",
        VLLM,
        _rx(r"larger than the (?:available KV cache memory|maximum number of tokens that can be stored in KV cache)"),
        (b"stored in KV cache", b"memory"),
        False,
        "the longest sequence (`data.prompt_max_len` + `data.generate_max_len`) does not fit vLLM's KV cache: raise "
        "`placement.vllm.gpu_memory_utilization` / `placement.vllm.tensor_parallel_size` or shorten them",
        "model_load",
    ),
    _Rule(
        "vllm_free_memory",
        VLLM,
        _rx(r"Free memory on device .* is less than desired GPU memory utilization"),
        (b"memory",),
        False,
        "another process holds GPU memory (colocated models, a previous attempt not gone): lower `placement.vllm.gpu_memory_utilization`",
        "model_load",
    ),
    _Rule(
        "vllm_init",
        VLLM,
        _rx(r"Engine core initialization failed|EngineCore failed to start|Engine process failed to start"),
        (b"ailed",),
        False,
        "a vLLM engine failed to start: its root cause is in the EngineCore lines above the evidence",
        "model_load",
    ),
    # ------------------------------------------------------------ reward_remote (definite)
    _Rule(
        "reward_func_missing",
        REWARD,
        _rx(r"has no attribute 'reward_func'|Reward function is not implemented"),
        (b"rror",),
        False,
        "the reward-function file (`models.reward_func`) must define `reward_func(queries, prompts, labels)`",
        "model_load",
    ),
    # ------------------------------------------------------------ host_oom (Ray's memory monitor, the kernel)
    _Rule(
        "host_oom_monitor",
        HOST,
        _rx(
            r"Task was killed due to the node running low on memory|killed due to memory pressure \(OOM\)"
            r"|how to address the out of memory issue|Out of memory: Killed process|Memory cgroup out of memory"
            r"|invoked oom-killer|\[ray state\].*\b(?:OUT_OF_MEMORY|oom_context)\b"
        ),
        (b"memory", b"oom-kill", b"[ray state]"),
        _host_oom_retriable,
        _host_oom_hint,
        deep=True,
    ),
    # ------------------------------------------------------------ node_lost
    _Rule(
        "gcs_unreachable_at_start",
        NODE,
        _rx(r"Failed to connect to GCS at address :\d+|Failed to get cluster ID from GCS server"),
        (b"ailed",),
        False,
        "the head node is not reachable at start-up: check `cluster.address` and that the head is up",
        "startup",
    ),
    _Rule(
        "node_died",
        NODE,
        _rx(
            r"marked dead because the detector has missed too many heartbeats"
            r"|(?:its|the actor's|Owner's) node (?:has died|has crashed|was preempted)"
            r"|node it was running on is dead|mistakenly been marked as dead by the GCS|NodeDiedError|Health check failed for node"
            r"|raylet exited immediately because|GCS may have been killed|Failed to connect to GCS within \d+ seconds"
            r"|\[ray state\].*\bNODE_DIED\b"
        ),
        (b"dead", b"died", b"ailed", b"rror", b"ERROR", b"[ray state]"),
        True,
        "a node (or its raylet) died: the run resumes once the cluster has the GPUs again (`rlhf-launch status` shows the nodes)",
        deep=True,
    ),
    # ------------------------------------------------------------ weight_sync (symptoms of a failed update)
    _Rule(
        "sync_rpc",
        SYNC,
        _rx(
            r"Error executing method '?update_weight|Invocation of collective_rpc method failed"
            r"|ray::(?:\w*LLMRayActor|RolloutRayActor)\.(?:init_process_group|update_weight\w*)\(\)"
        ),
        (b"rror", b"ailed"),
        _weight_sync_retriable,
        lambda ctx: (
            "a weight update to vLLM timed out: resumable"
            if _weight_sync_retriable(ctx)
            else "updating vLLM's weights failed: the installed vLLM may not match OpenRLHF (`rlhf-launch versions`); "
            "cross-node sync needs NCCL_SOCKET_IFNAME in `runtime_env.env_vars`"
        ),
        lambda ctx: "model_load" if "init_process_group" in ctx.text else (ctx.phase or "weight_sync"),
        deep=True,
    ),
    _Rule(
        "sync_rendezvous",
        SYNC,
        _rx(r"client socket has timed out after \d+s while trying to connect to"),
        (b"timed out",),
        False,
        "vLLM workers cannot reach the trainer's weight-update address: set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to a "
        "routable interface in `runtime_env.env_vars`",
        "model_load",  # the update group's rendezvous happens once, when the models are set up
        when=_vllm_line,
    ),
    # ------------------------------------------------------------ vllm (crash)
    _Rule(
        "vllm_crash",
        VLLM,
        _rx(
            r"EngineDeadError|Engine loop has died|EngineCore encountered an issue|Got fatal signal from worker processes"
            r"|\bEngineCore\w* (?:died|dead)"
        ),
        (b"rror", b"died", b"atal"),
        _mid_run,
        _vllm_crash_hint,
        deep=True,
    ),
    # ------------------------------------------------------------ reward_remote (server, reward code)
    _Rule(
        "reward_request",
        REWARD,
        _rx(r"Request error, please check|Request error for \d+ times|Failed to fetch reward from remote RM"),
        (b"rror", b"ailed"),
        True,
        "the reward server at `models.reward_remote_url` did not answer (it must be reachable from every node): "
        "start it or fix the address, then resume",
        _reward_phase,
    ),
    _Rule(
        "reward_traceback",
        REWARD,
        _rx(r"\b\w*reward_f(?:n|unc)\w*\("),
        (b"reward_f",),
        False,
        "the custom reward function raised: fix the file `models.reward_func` names",
        when=_after_frame,
    ),
    # ------------------------------------------------------------ unknown, with evidence
    _Rule(
        "submit_agent",
        UNKNOWN,
        _rx(r"No available agent to submit job"),
        (b"rror",),
        True,
        "the dashboard's job agent was not ready: submit again",
        "startup",
    ),
    _Rule(
        "cuda_fault",
        UNKNOWN,
        _rx(
            r"CUDA error: (?!out of memory)|device-side assert|an illegal memory access|DeferredCudaCallError"
            r"|Assertion `.*` failed\.|Fatal Python error|Segmentation fault"
            r"|\*\*\* SIG(?:SEGV|ABRT|BUS|FPE)|received signal SIG(?:SEGV|ABRT|BUS)"
        ),
        (b"rror", b"ailed", b"atal", b"egmentation", b"SIG"),
        False,
        "a CUDA fault or crash outside the known classes: resubmitting will likely repeat it; see the evidence",
        _unknown_fault_phase,
        deep=True,
    ),
    # ------------------------------------------------------------ host_oom (weak: Ray's generic worker death)
    _Rule(
        "worker_sigkill",
        HOST,
        _rx(r"Worker exit type: SYSTEM_ERROR|killed by SIGKILL|died with <Signals\.SIGKILL|exit code 137\b|exitcode: -9\b"),
        (b"ERROR", b"SIG", b"code 137", b"exitcode: -9"),
        _host_oom_retriable,
        lambda ctx: "a worker was SIGKILLed (Ray's SYSTEM_ERROR: most often the kernel OOM killer). " + _host_oom_hint(ctx),
        deep=True,
    ),
    # ------------------------------------------------------------ nccl
    _Rule(
        "nccl_error",
        NCCL,
        _rx(
            r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out|NCCL error"
            r"|nccl(?:Remote|Internal|System|UnhandledCuda|InvalidUsage)Error|DistBackendError|NCCL communicator was aborted"
        ),
        (b"NCCL", b"nccl", b"rror"),
        _not_startup,
        _nccl_hint,
        _nccl_phase,
        exclude=_rx(r"destroy_process_group\(\) was not called"),
    ),
    _Rule(
        "c10d_timeout",
        NCCL,
        _rx(r"client socket has timed out after \d+s while trying to connect to|TCPStore\b.*(?:timed out|Timeout|reset)"),
        (b"timed out", b"TCPStore"),
        _not_startup,
        _nccl_hint,
    ),
    _Rule(
        "nccl_warn",
        NCCL,
        # a failing call (`init.cc:1815 -> 5`) or a failure word; not the harmless plugin notices
        _rx(
            r"(?m)NCCL WARN (?!NET/Plugin|.*Could not find)"
            r"(?:.*-> \d+[ \t]*$|.*(?:[Ff]ail|[Ee]rror|[Tt]ime(?:d )?out|[Aa]bort|[Uu]nhandled))"
        ),
        (b"NCCL",),
        _not_startup,
        _nccl_hint,
        _nccl_phase,
    ),
)


def _empty_match() -> re.Match[str]:
    match = re.match("", "")
    assert match is not None
    return match


FALLBACK_EXCEPTION = _rx(r"\b(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?:\([\w.]*\))?: \S|Job '[\w-]+' failed|\bTraceback \(most recent")

# Where a failure happened, from its traceback: function / Ray method names -> phase.
FRAME_PHASES: dict[str, str] = {
    **dict.fromkeys(
        ("make_experience", "make_experience_list", "make_experience_batch", "get_rewards", "compute_reward"), "make_experience"
    ),
    **dict.fromkeys(
        ("generate", "generate_samples", "_generate_vllm", "add_requests", "get_responses", "_run_engine", "_random_sample"), "generate"
    ),
    **dict.fromkeys(("fit", "ppo_train", "training_step", "training_step_actor", "training_step_critic"), "train"),
    **dict.fromkeys(
        ("update_weight", "update_weight_cuda_ipc", "broadcast_to_vllm", "_broadcast_to_vllm", "sync_model_from_actor", "_broadcast_param"),
        "weight_sync",
    ),
    **dict.fromkeys(
        ("save_model", "save_checkpoint", "save_pretrained", "_save_checkpoint", "save_logs_and_checkpoints", "save_16bit_model"), "save"
    ),
    **dict.fromkeys(
        (
            "from_pretrained",
            "init_model_from_pretrained",
            "async_init_model_from_pretrained",
            "actor_rollout_init_model",
            "init_model",
            "cached_files",
            "_load_pretrained_model",
        ),
        "model_load",
    ),
    **dict.fromkeys(("preprocess_data", "prepare_datasets", "blending_datasets"), "startup"),
}
FRAME_NAMES = _rx(r'File "(?P<file>[^"]+)", line \d+, in (?P<func>[\w<>]+)|ray::(?P<cls>\w+)\.(?P<method>\w+)\(\)')

# Progress lines: the last one before the decisive line tells the phase.
MARKERS: tuple[tuple[bytes, str], ...] = (
    (b"Loading checkpoint shards", "model_load"),
    (b"creating LLM with bundle_indices", "model_load"),
    (b"init_process_group: master_address", "model_load"),
    (b"Loading model weights", "model_load"),
    (b"Memory profiling", "model_load"),
    (b"# GPU blocks", "model_load"),
    (b"LLM engine (v", "model_load"),
    (b"Loading the checkpoint:", "model_load"),
    (b"Episode [", "generate"),
    (b"Processed prompts:", "generate"),
    (b"Generate samples:", "generate"),
    (b"Starting experience making", "make_experience"),
    (b"make_experience:", "make_experience"),
    (b"Compute log probs", "make_experience"),
    (b"Experience making completed", "train"),
    (b"Train epoch [", "train"),
    (b"update weight:", "weight_sync"),
    (b"is about to be saved", "save"),
    (b"Saving model checkpoint", "save"),
)


def _minimal(anchors: Sequence[bytes]) -> tuple[bytes, ...]:
    """Drop anchors that contain another anchor (the shorter one finds their lines too)."""
    unique = sorted(set(anchors), key=len)
    kept: list[bytes] = []
    for anchor in unique:
        if not any(k in anchor for k in kept):
            kept.append(anchor)
    return tuple(kept)


FALLBACK_ANCHORS = (b"rror", b"xception", b"failed", b"Traceback")
ALL_ANCHORS = _minimal([a for rule in RULES for a in rule.anchors] + list(FALLBACK_ANCHORS) + [b"[ray state]"])
DEEP_RULES = tuple(rule for rule in RULES if rule.deep)


# ---------------------------------------------------------------- classification


def _frame_phase(ctx: _Ctx) -> str | None:
    """The outermost call of the failing traceback that names a phase."""
    before = ctx.before()
    start = before.rfind("Traceback (most recent call last)")
    text = (before[start:] if start != -1 else before[-4096:]) + "\n" + ctx.text + "\n" + ctx.after()[:2048]
    for match in FRAME_NAMES.finditer(text):
        if match.group("method"):
            cls, name = match.group("cls"), match.group("method")
            if cls.startswith("PPOTrainer") or cls in ("TaskRunner", "Runner"):
                if name == "__init__" and cls.startswith("PPOTrainer"):
                    return "startup"
                continue
            if name == "__init__":
                return "model_load"
        else:
            path, name = match.group("file"), match.group("func")
            if "train_ppo_ray.py" in path or (name == "fit" and re.search(r"ppo_trainer\w*\.py$", path)):
                continue  # the driver's train() and PPOTrainer.fit() span every phase
            if path.endswith("torch/nn/modules/module.py") and name in ("convert", "_apply"):
                return "model_load"  # Module.to()/.cuda(): moving a model onto the GPU
        phase = FRAME_PHASES.get(name)
        if phase:
            return phase
    if re.search(r"ExperienceMaker|make_experience", ctx.text):
        return "make_experience"
    if "vllm/model_executor" in text or "vllm/v1/sample" in text:
        return "generate"
    if re.search(r"\b(?:sync_model_from_actor|update_weight\w*|_?broadcast_to_vllm)\b", text):
        return "weight_sync"
    return None


def _actor_phase(ctx: _Ctx) -> str | None:
    """Ref and reward models only run in experience making."""
    return "make_experience" if re.match(r"\s*\((?:ReferenceModel|RewardModel)\w* pid=", ctx.text) else None


def _marker_phase(source: _Source, offset: int, boundary: int) -> str | None:
    lo = max(boundary, offset - MARKER_BACK, 0)
    data = source.read(lo, offset)
    best, phase = -1, None
    for needle, name in MARKERS:
        i = data.rfind(needle)
        if i > best:
            best, phase = i, name
    return phase


def _infer_phase(ctx: _Ctx) -> str | None:
    return _frame_phase(ctx) or _marker_phase(ctx.source, ctx.line.offset, ctx.boundary) or _actor_phase(ctx)


def _decide(rule: _Rule, ctx: _Ctx) -> tuple[bool, str, str | None]:
    ctx.phase = _infer_phase(ctx) if not isinstance(rule.phase, str) else rule.phase
    if callable(rule.phase):
        ctx.phase = rule.phase(ctx)
    retriable = rule.retriable(ctx) if callable(rule.retriable) else rule.retriable
    hint = rule.hint(ctx) if callable(rule.hint) else rule.hint
    return retriable, hint, ctx.phase


@dataclass
class _Pool:
    """Candidate lines; a rule's regex runs over the lines its anchors found, joined."""

    lines: list[_Line] = field(default_factory=list)
    hits: dict[bytes, list[int]] | None = None  # anchor -> line indices; None: every line
    _joined: dict[tuple[bytes, ...], tuple[str, list[int], list[int]]] = field(default_factory=dict)

    def _text(self, anchors: tuple[bytes, ...]) -> tuple[str, list[int], list[int]]:
        if anchors not in self._joined:
            if self.hits is None:
                chosen = list(range(len(self.lines)))
            else:
                covering = {k for a in anchors for k in self.hits if k in a}
                chosen = sorted({n for k in covering for n in self.hits[k]})
            starts, pos = [], 0
            for n in chosen:
                starts.append(pos)
                pos += len(self.lines[n].text) + 1
            self._joined[anchors] = ("\n".join(self.lines[n].text for n in chosen), starts, chosen)
        return self._joined[anchors]

    def matches(self, pattern: re.Pattern[str], anchors: tuple[bytes, ...]) -> Iterator[tuple[_Line, int]]:
        joined, starts, chosen = self._text(anchors)
        for match in pattern.finditer(joined):
            n = chosen[bisect.bisect_right(starts, match.start()) - 1]
            yield self.lines[n], n


def _first_match(rule: _Rule, pools: Sequence[_Pool], source: _Source, step: int | None, boundary: int) -> _Ctx | None:
    for pool in pools:
        seen: set[int] = set()
        for line, index in pool.matches(rule.pattern, rule.anchors):
            if index in seen:
                continue
            seen.add(index)
            if rule.exclude is not None and rule.exclude.search(line.text):
                continue
            match = rule.pattern.search(line.text)
            if match is None:
                continue
            ctx = _Ctx(source, line, match, step, boundary)
            if rule.when is None or rule.when(ctx):
                return ctx
    return None


def _clip(line: str) -> str:
    line = line.rstrip("\r\n")
    if "\r" in line:  # a tqdm line: keep the segment that matters
        line = line.rsplit("\r", 1)[-1] or line
    line = line.strip()
    return line if len(line) <= EVIDENCE_WIDTH else line[: EVIDENCE_WIDTH - 3] + "..."


def _evidence(first: _Line, more: Sequence[_Line], environ: Mapping[str, str] | None) -> list[str]:
    out: list[str] = []
    for line in (first, *more):
        text = redact_line(_clip(line.text), environ)
        if text and text not in out:
            out.append(text)
        if len(out) >= EVIDENCE_LINES:
            break
    return out


def _state_lines(
    job_message: str, dead_actors: Sequence[Mapping[str, Any]], pending_groups: Sequence[Mapping[str, Any]], exit_code: int | None
) -> list[str]:
    """Ray's view as log-like lines, classified by the same rules (appended after the log)."""
    lines = [line for line in job_message.splitlines() if line.strip()]
    for actor in dead_actors:
        who = f"actor {actor.get('class_name') or actor.get('name') or '?'} {str(actor.get('actor_id') or '')[:12]}".rstrip()
        node = str(actor.get("node_id") or "")[:12]
        head = f"[ray state] {who} {actor.get('state') or 'DEAD'}" + (f" on node {node}" if node else "")
        for text in _death_texts(actor.get("death_cause")) or _death_texts(actor.get("error_message") or actor.get("exit_detail")):
            for part in text.splitlines() or [""]:
                if part.strip():
                    lines.append(f"{head}: {part.strip()}")
    for group in pending_groups:
        if str(group.get("state", "PENDING")).upper() != "PENDING":
            continue
        bundles = group.get("bundles") or []
        lines.append(
            f"[ray state] placement group {str(group.get('placement_group_id') or group.get('name') or '')[:12]} PENDING: "
            f"{len(bundles)} bundles {_bundle_summary(bundles)}".rstrip()
        )
    if exit_code is not None and exit_code in (137, -9):
        lines.append(f"[ray state] driver exit code 137 (SIGKILL), reported {exit_code}")
    return lines


def _death_texts(cause: Any) -> list[str]:
    """Ray's ActorDeathCause (state API dict, snake or camel case) as readable text."""
    if cause is None or cause == "":
        return []
    if not isinstance(cause, Mapping):
        return [str(cause)]
    out: list[str] = []
    for key, value in cause.items():
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", str(key)).lower()
        if isinstance(value, Mapping):
            message = str(value.get("error_message") or value.get("errorMessage") or value.get("formatted_exception_string") or "")
            message = message or str(value.get("formattedExceptionString") or "")
            reason = str(value.get("reason") or "")
            info = value.get("node_death_info") or value.get("nodeDeathInfo") or {}
            detail = str(info.get("reason_message") or info.get("reasonMessage") or "") if isinstance(info, Mapping) else ""
            label = {"oom_context": "OUT_OF_MEMORY (oom_context)", "runtime_env_failed_context": "runtime env failed to be created"}.get(
                name, name
            )
            first = f"{label}" + (f" reason {reason}" if reason else "") + (f" ({detail})" if detail else "")
            out.append(first + (f": {message}" if message else ""))
        elif value not in (None, ""):
            out.append(f"{name}: {value}")
    return out


def _bundle_summary(bundles: Sequence[Any]) -> str:
    totals: dict[str, float] = {}
    for bundle in bundles:
        resources = bundle.get("unit_resources", bundle) if isinstance(bundle, Mapping) else {}
        for name, amount in (resources or {}).items():
            if isinstance(amount, (int, float)):
                totals[str(name)] = totals.get(str(name), 0.0) + float(amount)
    return ", ".join(f"{name} {amount:g}" for name, amount in sorted(totals.items()))


def _find_step(source: _Source, end: int, back: int) -> tuple[int | None, int]:
    """The last global step before `end` (looking back at most `back` bytes), and where the
    failure region begins (the end of that step line; 0 when none was found)."""
    floor = max(0, end - back)
    pos = end
    while pos > floor:
        lo = max(floor, pos - CHUNK)
        found = _last_step_in(source, lo, pos, end)
        if found is not None:
            return found
        pos = lo
    return None, 0


STEP_NEEDLES = ((b"Global step ", GLOBAL_STEP), (b"checkpoint_states: ", CHECKPOINT_STATES))


def _last_step_in(source: _Source, lo: int, hi: int, end: int) -> tuple[int, int] | None:
    """The last `Global step N: {...}` (or `checkpoint_states: {...}`) line starting in
    [lo, hi): N and the offset just past the line."""
    chunk = source.read(lo, min(end, hi + 64))  # a little overlap: a needle may straddle `hi`
    best: tuple[int, int] | None = None
    for needle, pattern in STEP_NEEDLES:
        stop = hi - lo
        while True:
            i = chunk.rfind(needle, 0, stop + len(needle) - 1)
            if i == -1 or i >= stop or (best is not None and lo + i < best[1]):
                break
            line, line_end = _line_at(source, chunk, lo, i, end)
            match = pattern.search(line)
            step: int | None = None
            if match and pattern is GLOBAL_STEP:
                step = int(match.group(1))
            elif match:
                found = re.search(r"'global_step': (\d+)", line)
                step = int(found.group(1)) if found else None
            if step is not None:
                if best is None or line_end > best[1]:
                    best = (step, line_end)
                break
            stop = i
    return best


def _line_at(source: _Source, chunk: bytes, base: int, i: int, end: int) -> tuple[str, int]:
    """The whole line around chunk[i] (read further from the source where it leaves the
    chunk), and the source offset just past it."""
    start = chunk.rfind(b"\n", 0, i) + 1
    if start == 0 and base > 0:
        before = source.read(max(0, base - (64 << 10)), base)
        head = before[before.rfind(b"\n") + 1 :]
    else:
        head = b""
    stop = chunk.find(b"\n", i)
    if stop == -1:
        rest = source.read(base + len(chunk), min(end, base + len(chunk) + (64 << 10)))
        cut = rest.find(b"\n")
        tail = rest if cut == -1 else rest[:cut]
        text = head + chunk[start:] + tail
        line_end = base + len(chunk) + len(tail)
    else:
        text = head + chunk[start:stop]
        line_end = base + stop
    return text.decode("utf-8", "replace"), line_end


def _classify(
    source: _Source,
    *,
    pending: bool,
    environ: Mapping[str, str] | None,
    every_line: bool = False,
) -> Diagnosis:
    log_end = source.log_size
    step, boundary = _find_step(source, log_end, MAX_BACK)
    boundary = max(boundary, log_end - MAX_BACK)
    tail_start = max(0, log_end - TAIL, boundary)
    if tail_start > boundary:  # begin at the start of the line the window's edge cuts
        before = source.read(max(boundary, tail_start - (64 << 10)), tail_start)
        cut = before.rfind(b"\n")
        if cut != -1 or tail_start - len(before) == boundary:
            tail_start -= len(before) - cut - 1
    tail_data = source.read(tail_start, source.size)
    tail = _pool(tail_data, tail_start, ALL_ANCHORS, every_line)
    found = _first_rule(RULES, [tail], source, step, boundary)
    if boundary < tail_start:
        # Before the tail: the first chunk after the last step holding a root cause that
        # leaves survivors hanging (read forward: the cause comes first, its aftermath after).
        outranking = tuple(r for r in DEEP_RULES if found is None or RULES.index(r) < RULES.index(found[0]))
        pos = boundary
        while outranking and pos < tail_start:
            hi = min(tail_start, pos + CHUNK)
            data = source.read(pos, hi)
            while hi < tail_start and b"\n" not in data:  # a line longer than a chunk
                hi = min(tail_start, hi + CHUNK)
                data = source.read(pos, hi)
            if hi < tail_start:
                data = data[: data.rfind(b"\n") + 1]
            deep = _first_rule(outranking, [_pool(data, pos, DEEP_ANCHORS, every_line)], source, step, boundary)
            if deep is not None:
                found = deep
                break
            pos += len(data)
    if found is None:
        return _unknown(source, tail, step, boundary, pending=pending, environ=environ)
    rule, ctx = found
    retriable, hint, phase = _decide(rule, ctx)
    more = [line for line, _ in tail.matches(FALLBACK_EXCEPTION, FALLBACK_ANCHORS) if "Traceback (most recent" not in line.text][-2:]
    return Diagnosis(rule.cls, retriable, phase, step, _evidence(ctx.line, more, environ), hint, rule.name)


def _first_rule(
    rules: Sequence[_Rule], pools: Sequence[_Pool], source: _Source, step: int | None, boundary: int
) -> tuple[_Rule, _Ctx] | None:
    for rule in rules:
        ctx = _first_match(rule, pools, source, step, boundary)
        if ctx is not None:
            return rule, ctx
    return None


def _unknown(
    source: _Source, tail: _Pool, step: int | None, boundary: int, *, pending: bool, environ: Mapping[str, str] | None
) -> Diagnosis:
    exceptions = [line for line, _ in tail.matches(FALLBACK_EXCEPTION, FALLBACK_ANCHORS)]
    last = [line for line in exceptions if "Traceback (most recent" not in line.text][-3:]
    states = [line for line in tail.lines if line.text.startswith("[ray state] placement group")]
    if last:
        phase = _infer_phase(_Ctx(source, last[-1], _empty_match(), step, boundary))
    else:
        phase = _marker_phase(source, source.log_size, boundary)
    if pending and step is None and not last:
        phase = "placement"
        hint = "placement groups are still pending: the cluster lacks the GPUs/CPUs the plan needs; free them or shrink `placement.*`"
    else:
        hint = "no known failure class matched: read the evidence (`rlhf-launch logs RUN`)"
    near = "\n".join(line.text for line in last)
    retriable = bool(re.search(r"(?i)try again later|temporarily unavailable", near))
    evidence = _evidence(last[-1], last[:-1] + states, environ) if last else _evidence(states[0], states[1:], environ) if states else []
    return Diagnosis(UNKNOWN, retriable, phase, step, evidence, hint, "fallback")


def classify(
    log: str,
    *,
    job_message: str = "",
    dead_actors: Sequence[Mapping[str, Any]] = (),
    pending_groups: Sequence[Mapping[str, Any]] = (),
    exit_code: int | None = None,
    environ: Mapping[str, str] | None = None,
    _every_line: bool = False,
) -> Diagnosis:
    """Diagnose a driver log held in memory (the same reading as `diagnose_file`), with
    Ray's job message, dead actors (state API rows: class_name, state, death_cause,
    node_id) and pending placement groups (rows with state and bundles) when known."""
    extra = _state_lines(job_message, dead_actors, pending_groups, exit_code)
    data = log.encode("utf-8", "replace")
    suffix = ("\n" if data and not data.endswith(b"\n") else "") + "\n".join(extra)
    source = _Source(data=data, extra=suffix.encode("utf-8", "replace") if extra else b"")
    pending = any(str(g.get("state", "PENDING")).upper() == "PENDING" for g in pending_groups)
    return _classify(source, pending=pending, environ=environ, every_line=_every_line)


def diagnose_file(
    path: str | Path,
    *,
    job_message: str = "",
    dead_actors: Sequence[Mapping[str, Any]] = (),
    pending_groups: Sequence[Mapping[str, Any]] = (),
    exit_code: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Diagnosis:
    """Diagnose a driver log file of any size, reading from its end (see the module
    docstring): memory stays at a few 8 MiB chunks whatever the size."""
    extra = _state_lines(job_message, dead_actors, pending_groups, exit_code)
    pending = any(str(g.get("state", "PENDING")).upper() == "PENDING" for g in pending_groups)
    fd = os.open(str(path), os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        suffix = b""
        if extra:
            last = os.pread(fd, 1, size - 1) if size else b"\n"
            suffix = (b"" if last == b"\n" else b"\n") + "\n".join(extra).encode("utf-8", "replace")
        return _classify(_Source(fd=fd, size=size, extra=suffix), pending=pending, environ=environ)
    finally:
        os.close(fd)
