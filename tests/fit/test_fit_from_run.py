"""`fit --from RUN`: the layouts re-ranked with the constants a recorded run measured (its
trainer's timing/* against its own plan's estimate). The CLI in-process, no Ray."""

from __future__ import annotations

import json

import pytest

from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.runs import lifecycle
from rlhf_launch.runs import record as runs

from conftest import CONFIGS, run_cli


def recorded(preset: str, slower: dict[str, float], steps: int = 3) -> runs.Run:
    """A run record of `preset` whose supervisor read `steps` steps, each phase `slower[phase]`
    times what its plan estimated (the medians progress keeps)."""
    launch = prepare(load_config(CONFIGS / f"{preset}.yaml"), environ={})
    run = lifecycle.new_run(launch, "http://127.0.0.1:8265", preset, [])
    assert run.estimate is not None
    phases = {p: round(s * slower.get(p, 1.0), 3) for p, s in launch.estimate.phases_s.items()}
    measured = {"steps": steps, "step_s": sum(phases.values()), "phases_s": phases}
    return runs.update(run.run_id, lambda r: setattr(r, "progress", {"step": steps, "measured": measured}))


def fit_json(*args: str) -> dict:
    out = run_cli("fit", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_fit_from_a_run_ranks_with_what_it_measured(home):
    run = recorded("llama70b-4node", {"generate": 3.0, "train": 0.8})
    plain = fit_json("llama70b-4node", "--nodes", "4")
    tuned = fit_json("llama70b-4node", "--nodes", "4", "--from", run.run_id)
    assert plain["calibration"] is None
    cal = tuned["calibration"]
    assert cal["run"] == run.run_id and cal["steps_measured"] == 3
    assert cal["measured_s"]["generate"] == pytest.approx(3 * cal["estimated_s"]["generate"], rel=0.01)
    # the run's own layout, estimated again with its calibrated constants, says what it measured
    yours = tuned["yours"]["estimate"]["phases_s"]
    assert yours["generate"] == pytest.approx(cal["measured_s"]["generate"], rel=0.03)
    assert yours["train"] == pytest.approx(cal["measured_s"]["train"], rel=0.03)
    # every layout shown is estimated with those constants, and ranked by them
    steps = [layout["estimate"]["step_s"] for layout in tuned["layouts"]]
    assert steps == sorted(steps)
    assert tuned["layouts"][0]["estimate"]["step_s"] > plain["layouts"][0]["estimate"]["step_s"]  # decode is slower than thought
    assert "calibrated on " + run.run_id in " ".join(tuned["layouts"][0]["estimate"]["assumptions"])


def test_a_slow_decode_favours_more_of_the_gpus_for_vllm(home):
    def engine_gpus(data: dict) -> int:
        best = data["layouts"][0]["layout"]
        return sum(int(a) * int(b) for a, b in __import__("re").findall(r"vLLM (\d+)x(\d+)", best)) or 0

    run = recorded("llama70b-4node", {"generate": 6.0, "make_experience": 0.5, "train": 0.5})
    plain = fit_json("llama70b-4node", "--nodes", "4")
    tuned = fit_json("llama70b-4node", "--nodes", "4", "--from", run.run_id)
    assert engine_gpus(tuned) >= engine_gpus(plain)
    share = lambda d: d["layouts"][0]["estimate"]["phases_s"]["generate"] / d["layouts"][0]["estimate"]["step_s"]  # noqa: E731
    assert share(tuned) > share(plain)


def test_the_table_says_what_it_was_calibrated_on(home):
    run = recorded("qwen2.5-7b-grpo", {"generate": 2.0})
    out = run_cli("fit", "qwen2.5-7b-grpo", "--nodes", "1", "--top", "2", "--from", run.run_id)
    assert out.returncode == 0, out.stderr
    assert f"calibrated on {run.run_id}'s measured phases" in out.stdout and "decode at " in out.stdout


def test_a_run_without_timers_is_a_clear_error(home):
    launch = prepare(load_config(CONFIGS / "qwen2.5-7b-grpo.yaml"), environ={})
    run = lifecycle.new_run(launch, "http://127.0.0.1:8265", "qwen2.5-7b-grpo", [])
    out = run_cli("fit", "qwen2.5-7b-grpo", "--nodes", "1", "--from", run.run_id)
    assert out.returncode == 2 and "no measured phases" in out.stderr and "reached no step yet" in out.stderr
    runs.update(run.run_id, lambda r: setattr(r, "progress", {"step": 4, "measured": None}))
    out = run_cli("fit", "qwen2.5-7b-grpo", "--nodes", "1", "--from", run.run_id)
    assert out.returncode == 2 and "printed no timing/*" in out.stderr and "0.9.6" in out.stderr
    out = run_cli("fit", "qwen2.5-7b-grpo", "--nodes", "1", "--from", "no-such-run")
    assert out.returncode == 2 and "no-such-run" in out.stderr
