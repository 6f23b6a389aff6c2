"""The memory estimate, held to published figures rather than to its own output."""

from __future__ import annotations

import json

import pytest

from rlhf_launch.core.config import load_config, validate
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.memory import GIB, TRANSIENT, activations, estimate, model_states
from rlhf_launch.core.plan import build_plan
from rlhf_launch.core.shapes import KNOWN, lookup

from conftest import CONFIGS, PRESETS, run_cli

P = 70e9
LARGEST = 8192 * 32000


def deepspeed_zero3_estimate(
    total_params,
    largest_layer_params,
    num_gpus_per_node,
    num_nodes,
    cpu_offload,
    cpu_offload_params,
    zero_init=True,
    additional_buffer_factor=1.5,
):
    """DeepSpeed's estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py), as published."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def test_mixed_precision_adam_is_16_bytes_per_param_unpartitioned():
    gpu, host = model_states(P, LARGEST, stage=0, world=8, offload=False)
    assert gpu["params"] + gpu["grads"] + gpu["optimizer"] == 16 * P
    assert host == {}


@pytest.mark.parametrize("stage,expected", [(1, 2 + 2 + 12 / 8), (2, 2 + (2 + 12) / 8), (3, 16 / 8)])
def test_zero_stages_partition_as_in_the_zero_paper(stage, expected):
    gpu, _ = model_states(P, LARGEST, stage=stage, world=8, offload=False)
    states = gpu["params"] + gpu["grads"] + gpu["optimizer"]
    assert states == pytest.approx(expected * P)


@pytest.mark.parametrize("nodes,gpus", [(1, 8), (2, 8), (4, 4)])
def test_zero3_matches_deepspeeds_own_estimator(nodes, gpus):
    world = nodes * gpus
    _, ds_gpu = deepspeed_zero3_estimate(P, LARGEST, gpus, nodes, cpu_offload=False, cpu_offload_params=False)
    gpu, _ = model_states(P, LARGEST, stage=3, world=world, offload=False)
    assert sum(gpu.values()) == pytest.approx(ds_gpu, rel=1e-9)
    ds_cpu, ds_gpu = deepspeed_zero3_estimate(
        P, LARGEST, gpus, nodes, cpu_offload=True, cpu_offload_params=False, additional_buffer_factor=1.0
    )
    gpu, host = model_states(P, LARGEST, stage=3, world=world, offload=True)
    assert sum(gpu.values()) == pytest.approx(ds_gpu, rel=1e-9)
    assert sum(host.values()) * gpus == pytest.approx(ds_cpu, rel=1e-9)  # per node: ranks on it x per rank


ACTOR_ONLY = {
    "name": "t",
    "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory_gb": 80, "host_memory_gb": 2048},
    "models": {"actor": "meta-llama/Llama-2-70b-chat-hf", "reward_remote_url": "http://rm"},
    "data": {"prompt_dataset": "p"},
    "placement": {"actor": {"nodes": 1, "gpus_per_node": 8}},
    "deepspeed": {"zero_stage": 3, "gradient_checkpointing": True},
    "train": {"init_kl_coef": 0, "advantage_estimator": "reinforce", "train_batch_size": 128},
}


def test_70b_actor_on_8_gpus_needs_optimizer_offload_and_about_840gb_host():
    without = estimate(validate(ACTOR_ONLY), build_plan(validate(ACTOR_ONLY)))
    err = next(f for f in without.findings if f.level == "error")
    assert err.key == "placement.actor" and "GiB per GPU but a GPU has 80" in err.message
    assert "adam_offload" in err.hint
    data = {**ACTOR_ONLY, "deepspeed": {**ACTOR_ONLY["deepspeed"], "adam_offload": True}}
    cfg = validate(data)
    report = estimate(cfg, build_plan(cfg))
    assert [f for f in report.findings if f.level == "error"] == []
    actor = next(r for r in report.roles if r.role == "actor")
    assert actor.gpu < 80 * 0.9
    optimizer_gb = actor.host_parts["optimizer"] * 8 * GIB / 1e9  # 8 ranks on the node, in GB
    assert optimizer_gb == pytest.approx(840, rel=0.05)  # OpenRLHF maintainers: 840 GB per 70B node
    node_total_gb = report.host_per_node["node0"] * GIB / 1e9
    assert 840 <= node_total_gb <= 2 * 840


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_fits_with_headroom(preset):
    launch = prepare(load_config(CONFIGS / f"{preset}.yaml"), environ={})
    report = launch.memory
    assert report.roles, "no estimate"
    assert [f for f in report.findings] == [], report.findings
    for group in report.groups:
        assert group.peak <= 0.9 * report.gpu_limit, (group.name, group.peak)
    assert max(report.host_per_node.values()) <= 0.9 * report.host_limit


@pytest.mark.parametrize(
    "key,published_billion",
    [
        ("llama-2-7b", 6.74),
        ("llama-2-13b", 13.0),
        ("llama-2-70b", 68.98),
        ("llama-3-8b", 8.03),
        ("llama-3-70b", 70.55),
        ("qwen2.5-7b", 7.62),
        ("qwen2.5-72b", 72.7),
    ],
)
def test_built_in_shapes_have_the_published_parameter_counts(key, published_billion):
    assert KNOWN[key].params / 1e9 == pytest.approx(published_billion, rel=0.01)


def test_shapes_from_names_local_config_or_nothing(tmp_path):
    assert lookup("meta-llama/Meta-Llama-3-70B-Instruct")[0].name == "Llama-3-70B"
    assert lookup("/mnt/models/llama-2-70b-rm")[0].name == "Llama-2-70B"
    assert lookup("OpenRLHF/Llama-3-8b-rm-mixture")[0].name == "Llama-3-8B"
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "vocab_size": 100,
            }
        )
    )
    shape, source = lookup(str(tmp_path))
    assert shape.layers == 2 and shape.kv_heads == 2 and source.endswith("config.json")
    assert lookup("someone/mystery-model")[0] is None


def test_unknown_shape_is_a_warning_not_a_guess():
    data = {**ACTOR_ONLY, "models": {"actor": "someone/mystery-model", "reward_remote_url": "http://rm"}}
    report = estimate(validate(data), build_plan(validate(data)))
    assert report.roles == []
    assert any(f.level == "warning" and f.key == "models.actor" for f in report.findings)
    explicit = {
        **data,
        "models": {**data["models"], "layers": 80, "hidden": 8192, "intermediate": 28672, "heads": 64, "kv_heads": 8, "vocab": 32000},
    }
    report = estimate(validate(explicit), build_plan(validate(explicit)))
    assert report.roles and report.roles[0].shape == "config"


def test_activations_follow_checkpointing_and_flash_attention():
    shape = KNOWN["llama-2-70b"]
    full = activations(shape, 1, 2048, checkpointing=False, flash=True)
    ckpt = activations(shape, 1, 2048, checkpointing=True, flash=True)
    no_flash = activations(shape, 1, 2048, checkpointing=False, flash=False)
    assert full == 34 * 2048 * 8192 * 80  # Korthikanti et al.: 34 s b h per layer without the s^2 term
    assert no_flash == pytest.approx(2048 * 8192 * 80 * (34 + 5 * 64 * 2048 / 8192))
    assert ckpt < full / 10


def test_vllm_kv_budget_warns_and_errors():
    base = load_config(CONFIGS / "llama70b-4node.yaml", ["train.micro_rollout_batch_size=64"])
    tp2 = prepare(
        base.model_copy(
            update={
                "placement": base.placement.model_copy(
                    update={
                        "vllm": base.placement.vllm.model_copy(
                            update={"tensor_parallel_size": 2, "engines": 4, "gpu_memory_utilization": 0.95}
                        )
                    }
                )
            }
        ),
        environ={},
    )
    assert any(f.key == "placement.vllm" and "fewer than micro_rollout_batch_size" in f.message for f in tp2.findings)
    tp1 = prepare(
        base.model_copy(
            update={
                "placement": base.placement.model_copy(
                    update={"vllm": base.placement.vllm.model_copy(update={"tensor_parallel_size": 1, "engines": 8})}
                )
            }
        ),
        environ={},
    )
    assert any(f.level == "error" and f.key == "placement.vllm.gpu_memory_utilization" for f in tp1.findings)


def test_sleep_lowers_the_colocated_peak():
    hybrid = load_config(CONFIGS / "llama70b-2node-hybrid.yaml")
    asleep = prepare(hybrid, environ={}).memory.groups[0]
    awake_cfg = hybrid.model_copy(
        update={
            "deepspeed": hybrid.deepspeed.model_copy(update={"enable_sleep": False}),
            "placement": hybrid.placement.model_copy(update={"vllm": hybrid.placement.vllm.model_copy(update={"enable_sleep": False})}),
        }
    )
    report = prepare(awake_cfg, environ={}).memory
    awake = report.groups[0]
    assert set(asleep.roles) == {"actor", "critic", "ref", "reward", "vllm"}
    assert asleep.peak < awake.peak
    # awake, every model's weights and states stay in every phase; only working sets come and go
    resident = sum(r.gpu - sum(v for k, v in r.parts.items() if k in TRANSIENT) for r in report.roles)
    assert min(awake.phases.values()) >= resident - 1e-6
    assert asleep.phases["train"] < asleep.phases["generate"]


def test_colocated_roles_add_their_working_sets_one_phase_at_a_time():
    """actor+ref on the same GPUs: ref's forward pass (make experience) and the actor's
    training never run at once, so the peak is the larger phase, not their sum."""
    cfg = load_config(CONFIGS / "tiny-1node.yaml")
    report = prepare(cfg, environ={}).memory
    group = report.group_of("actor")
    actor, ref = (next(r for r in report.roles if r.role == name) for name in ("actor", "ref"))
    assert set(group.phases) == {"experience", "train"}
    assert group.peak < actor.gpu + ref.gpu
    transient = lambda r: sum(v for k, v in r.parts.items() if k in TRANSIENT)  # noqa: E731
    assert group.phases["train"] == pytest.approx(actor.gpu + ref.gpu - transient(ref))
    assert group.phases["experience"] == pytest.approx(actor.gpu - transient(actor) + ref.gpu)


def test_plan_json_has_the_memory_list():
    done = run_cli("plan", "llama70b-4node", "--json")
    memory = json.loads(done.stdout)["memory"]
    assert {m["role"] for m in memory} == {"actor", "critic", "ref", "reward", "vllm"}
    for m in memory:
        assert {"role", "gpu_gib_peak", "gpu_gib_limit", "host_gib_per_node", "parts"} <= set(m)
        assert m["gpu_gib_limit"] == 80
    text = run_cli("plan", "llama70b-4node").stdout
    assert "memory per GPU (GiB, of 80)" in text and "host RAM per node" in text


def test_a_colocated_memory_error_names_vllms_share_and_the_assumed_gpu_size():
    """The GPU size is an assumption unless the config states it: the fix list says so, and
    names the vLLM share that colocation stacks the other models on."""
    data = load_config(CONFIGS / "llama70b-2node-hybrid.yaml").model_dump()
    data["placement"]["vllm"].update(enable_sleep=False, gpu_memory_utilization=0.9)
    stated = prepare(validate(data), environ={})
    del data["cluster"]["gpu_memory_gb"]
    assumed = prepare(validate(data), environ={})
    (a,) = [f for f in assumed.findings if f.reason == "memory"]
    (s,) = [f for f in stated.findings if f.reason == "memory"]
    assert "placement.vllm.gpu_memory_utilization (vLLM takes 0.9 of each GPU)" in a.hint
    assert "set cluster.gpu_memory_gb" in a.hint and "set cluster.gpu_memory_gb" not in s.hint
