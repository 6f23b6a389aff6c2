"""Live calibration (core/calibrate.py from_measured): the constants a run's measured phases
imply, pure, no Ray."""

from __future__ import annotations

import pytest

from rlhf_launch.core.calibrate import CALIBRATED, from_measured, ratios
from rlhf_launch.core.config import load_config
from rlhf_launch.core.estimate import DEFAULT, estimate_step
from rlhf_launch.core.launch import prepare

from conftest import CONFIGS


def launch(preset: str = "llama70b-4node", *overrides: str):
    return prepare(load_config(CONFIGS / f"{preset}.yaml", list(overrides)), environ={})


def again(done, constants):
    return estimate_step(done.cfg, done.plan, settings=done.settings, constants=constants, version=done.flags.version)


@pytest.mark.parametrize("preset", ["llama70b-4node", "qwen2.5-7b-grpo", "llama70b-2node-hybrid"])
def test_the_calibrated_constants_reproduce_the_measured_phases(preset):
    done = launch(preset)
    base = done.estimate
    assert base is not None
    # a run whose decode was 1.6x slower, forwards 0.7x, training 1.3x what the model said
    measured = {
        "generate": base.phases_s["generate"] * 1.6,
        "make_experience": base.phases_s["make_experience"] * 0.7,
        "train": base.phases_s["train"] * 1.3,
        "weight_sync": base.phases_s["weight_sync"] * 3.0,
    }
    adjusted = from_measured(DEFAULT, base, measured, source="run-1", reestimate=lambda c: again(done, c))
    after = again(done, adjusted)
    assert after is not None
    for phase in CALIBRATED:
        assert after.phases_s[phase] == pytest.approx(measured[phase], rel=0.03), phase
    assert after.phases_s["weight_sync"] == pytest.approx(base.phases_s["weight_sync"])  # compared, not calibrated
    assert adjusted.decode_efficiency < DEFAULT.decode_efficiency  # slower decode: less of the bandwidth
    assert adjusted.forward_mfu > DEFAULT.forward_mfu and adjusted.train_mfu < DEFAULT.train_mfu
    assert adjusted.origin == "calibrated on run-1's measured phases"


def test_one_ratio_without_reestimate_moves_only_its_constant():
    base = launch().estimate
    assert base is not None
    adjusted = from_measured(DEFAULT, base, {"train": base.phases_s["train"] * 2})
    assert adjusted.train_mfu == pytest.approx(DEFAULT.train_mfu / 2)
    assert (adjusted.decode_efficiency, adjusted.forward_mfu) == (DEFAULT.decode_efficiency, DEFAULT.forward_mfu)


def test_a_run_that_matches_the_estimate_changes_nothing_and_a_wild_one_is_bounded():
    base = launch().estimate
    assert base is not None
    same = from_measured(DEFAULT, base, dict(base.phases_s))
    assert (same.decode_efficiency, same.forward_mfu, same.train_mfu) == (DEFAULT.decode_efficiency, DEFAULT.forward_mfu, DEFAULT.train_mfu)
    wild = from_measured(DEFAULT, base, {"make_experience": base.phases_s["make_experience"] * 1e6, "train": 0.0})
    assert wild.forward_mfu == pytest.approx(DEFAULT.forward_mfu / 20)  # bounded: 20x off is another run
    assert wild.train_mfu == DEFAULT.train_mfu  # a zero measurement says nothing


def test_calibration_reranks_layouts_the_way_the_measurement_says():
    """Measured decode much slower than estimated: a layout with more engines gains, one with
    fewer loses, under the calibrated constants."""
    done = launch("llama70b-4node")
    fewer = launch("llama70b-4node", "placement.vllm.engines=1")
    base = done.estimate
    assert base is not None
    slow = from_measured(DEFAULT, base, {"generate": base.phases_s["generate"] * 3}, reestimate=lambda c: again(done, c))
    gap_before = again(fewer, DEFAULT).step_s - again(done, DEFAULT).step_s
    gap_after = again(fewer, slow).step_s - again(done, slow).step_s
    assert gap_after > gap_before > 0


def test_ratios_per_phase_and_step():
    base = launch().estimate
    assert base is not None
    got = ratios(base, {"generate": base.phases_s["generate"] * 2, "step": base.step_s / 2})
    assert got == pytest.approx({"generate": 2.0, "step": 0.5})
