"""Progress of an OpenRLHF PPO run, read from its driver log: step N of M, rate, ETA, reward,
KL, and the start-up milestones the supervisor puts deadlines on. Pure: text and clock in,
values out (what the lines look like per release: tests/data/diagnose/LOG_FORMATS.md).

What a "step" is: a **global step**, one PPO iteration of the trainer's `fit()` loop
(generate one rollout batch, make experience, train `max_epochs` over it, sync the weights
to vLLM). It is what `✨ Global step N: {...}` counts, what checkpoints are tagged with
(`global_step<N>`) and what W&B logs as `train/global_step`. It is not OpenRLHF's
`max_steps`, which counts optimizer steps for the LR schedule (`StepCount.optimizer_steps`).

Milestones, in the order a healthy attempt reaches them:

    RUNTIME_ENV_READY  Ray's, not the log's: the job left PENDING (its runtime env is set
                       up and the driver started). The supervisor marks it from the job
                       status; the first driver log line implies it.
    PLACEMENT_READY    the placement groups were granted. The driver prints nothing then
                       (`ray.get(pg.ready())` just returns), so the log's evidence is the
                       first line of a model actor (`(PolicyModelActor pid=...)`,
                       `(LLMRayActor ...)`, ...), which only exist once placed. The
                       supervisor may mark it earlier from Ray's placement-group table.
    MODELS_LOADED      models initialised and vLLM engines up: the training loop started
                       (the first `Episode [...]` bar, `checkpoint_states:`, experience
                       making, a generation bar). OpenRLHF prints no "ready" line itself.
    FIRST_STEP         the first `Global step N:` line of this attempt.
    STEP               every `Global step N:` line (0.8.0, which has no such line: the
                       episode bar, when the release is given).

A later milestone implies the earlier ones (stamped with the same time).
"""

from __future__ import annotations

import ast
import math
import re
import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rlhf_launch.core.steps import StepCount, release_key, total_steps
from rlhf_launch.diagnose.reader import CHECKPOINT_STATES, GLOBAL_STEP  # the step lines, read by both
from rlhf_launch.util.enums import StrEnum

__all__ = [
    "Milestone",
    "Progress",
    "Stall",
    "StepCount",
    "Tracker",
    "default_deadlines",
    "known_total",
    "measured_phases",
    "parse_deadlines",
    "parse_metrics",
    "release_key",
    "scan",
    "span",
    "stall",
    "stall_diagnosis",
    "total_steps",
]


STAMP_SPAN = 5.0  # seconds the logger times of the rate's steps must span (1 s resolution: within 20 %)


class Milestone(StrEnum):
    RUNTIME_ENV_READY = "runtime_env_ready"
    PLACEMENT_READY = "placement_ready"
    MODELS_LOADED = "models_loaded"
    FIRST_STEP = "first_step"
    STEP = "step"


ORDER = (Milestone.RUNTIME_ENV_READY, Milestone.PLACEMENT_READY, Milestone.MODELS_LOADED, Milestone.FIRST_STEP, Milestone.STEP)

# ---------------------------------------------------------------- line formats (LOG_FORMATS.md §6)

# `✨ Global step N: {...}` (0.8.1+, trainer/ppo_trainer.py:532 in 0.8.11, :551 in 0.11.2);
# the async trainer prints it without the emoji (ppo_trainer_async.py:240 in 0.9.10).
# tqdm bars, matched anywhere in a line (Ray prefixes often sit on the line before).
EPISODE_BAR = re.compile(r"Episode \[(\d+)/(\d+)\]:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+)")
TRAIN_BAR = re.compile(r"Train epoch \[(\d+)/(\d+)\]:\s*\d+%\|[^|]*\|\s*\d+/\d+\s*\[([^\]]*)\]")
# OpenRLHF's logger prefix (utils/logging_utils.py, 0.8-0.11): `INFO 03-11 19:53:36 ppo_trainer.py:551] `:
# the trainer's own clock, to the second, without a year.
LOGGER_TIME = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) [\w.]+:\d+\]")
# tqdm's meter rate: `[00:12<00:30,  3.20s/it` or `[00:12<00:30,  2.10it/s` (`?it/s` before a rate exists).
BAR_RATE = re.compile(r"\[[\d:]+<[^,\]]*,\s*([\d.]+)(s/it|it/s)")
# Model-group actors exist only once their placement group was granted (forks subclass them,
# e.g. `ActorModelRayActorBOX`).
MODEL_ACTOR = re.compile(r"^\s*\((\w*(?:ModelActor|ModelRayActor|LLMRayActor|RolloutRayActor)\w*) pid=\d+")
VLLM_CREATING = re.compile(r"creating LLM with bundle_indices")
LOOP_STARTED = re.compile(
    r"Episode \[\d+/\d+\]:|checkpoint_states: \{|Starting experience making|Generate samples:|Processed prompts:|make_experience:"
)
# The args print: `Namespace(... rollout_batch_size=1024, ...)` (flat, < 0.10.2) or
# `namespace(..., rollout=namespace(batch_size=1024, ...), ...)` (0.10.2+).
FLAT_ROLLOUT_BATCH = re.compile(r"\bNamespace\(.*?\brollout_batch_size=(\d+)")
NESTED_ROLLOUT_BATCH = re.compile(r"\brollout=namespace\([^()]*?\bbatch_size=(\d+)")
NEW_ERA = re.compile(r"\bnamespace\(|\(RolloutRayActor pid=|Generate samples:")  # 0.9.9+ / 0.10.2+: bar counts prompts
OLD_ERA = re.compile(r"Processed prompts:|\(ActorModelRayActor pid=")  # 0.8.x: bar counts rollout batches

# Metric names per release mapped to the two `runs` shows. 0.8.x-0.11.x all log `reward`
# and `kl` in the step dict; 0.9.8+ adds `rollout/reward_mean`; pre-0.8.3 bar postfixes
# say `rm` for the reward.
REWARD_KEYS = ("reward", "rollout/reward_mean", "rm")
KL_KEYS = ("kl",)

# The step line's per-phase timers (0.9.6+, trainer/ppo_trainer.py train_step and fit):
# seconds of this step's generation, make_experience, ppo_train and broadcast to vLLM, and
# their sum (`timing/step_total`; the async trainer's is the wall-clock iteration instead),
# named as core/estimate.py names the phases.
TIMING_KEYS = {
    "timing/generation": "generate",
    "timing/make_experience": "make_experience",
    "timing/ppo_train": "train",
    "timing/broadcast": "weight_sync",
    "timing/step_total": "step",
}


_NUMPY_SCALAR = re.compile(r"\b(?:np|numpy)\.\w+\(([^()]*)\)|\btensor\(([^(),]*)(?:,[^()]*)?\)")
_NON_FINITE = re.compile(r"(?<![\w'\"])(-?)(nan|inf)(?![\w'\"])")


def parse_metrics(text: str) -> dict[str, Any]:
    """The metrics dict of a step line: a Python repr (single quotes, floats, None, possibly
    `nan`, `np.float64(0.5)` or `tensor(0.5)`), read with ast.literal_eval, never eval."""
    cleaned = _NUMPY_SCALAR.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    cleaned = _NON_FINITE.sub(lambda m: f"'__{m.group(1)}{m.group(2)}__'", cleaned)
    try:
        value = ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pairs = re.findall(r"'([^']+)':\s*(-?[\d.]+(?:e[-+]?\d+)?)", text)
        return {k: float(v) for k, v in pairs}
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, str) and item.startswith("__") and item.endswith("__"):
            item = float(item.strip("_"))
        out[str(key)] = item
    return out


def _postfix(text: str) -> dict[str, Any]:
    """`1.83s/it, act_loss=0.795, reward=0.17` -> {'act_loss': 0.795, 'reward': 0.17}."""
    out: dict[str, Any] = {}
    for key, raw in re.findall(r"(\w+)=([-+\w.]+)", text):
        try:
            out[key] = float(raw)
        except ValueError:
            continue
    return out


def measured_phases(metrics: Mapping[str, Any]) -> dict[str, float]:
    """A step line's timers by phase name (generate, make_experience, train, weight_sync,
    step); {} before 0.9.6, which prints none."""
    out = {}
    for key, phase in TIMING_KEYS.items():
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
            out[phase] = float(value)
    return out


def versus(measured: Mapping[str, Any] | None, estimate: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The measured phases (Progress.measured) beside the plan's estimate (StepEstimate.as_json):
    {"steps": n, "step_s": [measured, estimated], "phases_s": {phase: [measured, estimated]}};
    None until a step's timers are read or without an estimate."""
    if not measured or not estimate or not measured.get("phases_s"):
        return None
    est_phases = estimate.get("phases_s") or {}
    phases = {p: [s, est_phases[p]] for p, s in measured["phases_s"].items() if isinstance(est_phases.get(p), (int, float))}
    step = measured.get("step_s")
    return {
        "steps": measured.get("steps"),
        "step_s": [step, estimate.get("step_s")] if step is not None else None,
        "phases_s": phases,
    }


def _first_number(metrics: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


# ---------------------------------------------------------------- scanning


def scan(lines: Iterable[str]) -> list[tuple[Milestone, str]]:
    """The milestones the given lines show, in order, each with a short detail (the step
    number for STEP). Stateless: FIRST_STEP is not told apart here (the Tracker does)."""
    out: list[tuple[Milestone, str]] = []
    for line in lines:
        if "Global step" in line:
            match = GLOBAL_STEP.search(line)
            if match:
                out.append((Milestone.STEP, match.group(1)))
                continue
        if LOOP_STARTED.search(line):
            out.append((Milestone.MODELS_LOADED, line.strip()[:120]))
            continue
        match = MODEL_ACTOR.search(line)
        if match or VLLM_CREATING.search(line):
            out.append((Milestone.PLACEMENT_READY, match.group(1) if match else "vLLM engines created"))
    return out


# ---------------------------------------------------------------- step accounting


def known_total(progress: Mapping[str, Any] | None, planned: int | None) -> int | None:
    """M for a new attempt before its bar is drawn: what an earlier attempt's bar told (the
    run's recorded progress; the dataset is the same), else the plan's count."""
    told = (progress or {}).get("total_steps")
    return told if isinstance(told, int) and told > 0 else planned


# ---------------------------------------------------------------- tracking


@dataclass(frozen=True)
class Progress:
    """What `runs` shows for an attempt. `as_json()` keys are the run record's."""

    step: int | None
    total_steps: int | None
    steps_per_hour: float | None
    eta_seconds: float | None
    reward: float | None
    kl: float | None
    metrics: dict[str, Any]
    milestones: dict[str, float]  # milestone value -> when first seen (caller's clock)
    # the median of the recent steps' timers (0.9.6+): {"steps": n, "step_s": s, "phases_s": {...}}
    measured: dict[str, Any] | None = None
    estimated: dict[str, Any] | None = None  # the plan's estimate: {"step_s": s, "phases_s": {...}}
    eta_basis: str | None = None  # "estimate" before a step's time is known, else "measured"

    def as_json(self) -> dict[str, Any]:
        finite = {k: v for k, v in self.metrics.items() if not (isinstance(v, float) and not math.isfinite(v))}
        return {
            "step": self.step,
            "total_steps": self.total_steps,
            "steps_per_hour": self.steps_per_hour,
            "eta_seconds": self.eta_seconds,
            "reward": self.reward,
            "kl": self.kl,
            "metrics": finite,
            "milestones": dict(self.milestones),
            "measured": self.measured,
            "estimated": self.estimated,
            "eta_basis": self.eta_basis,
        }


@dataclass
class Tracker:
    """Fed the driver log as it comes (any chunking; partial lines are kept until their end)
    with the wall-clock time of each chunk; answers where the attempt stands.

    M comes from the trainer's own episode bar first (it knows the dataset's real size);
    `total_steps`, the plan's count from `max_samples` (an upper bound: the dataset may hold
    fewer prompts), fills in until a bar is seen. `release` lets the bar be read (it counts
    rollout batches before 0.9.1, prompts after, which `rollout_batch_size` turns into
    steps); `started` is when the attempt was submitted (the clock the first deadline runs on)."""

    total_steps: int | None = None
    release: str | None = None
    started: float | None = None
    rollout_batch_size: int | None = None
    window: int = 20  # step observations the rate is computed over
    # the plan's estimate (StepEstimate.as_json: step_s, phases_s) the measured phases are
    # compared with, and the ETA's basis until a step's time is known
    estimate: Mapping[str, Any] | None = None
    timings: deque[dict[str, float]] = field(default_factory=lambda: deque(maxlen=64))  # each step's timers (0.9.6+)
    step: int | None = None
    first_step: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    seen: dict[Milestone, float] = field(default_factory=dict)
    step_times: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=256))  # (step, when read): stalls
    stamped: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=256))  # (step, trainer's clock): the rate
    step_totals: deque[float] = field(default_factory=lambda: deque(maxlen=64))  # `timing/step_total` per step (0.9.6+)
    _bar_seconds: float | None = None  # seconds per global step, from the episode bar's own meter
    _partial: str = ""
    _bar: tuple[int, int, int, int] | None = None  # episode, episodes, n, N of the last episode bar
    _new_era: bool | None = None
    _step_metrics: bool = False  # a step line's metrics seen: the bars' postfix no longer counts

    # ------------------------------------------------------------ feeding
    def mark(self, milestone: Milestone, now: float) -> None:
        """Record a milestone known from elsewhere (Ray: runtime env ready, groups placed).
        Earlier milestones are implied; a milestone already seen keeps its first time."""
        for earlier in ORDER[: ORDER.index(milestone) + 1]:
            self.seen.setdefault(earlier, now)

    def feed(self, text: str, now: float) -> list[tuple[Milestone, str]]:
        """Read a new chunk of the driver log; returns the milestones it reached for the
        first time, and every new step (STEP with its number). Step lines seen before (a
        re-read tail of the log) are skipped."""
        if not text:
            return []
        text = self._partial + text
        lines = text.splitlines()
        if text and text[-1] not in "\r\n":
            self._partial = lines.pop() if lines else ""
        else:
            self._partial = ""
        if lines:
            self.seen.setdefault(Milestone.RUNTIME_ENV_READY, now)
        found = []
        for line in lines:
            found.extend(self._line(line, now))
        if "Episode [" in self._partial:  # tqdm's newest draw ends with no newline until the next
            self._episode_bar(self._partial.rsplit("\r", 1)[-1], now, [])
        return found

    def _line(self, line: str, now: float) -> list[tuple[Milestone, str]]:
        if self._new_era is None or self.rollout_batch_size is None:
            self._learn_plan(line)
        out = scan([line])
        if "Episode [" in line:
            self._episode_bar(line, now, out)
        if "Train epoch [" in line:
            bar = TRAIN_BAR.search(line)
            if bar and not self._step_metrics:  # 0.8.0 has no step line: the bar's postfix is all there is
                self.metrics.update(_postfix(bar.group(3)))
        if "checkpoint_states:" in line:
            states = CHECKPOINT_STATES.search(line)
            if states:
                resumed = parse_metrics(states.group(1)).get("global_step")
                if isinstance(resumed, int) and (self.step is None or resumed > self.step):
                    self.step = resumed
        found: list[tuple[Milestone, str]] = []
        for milestone, detail in out:
            if milestone is Milestone.STEP:
                if self.step_times and int(detail) <= self.step_times[-1][0]:
                    continue  # seen already: overlapping reads of the log are harmless
                match = GLOBAL_STEP.search(line)
                if match:
                    self.metrics, self._step_metrics = parse_metrics(match.group(2)), True
                    took = self.metrics.get("timing/step_total")
                    if isinstance(took, (int, float)) and not isinstance(took, bool) and math.isfinite(took) and took > 0:
                        self.step_totals.append(float(took))
                if self.first_step is None:
                    found.append((Milestone.FIRST_STEP, detail))
                self._stamp(int(detail), line)
                self._record_step(int(detail), now)
                found.append((milestone, detail))
            elif milestone not in self.seen:
                self.mark(milestone, now)
                found.append((milestone, detail))
        return found

    def _record_step(self, step: int, now: float) -> None:
        if self.first_step is None:
            self.first_step = step
            self.mark(Milestone.FIRST_STEP, now)
        self.seen[Milestone.STEP] = now
        self.step = step if self.step is None else max(self.step, step)
        self.step_times.append((step, now))
        timed = measured_phases(self.metrics) if self._step_metrics else {}
        if timed:
            self.timings.append(timed)

    def _stamp(self, step: int, line: str) -> None:
        """The step line's own time (the logger's `mm-dd HH:MM:SS`), kept increasing: a year
        boundary adds a (leap) year; a clock that went back starts the series anew."""
        match = LOGGER_TIME.search(line)
        if not match:
            return
        month, day, hour, minute, second = (int(g) for g in match.groups())
        try:
            when = (datetime(2000, month, day, hour, minute, second) - datetime(2000, 1, 1)).total_seconds()
        except ValueError:
            return
        if self.stamped:
            last = self.stamped[-1][1]
            while when < last - 180 * 86400:  # December -> January
                when += 366 * 86400
            if when < last:
                self.stamped.clear()
        self.stamped.append((step, when))

    def _bar_rate(self, line: str) -> None:
        """Seconds per global step from the episode bar's meter (its unit is a rollout batch
        before 0.9.1, a prompt after)."""
        match = BAR_RATE.search(line)
        if not match:
            return
        value = float(match.group(1))
        if value <= 0:
            return
        per_unit = value if match.group(2) == "s/it" else 1.0 / value
        key = release_key(self.release)
        new_era = key >= (0, 9, 1) if key is not None else self._new_era
        if new_era is None or (new_era and not self.rollout_batch_size):
            return
        self._bar_seconds = per_unit * (self.rollout_batch_size or 1) if new_era else per_unit

    def _episode_bar(self, line: str, now: float, out: list[tuple[Milestone, str]]) -> None:
        bar = EPISODE_BAR.search(line)
        if not bar:
            return
        episode, episodes, n, total = (int(g) for g in bar.groups())
        self._bar = (episode, episodes, n, total)
        self._bar_rate(line[bar.start() :])
        key = release_key(self.release)
        if key is not None and key < (0, 8, 1) and n > 0:
            # 0.8.0 prints no step line; its bar starts at `steps` = global_step + 1.
            step = n - 1
            if step > 0 and (self.step is None or step > self.step):
                out.append((Milestone.STEP, str(step)))

    def _learn_plan(self, line: str) -> None:
        if self.rollout_batch_size is None and "amespace(" in line:
            match = NESTED_ROLLOUT_BATCH.search(line) or FLAT_ROLLOUT_BATCH.search(line)
            if match:
                self.rollout_batch_size = int(match.group(1))
        if self._new_era is None:
            if NEW_ERA.search(line):
                self._new_era = True
            elif OLD_ERA.search(line):
                self._new_era = False

    # ------------------------------------------------------------ answers
    @property
    def total(self) -> int | None:
        """M: what the episode bar says, else the plan's count."""
        return self._bar_total() or self.total_steps or None

    def _bar_total(self) -> int | None:
        if self._bar is None:
            return None
        _, episodes, _, per_bar = self._bar
        key = release_key(self.release)
        new_era = key >= (0, 9, 1) if key is not None else self._new_era
        if new_era is None:
            return None
        if not new_era:
            return per_bar * episodes
        if not self.rollout_batch_size:
            return None
        if key is not None and key < (0, 11, 0):
            return per_bar // self.rollout_batch_size * episodes
        return -(-per_bar // self.rollout_batch_size) * episodes

    def steps_per_hour(self) -> float | None:
        """The trainer's own pace, never the pace its lines were read at (a backlog read at
        once is not millions of steps an hour), first found of:

        1. the step lines' logger times over the last `window` steps, once they span
           STAMP_SPAN seconds (the clock has whole seconds);
        2. the median `timing/step_total` of the last `window` steps (0.9.6+: generation,
           experience, training and weight sync; no checkpoint saves);
        3. the episode bar's meter (tqdm's own smoothed rate);
        None when none of these is known: no rate rather than a wrong one."""
        points = list(self.stamped)[-(self.window + 1) :]
        if len(points) >= 2:
            steps, elapsed = points[-1][0] - points[0][0], points[-1][1] - points[0][1]
            if steps > 0 and elapsed >= STAMP_SPAN:
                return steps * 3600.0 / elapsed
        totals = list(self.step_totals)[-self.window :]
        if totals:
            return 3600.0 / statistics.median(totals)
        if self._bar_seconds:
            return 3600.0 / self._bar_seconds
        return None

    def measured(self) -> dict[str, Any] | None:
        """The median of the last `window` steps' timers, per phase and for the step (its
        `timing/step_total`, else the phases' sum); None before a step line with timers."""
        recent = list(self.timings)[-self.window :]
        if not recent:
            return None
        phases = {}
        for phase in ("generate", "make_experience", "train", "weight_sync"):
            values = [t[phase] for t in recent if phase in t]
            if values:
                phases[phase] = round(statistics.median(values), 3)
        steps = [t.get("step", sum(v for k, v in t.items() if k != "step")) for t in recent]
        return {"steps": len(recent), "step_s": round(statistics.median(steps), 3), "phases_s": phases}

    def _seconds_per_step(self) -> tuple[float, str] | None:
        """Seconds a step takes: the pace seen (steps_per_hour), else the step's own timer
        once a step is done, else the plan's estimate."""
        rate = self.steps_per_hour()
        if rate:
            return 3600.0 / rate, "measured"
        seen = self.measured()
        if seen and seen["step_s"] > 0:
            return seen["step_s"], "measured"
        planned = (self.estimate or {}).get("step_s")
        if isinstance(planned, (int, float)) and planned > 0:
            return float(planned), "estimate"
        return None

    def eta_seconds(self, now: float | None = None) -> float | None:
        pace, total = self._seconds_per_step(), self.total
        if not pace or total is None:
            return None
        if pace[1] == "estimate" and self.step_times:
            return None  # a step is done: its time is what counts, once read
        left = max(0, total - (self.step or 0)) * pace[0]
        if now is not None and self.step_times:
            left = max(0.0, left - (now - self.step_times[-1][1]))
        return left

    def step_intervals(self) -> list[float]:
        """Seconds between consecutive step lines seen at distinct times, per step."""
        out = []
        previous: tuple[int, float] | None = None
        for step, when in self.step_times:
            if previous is not None and when > previous[1] and step > previous[0]:
                out.append((when - previous[1]) / (step - previous[0]))
            previous = (step, when)
        return out

    def progress(self, now: float | None = None) -> Progress:
        rate = self.steps_per_hour()
        pace = self._seconds_per_step()
        planned = {k: self.estimate[k] for k in ("step_s", "phases_s") if k in self.estimate} if self.estimate else None
        return Progress(
            step=self.step,
            total_steps=self.total,
            steps_per_hour=round(rate, 3) if rate else None,
            eta_seconds=round(eta) if (eta := self.eta_seconds(now)) is not None else None,
            reward=_first_number(self.metrics, REWARD_KEYS),
            kl=_first_number(self.metrics, KL_KEYS),
            metrics=dict(self.metrics),
            milestones={str(m): t for m, t in self.seen.items()},
            measured=self.measured(),
            estimated=planned or None,
            eta_basis=pace[1] if pace and eta is not None else None,
        )


# ---------------------------------------------------------------- stalls


@dataclass(frozen=True)
class Stall:
    """The milestone an attempt has waited for past its deadline."""

    milestone: Milestone
    since: float  # when the wait began: the previous milestone (or the attempt's start)
    waited: float
    deadline: float
    step: int | None

    @property
    def message(self) -> str:
        what = {
            Milestone.RUNTIME_ENV_READY: "runtime env not ready (upload or set-up hanging)",
            Milestone.PLACEMENT_READY: "placement groups not granted (the cluster lacks the GPUs the plan needs)",
            Milestone.MODELS_LOADED: "models not loaded / vLLM engines not up",
            Milestone.FIRST_STEP: "no first step",
            Milestone.STEP: f"no step after step {self.step}",
        }[self.milestone]
        return f"{what} for {span(self.waited)} (deadline {span(self.deadline)})"

    @property
    def hint(self) -> str:
        """What to look at or change for a stall at this milestone (a stall has no exception
        of its own: the unknown class's "no known failure class matched" says nothing)."""
        deadline = f"`supervise.deadlines.{self.milestone}` (now {span(self.deadline)})"
        logs = "read `rlhf-launch logs RUN`"
        return {
            Milestone.RUNTIME_ENV_READY: (
                "the job's runtime env is still being set up: shrink the upload (`runtime_env.excludes`) "
                f"or check pip/conda on the nodes; if set-up is just slow, raise {deadline}"
            ),
            Milestone.PLACEMENT_READY: (
                "the placement groups are pending: free the GPUs/CPUs other jobs hold or shrink `placement.*` "
                "(`rlhf-launch doctor` shows what each node has)"
            ),
            Milestone.MODELS_LOADED: (
                f"model loading / vLLM start-up is slow or hung: check the filesystem the weights are read from and {logs}; "
                f"if loading is just slow, raise {deadline}"
            ),
            Milestone.FIRST_STEP: (
                f"the first rollout or weight sync hangs (a dead vLLM engine, NCCL): {logs}; "
                f"if the first step is just slow, raise {deadline}"
            ),
            Milestone.STEP: (
                f"no step since step {self.step}: a hung collective, generation or save: {logs}; "
                f"if steps are just slow (long generations, saves), raise {deadline}"
            ),
        }[self.milestone]

    def as_json(self) -> dict[str, Any]:
        return {"milestone": str(self.milestone), "since": self.since, "waited": self.waited, "deadline": self.deadline, "step": self.step}


def span(seconds: float) -> str:
    """`20 s`, `4 min`, `1 h 05 min`: seconds under a minute (a 20 s deadline is not `0 min`)."""
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest:02d} min"


def stall_diagnosis(found: Mapping[str, Any], stalled: Stall) -> dict[str, Any]:
    """A stalled attempt's diagnosis: class `stall`, the stall's own hint; what the log or
    Ray showed besides (a known class: dead actors, an NCCL timeout) is kept and named."""
    hint = stalled.hint
    if found.get("class") not in (None, "unknown"):
        hint = f"{hint}; the log also shows {found['class']}: {found.get('hint', '')}".rstrip(": ")
    return {
        **found,
        "class": "stall",
        "retriable": True,
        "step": stalled.step,
        "hint": hint,
        "stall": {**stalled.as_json(), "message": stalled.message},
    }


STEP_SLACK = 4.0  # a step may take this many times the median observed step before it is a stall


def stall(tracker: Tracker, now: float, deadlines: Mapping[Milestone, float]) -> Stall | None:
    """The first milestone not yet reached whose deadline, counted from the previous
    milestone, has passed; for steps, counted from the last step, and never shorter than
    STEP_SLACK times the median step seen so far (the first step's duration counting as
    one), so a slow but steady run is not called stalled."""
    previous = tracker.started
    for milestone in ORDER:
        if milestone is Milestone.STEP:
            break
        if milestone in tracker.seen:
            previous = tracker.seen[milestone]
            continue
        if previous is None or milestone not in deadlines:
            return None
        waited = now - previous
        if waited > deadlines[milestone]:
            return Stall(milestone, previous, waited, deadlines[milestone], tracker.step)
        return None
    last = tracker.step_times[-1][1] if tracker.step_times else tracker.seen.get(Milestone.FIRST_STEP)
    if last is None or Milestone.STEP not in deadlines:
        return None
    observed = tracker.step_intervals()
    loaded, first = tracker.seen.get(Milestone.MODELS_LOADED), tracker.seen.get(Milestone.FIRST_STEP)
    if loaded is not None and first is not None and first > loaded:
        observed.append(first - loaded)
    limit = max([deadlines[Milestone.STEP]] + ([STEP_SLACK * statistics.median(observed)] if observed else []))
    waited = now - last
    if waited > limit:
        return Stall(Milestone.STEP, last, waited, limit, tracker.step)
    return None


def default_deadlines(params_billion: float, nodes: int) -> dict[Milestone, float]:
    """Generous defaults (seconds) from the actor's size and the node count: a false stall
    costs a restart (for a 70B model, an hour of loading), a late one only waiting time.

    - runtime env ready: 15 min + 15 s per node (working_dir upload, per-node set-up);
    - placement ready: 15 min + 10 s per node (placement is granted in seconds or never;
      the supervisor's placement guard catches a short cluster sooner);
    - models loaded: 10 min + 30 s per billion parameters + 1 min per node (every role
      reads the weights, often all nodes from one shared filesystem; DeepSpeed and vLLM
      initialisation): 7B on 1 node ~15 min, 70B on 4 nodes ~49 min;
    - first step: 20 min + 30 s per billion (vLLM CUDA-graph capture, the first rollout of
      long generations, the first weight sync): 7B ~24 min, 70B ~55 min;
    - between steps: 10 min + 20 s per billion (a 70B PPO step takes 10+ min; a checkpoint
      save adds minutes): 7B ~12 min, 70B ~33 min, and never less than 4x the median step.
    """
    size = max(0.0, float(params_billion))
    n = max(1, int(nodes))
    return {
        Milestone.RUNTIME_ENV_READY: 900.0 + 15.0 * n,
        Milestone.PLACEMENT_READY: 900.0 + 10.0 * n,
        Milestone.MODELS_LOADED: 600.0 + 30.0 * size + 60.0 * n,
        Milestone.FIRST_STEP: 1200.0 + 30.0 * size,
        Milestone.STEP: 600.0 + 20.0 * size,
    }


def parse_deadlines(overrides: Mapping[str, Any], base: Mapping[Milestone, float] | None = None) -> dict[Milestone, float]:
    """A config's `{models_loaded: 3600, step: 1800}` over `base`; ValueError naming an
    unknown milestone or a value that is not a positive number of seconds."""
    out = dict(base or {})
    known = {m.value: m for m in Milestone}
    for name, value in overrides.items():
        milestone = known.get(str(name))
        if milestone is None:
            raise ValueError(f"unknown milestone {name!r} (known: {', '.join(known)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"deadline for {name} must be a positive number of seconds, got {value!r}")
        out[milestone] = float(value)
    return out
