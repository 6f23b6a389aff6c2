"""The step-time estimate's sense (core/estimate.py), the GPU table (core/gpus.py) and `cluster.gpu`."""

from __future__ import annotations

import json

import pytest

from rlhf_launch.core import gpus
from rlhf_launch.core.config import load_config
from rlhf_launch.core.estimate import DEFAULT, PHASES, estimate_step, gpu_of, with_constants
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.steps import planned_steps, total_steps
from rlhf_launch.errors import UserError

from conftest import CONFIGS, run_cli

PRESETS = sorted(p.stem for p in CONFIGS.glob("*.yaml"))


def launch(preset: str = "tiny-1node", *overrides: str):
    return prepare(load_config(CONFIGS / f"{preset}.yaml", list(overrides)), environ={})


def est(preset: str = "tiny-1node", *overrides: str):
    done = launch(preset, *overrides)
    assert done.estimate is not None
    return done.estimate


# ---------------------------------------------------------------- the GPU table and cluster.gpu


def test_the_table_holds_the_types_the_issue_names_with_positive_figures():
    for name in ("A100-40GB", "A100-80GB", "A800-80GB", "H100-80GB", "H800-80GB", "H20", "H200", "B200", "L40S"):
        gpu = gpus.get(name)
        assert gpu.bf16_tflops > 0 and gpu.hbm_gbps > 0 and gpu.memory_gib > 0 and gpu.internode_gbps > 0 and gpu.source
    # the figures that tell the types apart, from the datasheets
    assert gpus.get("H20").bf16_tflops < gpus.get("A100-80GB").bf16_tflops < gpus.get("H100-80GB").bf16_tflops
    assert gpus.get("H20").hbm_gbps > gpus.get("H100-80GB").hbm_gbps
    assert gpus.get("A800-80GB").nvlink_gbps < gpus.get("A100-80GB").nvlink_gbps


def test_names_are_found_in_any_case_and_short_forms():
    assert gpus.get("h100").name == "H100-80GB"
    assert gpus.get("a100-40gb").name == "A100-40GB"
    assert gpus.find("A100") is None  # two parts by that name: say which
    with pytest.raises(ValueError, match="known: A100-40GB, A100-80GB"):
        gpus.get("H300")


@pytest.mark.parametrize(
    ("product", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A800-SXM4-80GB", "A800-80GB"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
    ],
)
def test_nvidia_smi_product_names_map_to_the_table(product, name):
    gpu = gpus.from_smi(product)
    assert gpu is not None and gpu.name == name
    assert gpus.from_smi("Tesla T4") is None


def test_cluster_gpu_sets_the_memory_the_memory_plan_reads():
    cfg = load_config(CONFIGS / "tiny-1node.yaml", ["cluster.gpu=h200"])
    assert cfg.cluster.gpu == "H200" and cfg.cluster.gpu_memory_gb == gpus.get("H200").memory_gib
    done = prepare(cfg, environ={})
    assert done.memory is not None and done.memory.gpu_limit == gpus.get("H200").memory_gib
    # the named GPU wins over a stated size (the preset states 80)
    assert load_config(CONFIGS / "tiny-1node.yaml", ["cluster.gpu=A100-40GB"]).cluster.gpu_memory_gb == 40.0
    assert gpu_of(cfg) == (gpus.get("H200"), False)
    assert gpu_of(load_config(CONFIGS / "tiny-1node.yaml"))[1] is True  # assumed


def test_an_unknown_gpu_names_the_key_and_the_known_types():
    with pytest.raises(UserError) as caught:
        load_config(CONFIGS / "tiny-1node.yaml", ["cluster.gpu=V200"])
    assert "cluster.gpu" in caught.value.message and "H100-80GB" in caught.value.message
    result = run_cli("plan", str(CONFIGS / "tiny-1node.yaml"), "cluster.gpu=V200")
    assert result.returncode == 2 and "unknown GPU 'V200'" in result.stderr and "Traceback" not in result.stderr


# ---------------------------------------------------------------- the model's sense


def test_longer_generation_more_samples_and_a_bigger_model_cost_more():
    base = est().step_s
    assert est("tiny-1node", "data.generate_max_len=2048").step_s > base
    assert est("tiny-1node", "train.n_samples_per_prompt=4").step_s > base
    bigger = [
        "models.actor=meta-llama/Llama-2-13b-hf",
        "models.reward=meta-llama/Llama-2-13b-hf",
    ]
    assert (
        est("tiny-1node", *bigger).step_s
        > est("tiny-1node", "models.actor=meta-llama/Llama-2-7b-hf", "models.reward=meta-llama/Llama-2-7b-hf").step_s
    )


def test_each_phase_grows_with_the_model():
    small = est("tiny-1node", "models.actor=meta-llama/Llama-2-7b-hf", "models.reward=meta-llama/Llama-2-7b-hf").phases_s
    large = est("tiny-1node", "models.actor=meta-llama/Llama-2-13b-hf", "models.reward=meta-llama/Llama-2-13b-hf").phases_s
    for phase in PHASES:
        assert large[phase] > small[phase], phase


def test_more_engines_lower_generation_until_another_phase_dominates():
    runs = []
    long = ("cluster.nodes=8", "data.generate_max_len=4096", "train.n_samples_per_prompt=8")
    long += ("placement.actor.gpus_per_node=8", "placement.critic.gpus_per_node=8")
    for engines in (1, 2, 4, 8, 16, 32, 48):
        runs.append(est("tiny-1node", *long, f"placement.vllm.engines={engines}"))
    generate = [e.phases_s["generate"] for e in runs]
    steps = [e.step_s for e in runs]
    assert generate == sorted(generate, reverse=True) and generate[0] > 2 * generate[-1]
    assert steps == sorted(steps, reverse=True)
    assert runs[0].bottleneck == "generate" and runs[-1].bottleneck != "generate"
    # once another phase dominates, more engines buy little
    assert steps[-2] - steps[-1] < 0.2 * (steps[0] - steps[1])


def test_the_kv_cache_limits_a_small_vllm_share():
    roomy = est("llama70b-4node")
    tight = est("llama70b-4node", "placement.vllm.gpu_memory_utilization=0.5")
    assert tight.phases_s["generate"] > roomy.phases_s["generate"]
    assert any(limit.startswith("KV cache") for limit in tight.limits)


def test_a_faster_gpu_lowers_every_phase():
    slow = est("tiny-1node", "cluster.gpu=A100-80GB").phases_s
    fast = est("tiny-1node", "cluster.gpu=H100-80GB").phases_s
    assert all(fast[p] < slow[p] for p in PHASES)


def test_async_training_overlaps_generation_with_training():
    sync = est("tiny-1node")
    overlapped = est("tiny-1node", "train.async_train=true")
    assert overlapped.overlapped and not sync.overlapped
    p = overlapped.phases_s
    assert overlapped.step_s == pytest.approx(max(p["generate"], p["make_experience"] + p["train"]) + p["weight_sync"])
    assert overlapped.step_s < sync.step_s


def test_colocated_models_run_one_after_another():
    separate = est("tiny-1node", "placement.colocate=[]", "cluster.nodes=2")
    shared = est("tiny-1node")
    assert shared.phases_s["make_experience"] > separate.phases_s["make_experience"]


def test_zero3_across_nodes_pays_the_inter_node_link():
    """Gathers overlap compute (max of the two): spanning nodes costs time once the weight traffic
    over the slower link exceeds the compute, as on H100s with short micro batches."""
    fast = ("cluster.gpu=H100-80GB", "data.prompt_max_len=256", "data.generate_max_len=256")
    one_node = est("llama70b-4node", *fast, "placement.actor.gpus_per_node=8", "placement.actor.nodes=1")
    two_nodes = est("llama70b-4node", *fast, "placement.actor.gpus_per_node=4", "placement.actor.nodes=2")
    assert two_nodes.parts_s["train.actor"] > one_node.parts_s["train.actor"]


def test_constants_are_data_the_calibration_can_change():
    done = launch()
    slower = with_constants(DEFAULT, decode_efficiency=DEFAULT.decode_efficiency / 2)
    base = estimate_step(done.cfg, done.plan, settings=done.settings)
    halved = estimate_step(done.cfg, done.plan, settings=done.settings, constants=slower)
    assert base is not None and halved is not None
    assert halved.phases_s["generate"] > base.phases_s["generate"]
    assert halved.phases_s["train"] == base.phases_s["train"]


def test_unknown_model_size_means_no_estimate():
    done = launch("tiny-1node", "models.actor=/nowhere/custom-model")
    assert done.estimate is None and done.as_json()["estimate"] is None


# ---------------------------------------------------------------- steps and the run


def test_the_run_counts_the_steps_progress_counts():
    cfg = load_config(CONFIGS / "llama70b-4node.yaml")
    t = cfg.train
    expected = total_steps(100000, t.rollout_batch_size, 1, t.train_batch_size, 1, 1, "0.11.2").global_steps
    assert planned_steps(cfg, "0.11.2") == expected == est("llama70b-4node").steps
    e = est("llama70b-4node")
    assert e.run_h == pytest.approx(e.steps * e.step_s / 3600)
    assert e.gpu_hours == pytest.approx(e.run_h * 32)
    assert e.low_h < e.run_h < e.high_h


def test_plan_json_carries_the_estimate():
    result = run_cli("plan", str(CONFIGS / "llama70b-4node.yaml"), "--json")
    data = json.loads(result.stdout)["estimate"]
    assert set(data) >= {"step_s", "phases_s", "steps", "run_h", "gpu_hours", "low_h", "high_h", "assumptions"}
    assert set(data["phases_s"]) == set(PHASES)
    assert data["step_s"] == pytest.approx(sum(data["phases_s"].values()), abs=0.3)
    assert any("A100-80GB" in a and "assumed" in a for a in data["assumptions"])


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_plan_prints_step_time_run_hours_and_gpu_hours(preset):
    result = run_cli("plan", str(CONFIGS / f"{preset}.yaml"))
    text = result.stdout
    block = text[text.index("estimate per step") :]
    assert "step " in block and " h" in block and "GPU-hours" in block
    cfg = load_config(CONFIGS / f"{preset}.yaml")
    if cfg.data.max_samples:
        assert " steps, " in block


def test_releases_before_batched_generation_generate_slower():
    """Before 0.5.0 each actor rank sent micro_rollout_batch_size prompts per generate call;
    0.5.0-0.5.7 one call per rank, served in turn; since 0.5.8 one batch per engine."""
    done = launch()
    times = {}
    for release in ("0.4.6", "0.5.2", "0.11.2"):
        e = estimate_step(done.cfg, done.plan, settings=done.settings, version=release)
        assert e is not None
        times[release] = e.phases_s["generate"]
    assert times["0.4.6"] > times["0.5.2"] >= times["0.11.2"]


def test_the_long_tail_bounds_generation_however_many_engines():
    """A generate call lasts at least its longest sample's decode steps."""
    many = est("tiny-1node", "cluster.nodes=8", "placement.vllm.engines=56", "data.generate_max_len=8192")
    longest_floor = 8192 * DEFAULT.decode_step_s
    assert many.parts_s["generate.decode"] >= longest_floor
    assert any(limit.startswith("long tail") for limit in many.limits)


def test_a_short_label_says_what_limits_the_step():
    assert est("tiny-1node").limited_by == "train"
    tail = est(
        "tiny-1node",
        "data.generate_max_len=8192",
        "cluster.nodes=3",
        "placement.vllm.engines=1",
        "placement.actor.gpus_per_node=8",
        "placement.critic.gpus_per_node=8",
    )
    assert tail.limited_by.startswith("generate (")
    assert tail.as_json()["limited_by"] == tail.limited_by
