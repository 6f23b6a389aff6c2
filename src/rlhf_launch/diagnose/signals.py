"""Signals that survive rewording, for the decision on a failure no rule names (or names only
as `unknown`): which component failed, the decisive exception's type and where it was raised,
and whether the run had made progress before it. Pure: text in, a `Signals` out.

A rule matches a message; these read the shape around it, which a new version or a new
wording of the same failure keeps: the Ray actor or vLLM process a line is prefixed with
(`(LLMRayActor pid=...)`, `ray::ActorModelRayActor.fit()`), the packages of the traceback's
frames (`.../vllm/...`, `.../deepspeed/...`), vLLM's own log format, the exception's type, and
the function it was raised in.

Components: `vllm` (an engine: holds no training state, a new one starts from the weights),
`reward` (a reward model or server, or reward code: no training state either), `trainer` (an
actor/critic rank, DeepSpeed, torch.distributed: the state a checkpoint restores), `data` (the
data loader and datasets), `cluster` (Ray itself: raylet, GCS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["COMPONENTS", "STATELESS", "Signals", "component_of", "raised_at", "read_signals"]

COMPONENTS = ("vllm", "reward", "trainer", "data", "cluster")
STATELESS = frozenset({"vllm", "reward"})

# A process prefix: Ray's `(Name pid=1, ip=...)`, vLLM's `(EngineCore_DP0 pid=1)`, `(VllmWorker TP0 pid=1)`.
PREFIX = re.compile(r"\((?P<name>[A-Za-z_][\w.<>-]*)(?: (?:TP|rank=?)\d+)? pid=\d+")
RAY_TASK = re.compile(r"ray::(?P<name>[A-Za-z_]\w*)(?:\.(?P<method>\w+))?\(")
FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>[\w<>.]+)')
IPY_FRAME = re.compile(r"^(?P<path>[~/][^\s]+\.py) in (?P<func>\w+)\(")  # IPython's `path.py in func(args)`
# vLLM's logger: `ERROR 02-21 06:30:25 core.py:291]` or `ERROR 03-10 08:07:20 [core.py:302]`
VLLM_LOG = re.compile(r"\b(?:INFO|WARNING|ERROR|CRITICAL|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w]+\.py:\d+\]")
EXC_TYPE = re.compile(r"(?:^|[\s:(\]|>])(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?:\([\w.]*\))?:(?: |$)")

_NAMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "vllm",
        re.compile(
            r"(?i)^(?:\w*LLMRayActor|RolloutRayActor|RayWorkerVllm|RayWorkerWrapper|EngineCore\w*|VllmWorker\w*|vLLM\w*|"
            r"AsyncvLLM\w*|\w*LLMEngine|AsyncLLM|APIServer|LLMServer|SGLang\w*|\w*RolloutWorker\w*)$"
        ),
    ),
    ("reward", re.compile(r"(?i)reward|^RM\w*|judge|verifier|remote_rm")),
    (
        "trainer",
        re.compile(
            r"(?i)^(?:\w*(?:Actor|Critic|Policy|Reference)Model\w*|\w*PPOTrainer\w*|TaskRunner|main_task|WorkerDict|\w*PolicyWorker\w*|"
            r"\w*TrainingActor\w*|\w*Learner\w*|RayTrainWorker|Runner)$"
        ),
    ),
    ("cluster", re.compile(r"(?i)^(?:raylet|gcs_server|dashboard\w*|autoscaler|monitor)$")),
)
# A Ray task's method that generates rollouts, whatever the worker class is called.
ROLLOUT_METHOD = re.compile(r"(?:^|_)(?:generate_sequences|rollout_generate\w*|generate_samples|generate_rollouts?)$")
# Frame paths, innermost last: the first package among these in the traceback names the component.
_PATHS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("vllm", re.compile(r"/vllm/|/sglang/|vllm_engine\.py|vllm_worker|/rollout/")),
    ("reward", re.compile(r"(?i)/[^/\s\"]*reward[^/\s\"]*\.py|remote_rm|/verifier")),  # a file's name, not any folder
    ("data", re.compile(r"/datasets/|torch/utils/data/|/dataloader|data_loader|/dataset\w*\.py|blending_datasets")),
    (
        "trainer",
        re.compile(
            r"/deepspeed/|torch/distributed/|openrlhf/trainer/|openrlhf/models/|/verl/workers/|/transformers/trainer\.py|"
            r"/accelerate/|/megatron/|torch/nn/parallel/|/fsdp"
        ),
    ),
)


@dataclass(frozen=True)
class Signals:
    """`component`: one of COMPONENTS or None; `exception`: the decisive exception's type
    (`""` if none); `raised_in`: `file.py:function` of the innermost frame before it (`""`
    if none); `progress`: a step was logged or the failure came inside the training loop;
    `startup`: no step, and the log puts the failure at start-up (startup, placement, model
    load). Neither: the log does not tell."""

    component: str | None
    exception: str
    raised_in: str
    progress: bool
    startup: bool = False

    @property
    def stateless(self) -> bool:
        return self.component in STATELESS

    def describe(self) -> str:
        """`ValueError raised in sampler.py:_sample, in a vLLM engine` (the parts known)."""
        parts = [self.exception or "the failure"]
        if self.raised_in:
            parts.append(f"raised in {self.raised_in}")
        if self.component:
            parts.append(f"in {COMPONENT_TEXT[self.component]}")
        return ", ".join(parts)


COMPONENT_TEXT = {
    "vllm": "a vLLM engine (no training state)",
    "reward": "the reward model or server (no training state)",
    "trainer": "a trainer rank (DeepSpeed / torch.distributed: the state a checkpoint restores)",
    "data": "the data loader",
    "cluster": "Ray itself",
}


def _by_name(name: str) -> str | None:
    for component, pattern in _NAMES:
        if pattern.search(name):
            return component
    return None


def _by_path(path: str) -> str | None:
    for component, pattern in _PATHS:
        if pattern.search(path):
            return component
    return None


def _traceback(before: str) -> str:
    """The text of the traceback the decisive line ends (from its last head, else the last 4 KB)."""
    start = before.rfind("Traceback (most recent call last)")
    return before[start:] if start != -1 else before[-4096:]


def _frames(text: str) -> list[tuple[str, str]]:
    found = [(m.group("path"), m.group("func")) for m in FRAME.finditer(text)]
    for line in text.splitlines():
        m = IPY_FRAME.match(line.strip())
        if m:
            found.append((m.group("path"), m.group("func")))
    return found


def component_of(line: str, before: str) -> str | None:
    """The component the decisive `line` comes from: its own process prefix, else the Ray
    task that raised it (`ray::Class.method()`) or the prefix of the lines before it, else the
    innermost frame of its traceback whose package names one, else vLLM's log format."""
    m = PREFIX.search(line)
    if m:
        found = _by_name(m.group("name"))
        if found:
            return found
    tb = _traceback(before)
    for m in reversed(list(RAY_TASK.finditer(tb + "\n" + line))):
        if m.group("method") and ROLLOUT_METHOD.search(m.group("method")):
            return "vllm"  # a fused worker (verl's WorkerDict) failing in its rollout method: the engine's failure
    names = [m.group("name") for m in RAY_TASK.finditer(tb + "\n" + line)]
    names += [m.group("name") for m in PREFIX.finditer(tb)]
    for name in reversed(names):
        found = _by_name(name)
        if found:
            return found
    for path, _ in reversed(_frames(tb + "\n" + line)):
        found = _by_path(path)
        if found:
            return found
    if VLLM_LOG.search(line) or VLLM_LOG.search(tb[-2048:]):
        return "vllm"
    return None


def raised_at(line: str, before: str) -> str:
    """`file.py:function` of the innermost frame of the decisive line's traceback, or ""."""
    frames = _frames(_traceback(before) + "\n" + line)
    if not frames:
        return ""
    path, func = frames[-1]
    return f"{path.rsplit('/', 1)[-1]}:{func}"


BARE_EXC = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\s*$")


def exception_type(line: str) -> str:
    """The exception type a line raises: `Type: message`, or a line holding the type alone (an
    exception raised without a message: `NotImplementedError`)."""
    m = EXC_TYPE.search(line) or BARE_EXC.search(line)
    return m.group("type").rsplit(".", 1)[-1] if m else ""


def read_signals(
    line: str, before: str, *, step: int | None, phase: str | None, loop: tuple[str, ...], startup: tuple[str, ...] = ()
) -> Signals:
    progress = step is not None or phase in loop
    return Signals(component_of(line, before), exception_type(line), raised_at(line, before), progress, not progress and phase in startup)
