"""The context of a candidate decisive line: the lines around it (its traceback), the last
step, and the phase it happened in (from the traceback's frames, else the last progress
line before it). What rule predicates, hints and phase functions read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from rlhf_launch.diagnose import reader
from rlhf_launch.diagnose.reader import Line, Source

__all__ = ["FRAME_PHASES", "MARKERS", "Ctx", "infer_phase"]


@dataclass
class Ctx:
    source: Source
    line: Line
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
            self._before = self.source.text(max(0, self.line.offset - reader.CONTEXT_BEFORE), self.line.offset)
        return self._before

    def after(self) -> str:
        if self._after is None:
            size = self.line.size if self.line.size >= 0 else len(self.line.text.encode("utf-8", "replace"))
            end = self.line.offset + size
            self._after = self.source.text(end, end + reader.CONTEXT_AFTER)
        return self._after

    def near(self) -> str:
        return self.before()[-2048:] + "\n" + self.text + "\n" + self.after()[:2048]

    def previous_lines(self, n: int) -> list[str]:
        return self.before().splitlines()[-n:]


EXCEPTION_HEAD = re.compile(
    r"(?:^|[\s:(\]|>])(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?:\([\w.]*\))?: (?P<msg>.*)"
)


def exception_of(line: str) -> str:
    """`Type: message` of an exception line (the message shortened), or ""."""
    match = EXCEPTION_HEAD.search(line)
    if not match:
        return ""
    message = match.group("msg").strip()
    message = message if len(message) <= 200 else message[:197] + "..."
    return f"{match.group('type')}: {message}" if message else match.group("type")


def empty_match() -> re.Match[str]:
    match = re.match("", "")
    assert match is not None
    return match


# Where a failure happened, from its traceback: function / Ray method names -> phase.
FRAME_PHASES: dict[str, str] = {
    **dict.fromkeys(
        (
            "make_experience",
            "make_experience_list",
            "make_experience_batch",
            "get_rewards",
            "compute_reward",
            # verl's and TRL's names for the same work
            "compute_log_prob",
            "compute_ref_log_prob",
            "compute_values",
            "compute_rm_score",
            "_calculate_rewards",
        ),
        "make_experience",
    ),
    **dict.fromkeys(
        (
            "generate",
            "generate_samples",
            "_generate_vllm",
            "add_requests",
            "get_responses",
            "_run_engine",
            "_random_sample",
            "wake_up",  # vLLM's sleep mode: woken before each rollout
            "generate_sequences",  # verl's rollout entry
            "get_output",  # vLLM's engine client fetching outputs: only while generating
            "get_output_async",
            "_generate_and_score_completions",  # TRL's GRPO rollout
        ),
        "generate",
    ),
    **dict.fromkeys(
        ("fit", "ppo_train", "training_step", "training_step_actor", "training_step_critic", "update_actor", "update_critic"), "train"
    ),
    **dict.fromkeys(
        (
            "update_weight",
            "update_weight_cuda_ipc",
            "broadcast_to_vllm",
            "_broadcast_to_vllm",
            "sync_model_from_actor",
            "_broadcast_param",
            # other trainers' and engines' weight updates (verl, TRL, SGLang, NeMo-RL)
            "update_weights",
            "sync_model_weights",
            "_move_model_to_vllm",
            "update_named_param",
            "update_weights_from_tensor",
            "update_weights_from_distributed",
            "refit_policy_generation",
        ),
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
            # wrapping a model for distributed training (DDP, DeepSpeed's engine): before any step
            "_verify_param_shape_across_processes",
            "_sync_module_states",
            "_sync_params_and_buffers",
            "_broadcast_model",
            "_configure_distributed_model",
        ),
        "model_load",
    ),
    **dict.fromkeys(("preprocess_data", "prepare_datasets", "blending_datasets"), "startup"),
}
FRAME_NAMES = re.compile(r'File "(?P<file>[^"]+)", line \d+, in (?P<func>[\w<>]+)|ray::(?P<cls>\w+)\.(?P<method>\w+)\(\)')

# Progress lines: the last one before the decisive line tells the phase.
MARKERS: tuple[tuple[bytes, str], ...] = (
    # launchers, Ray's driver and DeepSpeed's engine set-up: printed once, before any model is trained
    (b"Unable to find hostfile", "startup"),
    (b"Connecting to existing Ray cluster", "startup"),
    (b"Started a local Ray instance", "startup"),
    # a rollout engine (vLLM, SGLang) loading its weights and capturing CUDA graphs at start
    (b"Loading safetensors checkpoint shards", "model_load"),
    (b"Capturing batches", "model_load"),
    (b"Capturing CUDA graph", "model_load"),
    (b"Capturing cudagraphs", "model_load"),
    (b"Setting ds_accelerator to", "startup"),
    (b"Parameter Offload: Total persistent parameters", "model_load"),
    (b"After creating fp32 partitions", "model_load"),
    (b"Before initializing optimizer states", "model_load"),
    (b"Loading checkpoint shards", "model_load"),
    (b"creating LLM with bundle_indices", "model_load"),
    (b"init_process_group: master_address", "model_load"),
    (b"Loading model weights", "model_load"),
    (b"Model loading took", "model_load"),
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
    # a trainer setting up or using its weight-update group with a vLLM server (TRL's, ms-swift's endpoints)
    (b"/init_communicator", "weight_sync"),
    (b"/update_named_param", "weight_sync"),
    (b"is about to be saved", "save"),
    (b"Saving model checkpoint", "save"),
)


def frame_phase(ctx: Ctx) -> str | None:
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
            if name == "__init__" and re.search(r"/vllm/(?:v1/)?(?:engine|executor|worker)/", path):
                return "model_load"  # a vLLM engine, executor or worker being built
        phase = FRAME_PHASES.get(name) or _fused_phase(name)
        if phase:
            return phase
    if re.search(r"ExperienceMaker|make_experience", ctx.text):
        return "make_experience"
    if "vllm/model_executor" in text or "vllm/v1/sample" in text:
        return "generate"
    if re.search(r"\b(?:sync_model_from_actor|update_weight\w*|_?broadcast_to_vllm)\b", text):
        return "weight_sync"
    return None


def _fused_phase(name: str) -> str | None:
    """The phase of a worker method that prefixes a known name with its role (verl's fused
    workers: `actor_rollout_generate_sequences`, `ref_compute_ref_log_prob`), else None."""
    parts = name.split("_")
    for i in range(1, len(parts)):
        phase = FRAME_PHASES.get("_".join(parts[i:]))
        if phase:
            return phase
    return None


def actor_phase(ctx: Ctx) -> str | None:
    """Ref and reward models only run in experience making."""
    return "make_experience" if re.match(r"\s*\((?:ReferenceModel|RewardModel)\w* pid=", ctx.text) else None


def marker_phase(source: Source, offset: int, boundary: int) -> str | None:
    return reader.marker_before(source, offset, boundary, MARKERS)


# Ray's session directory names when the cluster's session began (`session_2025-04-21_10-42-30_288003_...`);
# the lines of vLLM, DeepSpeed, Ray and Python's logging carry their own time (`04-21 10:43:16`,
# `[2025-04-21 10:43:16,408]`). A failure a few minutes after the session began, before any step,
# is start-up: no model of any size is loaded, generated from and trained on in that time.
SESSION_START = re.compile(r"session_(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)_(?P<h>\d\d)-(?P<mi>\d\d)-(?P<s>\d\d)_")
LINE_TIME = re.compile(r"(?<![\d-])(?:(?P<y>\d{4})-)?(?P<mo>\d\d)-(?P<d>\d\d)[ T](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\b")
STARTUP_SECONDS = 240


def _seconds(m: re.Match[str], year: int) -> float | None:
    try:
        mo, d, h, mi, s = (int(m.group(k)) for k in ("mo", "d", "h", "mi", "s"))
        when = datetime(int(m.group("y") or year), mo, d, h, mi, s)
    except ValueError:
        return None
    return when.timestamp()


def session_phase(ctx: Ctx) -> str | None:
    """`startup` when the decisive line's own time is within STARTUP_SECONDS of the Ray session's
    start named in the log around it, and no step was logged; else None."""
    if ctx.step is not None:
        return None
    around = ctx.before()[-8192:] + "\n" + ctx.text + "\n" + ctx.after()[:4096]
    session = SESSION_START.search(around)
    stamp = LINE_TIME.search(ctx.text)
    if session is None or stamp is None:
        return None
    year = int(session.group("y"))
    start, at = _seconds(session, year), _seconds(stamp, year)
    if start is None or at is None:
        return None
    return "startup" if 0 <= at - start <= STARTUP_SECONDS else None


def infer_phase(ctx: Ctx) -> str | None:
    return frame_phase(ctx) or marker_phase(ctx.source, ctx.line.offset, ctx.boundary) or actor_phase(ctx) or session_phase(ctx)
