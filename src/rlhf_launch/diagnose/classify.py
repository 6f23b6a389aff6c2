"""The decision engine: which rule of the table (rules.py) decides, where it is looked for,
and what the diagnosis then says. Pure: text in, a `Diagnosis` out.

Only the part of the log after the last step line counts (reader.py). Its tail is searched
for every rule in table order; the first that matches wins. A failure that leaves survivors
hanging (node loss, OOM kills, a GPU OOM or fault on one rank, a vLLM crash, a failed
weight sync, a CUDA fault) can precede the end by a long time, so the rest is read forwards
from the last step in chunks for the deep rules only, and only the lines holding one of
rules.DEEP_ANCHORS; the first chunk with such a cause decides (the cause comes first, its
aftermath after), unless the tail holds a class that outranks it. When nothing matches the
diagnosis is `unknown` and its hint names the last exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlhf_launch.core.secrets import redact_line
from rlhf_launch.diagnose import checks, neighbours, reader
from rlhf_launch.diagnose.context import Ctx, empty_match, exception_of, infer_phase, marker_phase
from rlhf_launch.diagnose.raystate import any_pending, state_lines
from rlhf_launch.diagnose.reader import Line, Pool, Source
from rlhf_launch.diagnose.rules import ALL_ANCHORS, DEEP_ANCHORS, DEEP_RULES, FALLBACK_ANCHORS, FALLBACK_EXCEPTION, RULES, Rule
from rlhf_launch.diagnose.signals import Signals, exception_type, read_signals
from rlhf_launch.diagnose.taxonomy import LOOP, STARTUP, Diagnosis, FailureClass

__all__ = ["classify", "diagnose_reader"]

EVIDENCE_LINES = 5
EVIDENCE_WIDTH = 400
RANK = {rule.name: n for n, rule in enumerate(RULES)}


def _first_match(rule: Rule, pool: Pool, source: Source, step: int | None, boundary: int) -> Ctx | None:
    seen: set[int] = set()
    for line, index in pool.matches(rule.regex, rule.needles):
        if index in seen:
            continue
        seen.add(index)
        if rule.veto is not None and rule.veto.search(line.text):
            continue
        match = rule.regex.search(line.text)
        if match is None:
            continue
        ctx = Ctx(source, line, match, step, boundary)
        if not rule.when or checks.PREDICATES[rule.when](ctx):
            return ctx
    return None


def _first_rule(rules: Sequence[Rule], pool: Pool, source: Source, step: int | None, boundary: int) -> tuple[Rule, Ctx] | None:
    for rule in rules:
        ctx = _first_match(rule, pool, source, step, boundary)
        if ctx is not None:
            return rule, ctx
    return None


def _decide(rule: Rule, ctx: Ctx) -> tuple[bool, str, str | None]:
    """The rule's retriable, hint and phase for this context (the phase first: the others
    may read it)."""
    ctx.phase = rule.phase if rule.phase is not None else infer_phase(ctx)
    if rule.phase_by:
        ctx.phase = checks.PHASE_OF[rule.phase_by](ctx)
    retriable = checks.PREDICATES[rule.retriable_by](ctx) if rule.retriable_by else bool(rule.retriable)
    hint = checks.HINTS[rule.hint_by](ctx) if rule.hint_by else rule.hint
    return retriable, hint, ctx.phase


def _clip(line: str) -> str:
    line = line.rstrip("\r\n")
    if "\r" in line:  # a tqdm line: keep the segment that matters
        line = line.rsplit("\r", 1)[-1] or line
    line = line.strip()
    return line if len(line) <= EVIDENCE_WIDTH else line[: EVIDENCE_WIDTH - 3] + "..."


def _evidence(first: Line, more: Sequence[Line], environ: Mapping[str, str] | None) -> list[str]:
    out: list[str] = []
    for line in (first, *more):
        text = redact_line(_clip(line.text), environ)
        if text and text not in out:
            out.append(text)
        if len(out) >= EVIDENCE_LINES:
            break
    return out


def _exceptions(tail: Pool) -> list[Line]:
    """The exception lines of the tail, in order (not the `Traceback (most recent...` heads)."""
    return [line for line, _ in tail.matches(FALLBACK_EXCEPTION, FALLBACK_ANCHORS) if "Traceback (most recent" not in line.text]


def _run(source: Source, *, pending: bool, environ: Mapping[str, str] | None, every_line: bool = False) -> Diagnosis:
    log_end = source.log_size
    step, boundary = reader.find_step(source, log_end)
    boundary = max(boundary, log_end - reader.MAX_BACK)
    start = reader.tail_start(source, boundary)
    tail = reader.pool(source.read(start, source.size), start, ALL_ANCHORS, every_line)
    found = _first_rule(RULES, tail, source, step, boundary)
    if boundary < start:
        # Before the tail: the first chunk after the last step holding a root cause that
        # leaves survivors hanging (read forward: the cause comes first, its aftermath after).
        outranking = tuple(r for r in DEEP_RULES if found is None or RANK[r.name] < RANK[found[0].name])
        if outranking:
            for pos, data in reader.forward_chunks(source, boundary, start):
                deep = _first_rule(outranking, reader.pool(data, pos, DEEP_ANCHORS, every_line), source, step, boundary)
                if deep is not None:
                    found = deep
                    break
    if found is None:
        return _unknown(source, tail, step, boundary, pending=pending, environ=environ)
    rule, ctx = found
    retriable, hint, phase = _decide(rule, ctx)
    return Diagnosis(rule.cls, retriable, phase, step, _evidence(ctx.line, _exceptions(tail)[-2:], environ), hint, rule.name)


def _last_exception(lines: Sequence[Line]) -> str:
    """`Type: message` of the last exception line among `lines`."""
    for line in reversed(lines):
        found = exception_of(line.text)
        if found:
            return found
    return ""


# What no rule names is still decided from signals that survive rewording (signals.py): an
# import that cannot be resolved (by its message's shape, whatever raises it), an exception
# raised while loading a model, checkpoint or dataset, and the component that failed: a vLLM
# engine or reward server holds no training state, so a failure there after progress is
# retriable; before the first step (start-up: code, config, environment) nothing is.
IMPORT_SHAPE = re.compile(
    r"cannot import name \S+ from|No module named ['\"]|partially initialized module|undefined symbol: \w"
    r"|Error building extension|ninja: build stopped|Failed to import \S+ because"
)
LOAD_FUNCS = frozenset(
    {
        "load_checkpoint",
        "_load_checkpoint",
        "_load_zero_checkpoint",
        "_load_optimizer_and_scheduler",
        "load_state_dict",
        "from_pretrained",
        "cached_file",
        "load_dataset",
        "load_from_disk",
    }
)
# Where a configuration is checked: DeepSpeed's config (batch sizes, its sanity checks), argparse,
# OmegaConf / Hydra. An exception raised there is the configuration's, whatever its message says.
CONFIG_FUNCS = frozenset(
    {
        "_configure_train_batch_size",
        "_batch_assertion",
        "_set_batch_related_parameters",
        "_do_sanity_check",
        "_do_error_check",
        "parse_args",
        "parse_known_args",
        "_get_values",
        "_check_value",
    }
)
CONFIG_FILES = re.compile(r"^(?:argparse|omegaconf|dictconfig|_hydra|hydra)\.py:")
INPUT_ERRORS = frozenset({"ValueError", "TypeError", "KeyError", "AttributeError", "NotImplementedError", "IndexError"})
# A loader by its name (`load_model_and_tokenizer`, `_load_valuehead_params`): not the weight update's
# `load_weights`, which a trainer calls on vLLM mid-run.
LOADER = re.compile(r"^_?load_\w*(?:model|tokenizer|checkpoint|dataset|state_dict|valuehead|params|config)\w*$")
# Where torch.distributed builds a process group's store or rendezvous: a failure there is the
# communicator never coming up (not retried before any progress).
RENDEZVOUS_FUNCS = frozenset(
    {
        "_create_tcp_store",
        "_create_c10d_store",
        "_env_rendezvous_handler",
        "_tcp_rendezvous_handler",
        "_store_based_barrier",
        "next_rendezvous",
        "_rendezvous_helper",
        "init_process_group",
    }
)
NETWORK = re.compile(r"(?i)Connection\w*Error|Timeout|HTTPError|ClientError|RemoteDisconnected|ServerDisconnected|\b50[234]\b")
TRY_AGAIN = re.compile(r"(?i)try again later|temporarily unavailable")
# Whether a confident vote of the closest known cases (neighbours.py) decides a failure the
# signals leave `unknown`; when it does not, the vote is only reported in the hint.
ADOPT_VOTE = True


def _by_signals(signals: Signals, near: str, phase: str | None = None) -> tuple[FailureClass, bool] | None:
    """The class and retriable of a failure no strong rule decided, from its signals; None
    when they say nothing beyond `unknown`."""
    if IMPORT_SHAPE.search(near):
        return FailureClass.IMPORT, False
    if phase == "weight_sync":  # raised while the trainer's weights went to the engines (frames, markers)
        return FailureClass.WEIGHT_SYNC, bool(checks.TIMEOUT.search(near))
    if signals.raised_in.rsplit(":", 1)[-1] in LOAD_FUNCS or LOADER.match(signals.raised_in.rsplit(":", 1)[-1]):
        return FailureClass.MODEL_OR_DATA, False
    if signals.raised_in.rsplit(":", 1)[-1] in RENDEZVOUS_FUNCS:  # the process group's store or rendezvous
        return FailureClass.NCCL, signals.progress
    if signals.raised_in.rsplit(":", 1)[-1] in CONFIG_FUNCS or CONFIG_FILES.match(signals.raised_in):
        return FailureClass.CONFIG, False
    if signals.component == "vllm":
        # no training state: retriable unless the log puts it at start-up; an exception of a kind
        # a program raises on its input (ValueError, TypeError, ...) with no sign of progress is
        # the engine refusing its configuration, which a new engine refuses the same way
        if signals.exception in INPUT_ERRORS and not signals.progress:
            return FailureClass.VLLM, False
        return FailureClass.VLLM, not signals.startup
    if signals.component == "reward":
        # a server that did not answer may answer a resumed run; reward code fails the same way
        return FailureClass.REWARD_REMOTE, not signals.startup and bool(NETWORK.search(signals.exception + "\n" + near[-2048:]))
    return None


def _signals_hint(signals: Signals, cls: FailureClass, retriable: bool) -> str:
    if retriable:
        why = "in a component without training state, not at start-up: retriable"
    elif signals.startup or not signals.progress:
        why = "before the first step (code, config or environment): not retriable"
    else:
        why = "not retriable by itself (auto-resume still retries an unknown failure after progress once)"
    return f"decided from the failure's shape ({signals.describe()}): {cls}, {why}"


def _decisive(lines: Sequence[Line]) -> Line:
    """The last of the tail's exception lines that names an exception type (else the last)."""
    for line in reversed(lines):
        if exception_type(line.text):
            return line
    return lines[-1]


def _last_line(source: Source, boundary: int) -> Line | None:
    """The log's last non-empty line after `boundary` (its traceback then lies before it)."""
    end = source.log_size
    lo = max(boundary, end - 4096)
    text = source.read(lo, end)
    stripped = text.rstrip()
    if not stripped:
        return None
    start = stripped.rfind(b"\n") + 1
    return Line(lo + start, stripped[start:].decode("utf-8", "replace"))


def _unknown(source: Source, tail: Pool, step: int | None, boundary: int, *, pending: bool, environ: Mapping[str, str] | None) -> Diagnosis:
    last = _exceptions(tail)[-3:]
    states = [line for line in tail.lines if line.text.startswith("[ray state] placement group")]
    signals: Signals | None = None
    decided: tuple[FailureClass, bool] | None = None
    if last:
        ctx = Ctx(source, _decisive(last), empty_match(), step, boundary)
        phase = infer_phase(ctx)
        signals = read_signals(ctx.text, ctx.before(), step=step, phase=phase, loop=LOOP, startup=STARTUP)
        decided = _by_signals(signals, ctx.near(), phase)
    else:
        phase = marker_phase(source, source.log_size, boundary)
        end = None if pending and step is None else _last_line(source, boundary)
        if end is not None:  # no exception line: the frames and prefixes before the log's end still tell
            ctx = Ctx(source, end, empty_match(), step, boundary)
            phase = infer_phase(ctx) or phase
            signals = read_signals(ctx.text, ctx.before(), step=step, phase=phase, loop=LOOP, startup=STARTUP)
            decided = _by_signals(signals, ctx.near(), phase)
    if pending and step is None and not last:
        phase = "placement"
        hint = "placement groups are still pending: the cluster lacks the GPUs/CPUs the plan needs; free them or shrink `placement.*`"
    else:
        exception = _last_exception(last)
        if exception:
            hint = f"no known failure class matched; the last exception was {redact_line(exception, environ)} (`rlhf-launch logs RUN`)"
        else:
            hint = "no known failure class matched and the log shows no exception: read it (`rlhf-launch logs RUN`)"
    near = "\n".join(line.text for line in last)
    cls, retriable = FailureClass.UNKNOWN, bool(TRY_AGAIN.search(near))
    if decided is not None and signals is not None:
        cls, retriable = decided
        hint = f"{hint}; {_signals_hint(signals, cls, retriable)}"
    elif signals is not None and (signals.component or signals.raised_in):
        hint = f"{hint}; {_signals_hint(signals, cls, retriable)}"
    if decided is None and last:
        around = Ctx(source, last[-1], empty_match(), step, boundary).before()[-2048:]
        found = neighbours.vote("\n".join(line.text for line in last) + "\n" + around)
        if found is not None and found.similarity >= neighbours.MIN_SIMILARITY:  # a closest case worth naming
            if found.confidence >= neighbours.MIN_CONFIDENCE and ADOPT_VOTE:
                cls, retriable = FailureClass(found.cls), found.retriable
            hint = f"{hint}; {found.describe()}"
    evidence = _evidence(last[-1], last[:-1] + states, environ) if last else _evidence(states[0], states[1:], environ) if states else []
    return Diagnosis(cls, retriable, phase, step, evidence, hint, "fallback")


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
    """Diagnose a driver log held in memory (the same reading as `diagnose_reader`), with
    Ray's job message, dead actors (state API rows: class_name, state, death_cause,
    node_id) and pending placement groups (rows with state and bundles) when known."""
    extra = state_lines(job_message, dead_actors, pending_groups, exit_code)
    data = log.encode("utf-8", "replace")
    suffix = ("\n" if data and not data.endswith(b"\n") else "") + "\n".join(extra)
    source = Source(data=data, extra=suffix.encode("utf-8", "replace") if extra else b"")
    return _run(source, pending=any_pending(pending_groups), environ=environ, every_line=_every_line)


def diagnose_reader(
    read_at: Callable[[int, int], bytes],
    size: int,
    *,
    job_message: str = "",
    dead_actors: Sequence[Mapping[str, Any]] = (),
    pending_groups: Sequence[Mapping[str, Any]] = (),
    exit_code: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Diagnosis:
    """Diagnose a driver log of any size through `read_at(offset, length)` (the edge's pread
    on a file: runs/logfile.py), reading from its end (reader.py): memory stays at a few
    chunks whatever the size."""
    extra = state_lines(job_message, dead_actors, pending_groups, exit_code)
    suffix = b""
    if extra:
        last = read_at(size - 1, 1) if size else b"\n"
        suffix = (b"" if last == b"\n" else b"\n") + "\n".join(extra).encode("utf-8", "replace")
    return _run(Source(read_at=read_at, size=size, extra=suffix), pending=any_pending(pending_groups), environ=environ)
