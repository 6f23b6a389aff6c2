"""Fit the estimate's few constants on measured step times, and score it on others. Pure.

A `Measured` is one published (or live) run: its config and plan, its GPU, its release, the
step seconds it measured and, where given, its phases (generate, train, ...). `fit` searches
the named constants (each over a bounded range, log-spaced, coordinate by coordinate, a few
rounds) for the least squared log error of step time, phases weighing half where published;
`score` gives each run's relative error. Used by the test suite on split: fit records to fit
and split: heldout ones to report, and by live calibration later (a run's own timing/*).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.estimate import DEFAULT, Constants, StepEstimate, estimate_step, with_constants
from rlhf_launch.core.gpus import GpuType
from rlhf_launch.core.plan import Plan

# The constants fitted, each with the range a fit may move it in (outside: not physical).
FITTED: dict[str, tuple[float, float]] = {
    "decode_efficiency": (0.1, 0.9),
    "train_mfu": (0.05, 0.6),
    "forward_mfu": (0.05, 0.6),
    "no_vllm_slowdown": (1.0, 10.0),
    "decode_step_s": (1e-4, 0.03),
}


@dataclass(frozen=True)
class Measured:
    name: str
    cfg: LaunchConfig
    plan: Plan
    gpu: GpuType
    version: str | None
    step_s: float
    # where published: a phase (generate, make_experience, train, weight_sync) or a sum of
    # phases joined by "+" (a timer that spans several, e.g. "generate+make_experience")
    phases_s: Mapping[str, float] = field(default_factory=dict)
    known: Mapping[str, float] = field(default_factory=dict)  # constants the run states (e.g. response_fill), never fitted


def predict(run: Measured, constants: Constants) -> StepEstimate:
    est = estimate_step(run.cfg, run.plan, run.gpu, constants=with_constants(constants, **run.known), version=run.version)
    if est is None:
        raise ValueError(f"{run.name}: the actor's size is unknown; give models.params_billion or the shape keys")
    return est


def phase_sum(est: StepEstimate, phases: str) -> float:
    """The estimate of "generate" or of "generate+make_experience" (a sum of phases)."""
    return sum(est.phases_s[name] for name in phases.split("+"))


def _loss(runs: Sequence[Measured], constants: Constants) -> float:
    total = 0.0
    for run in runs:
        est = predict(run, constants)
        total += math.log(est.step_s / run.step_s) ** 2
        for phases, seconds in run.phases_s.items():
            predicted = phase_sum(est, phases)
            if seconds > 0 and predicted > 0:
                total += 0.5 * math.log(predicted / seconds) ** 2
    return total


def fit(
    runs: Sequence[Measured], base: Constants = DEFAULT, names: Mapping[str, tuple[float, float]] = FITTED, rounds: int = 4
) -> Constants:
    """The constants in `names` that best explain `runs` (the others as in `base`)."""
    if not runs:
        return base
    best = base
    best_loss = _loss(runs, best)
    for _ in range(rounds):
        for name, (low, high) in names.items():
            grid = [low * (high / low) ** (i / 40) for i in range(41)]
            for value in grid:
                trial = replace(best, **{name: value})
                loss = _loss(runs, trial)
                if loss < best_loss:
                    best, best_loss = trial, loss
    return replace(best, origin=f"fitted on {len(runs)} published runs")


@dataclass(frozen=True)
class Score:
    errors: dict[str, float]  # run -> (estimate - measured) / measured, step time

    @property
    def median(self) -> float:
        return statistics.median(abs(e) for e in self.errors.values())

    @property
    def worst(self) -> float:
        return max(abs(e) for e in self.errors.values())


def score(runs: Sequence[Measured], constants: Constants) -> Score:
    return Score({run.name: predict(run, constants).step_s / run.step_s - 1 for run in runs})


# ---------------------------------------------------------------- live calibration (fit --from RUN)

# Which constants a phase's measured/estimated ratio moves: the speed of that phase and no
# other's. generate: the decode rate (bandwidth share, per-step cost, and the FLOP floor and
# prefill, all scaled together so the whole decode+prefill scales); make_experience: the
# forward MFU; train: the training MFU. weight_sync is compared, not calibrated (its link
# efficiency is shared with ZeRO's traffic in make_experience and train).
CALIBRATED = ("generate", "make_experience", "train")
RATIO_RANGE = (0.05, 20.0)  # a phase measured 20x off the estimate is a different run, not a constant


def _ratio(measured: float, estimated: float) -> float | None:
    if not (measured > 0 and estimated > 0 and math.isfinite(measured) and math.isfinite(estimated)):
        return None
    return min(RATIO_RANGE[1], max(RATIO_RANGE[0], measured / estimated))


def _scaled(c: Constants, phase: str, k: float) -> Constants:
    """`c` with `phase` k times slower (k > 1) or faster (k < 1)."""
    if phase == "generate":
        return replace(c, decode_efficiency=c.decode_efficiency / k, decode_step_s=c.decode_step_s * k, prefill_mfu=c.prefill_mfu / k)
    if phase == "make_experience":
        return replace(c, forward_mfu=c.forward_mfu / k)
    return replace(c, train_mfu=c.train_mfu / k)


def _generate_factor(est: StepEstimate, measured: float) -> float | None:
    """How much slower the decode and prefill parts must be for generate to take `measured`:
    the TP all-reduce and vLLM's wake/sleep are left as they are."""
    parts = est.parts_s
    scaled = parts.get("generate.decode", 0.0) + parts.get("generate.prefill", 0.0)
    fixed = est.phases_s["generate"] - scaled
    if scaled <= 0:
        return _ratio(measured, est.phases_s["generate"])
    return _ratio(max(measured - fixed, 0.0) or measured * 1e-3, scaled)


def from_measured(
    constants: Constants,
    estimate: StepEstimate,
    measured: Mapping[str, float],
    *,
    source: str = "a run",
    reestimate: Callable[[Constants], StepEstimate | None] | None = None,
    rounds: int = 4,
) -> Constants:
    """The constants that make `estimate` (made with `constants`) say what a run measured:
    `measured` maps phases (generate, make_experience, train, weight_sync) to seconds, as
    the trainer's `timing/*` report them. Each calibrated phase's ratio moves its constants;
    a phase not measured keeps them. `reestimate` (the run's own layout estimated with other
    constants) refines the ratios where a phase is not linear in its constant (ZeRO-3 gathers
    bound a forward, the decode's FLOP floor): a few multiplicative corrections."""
    out = constants
    est: StepEstimate | None = estimate
    for _ in range(max(1, rounds if reestimate is not None else 1)):
        if est is None:
            break
        moved = False
        for phase in CALIBRATED:
            seconds = measured.get(phase)
            if seconds is None or phase not in est.phases_s:
                continue
            k = _generate_factor(est, seconds) if phase == "generate" else _ratio(seconds, est.phases_s[phase])
            if k is None or abs(k - 1.0) < 1e-3:
                continue
            out, moved = _scaled(out, phase, k), True
        if not moved or reestimate is None:
            break
        est = reestimate(out)
    return replace(out, origin=f"calibrated on {source}'s measured phases")


def ratios(estimate: StepEstimate, measured: Mapping[str, float]) -> dict[str, float]:
    """measured / estimated per phase both know (and "step" for the whole step)."""
    out = {}
    for phase, seconds in measured.items():
        estimated = estimate.step_s if phase == "step" else estimate.phases_s.get(phase)
        if estimated and seconds > 0:
            out[phase] = seconds / estimated
    return out
