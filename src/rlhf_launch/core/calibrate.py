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
from collections.abc import Mapping, Sequence
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
