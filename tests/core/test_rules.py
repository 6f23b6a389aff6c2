"""OpenRLHF's startup rules and ours, each seen failing and passing."""

from __future__ import annotations

import pytest

from rlhf_launch.core.config import validate
from rlhf_launch.core.launch import prepare


def cfg(**sections):
    data = {
        "name": "t",
        "cluster": {"nodes": 4, "gpus_per_node": 8},
        "models": {"actor": "a", "reward": "rm"},
        "data": {"prompt_dataset": "p"},
        "placement": {
            "actor": {"nodes": 1, "gpus_per_node": 8},
            "critic": {"nodes": 1, "gpus_per_node": 8},
            "ref": {"nodes": 1, "gpus_per_node": 4},
            "reward": {"nodes": 1, "gpus_per_node": 4},
            "vllm": {"engines": 2, "tensor_parallel_size": 4},
        },
    }
    for name, value in sections.items():
        data[name] = {**data.get(name, {}), **value}
    return validate(data)


def findings(c, version="0.11.2", **kw):
    return prepare(c, version=version, environ={}, **kw).findings


def keyed(fs, level="error"):
    return {f.key: f for f in fs if f.level == level}


def test_fitting_layout_has_no_errors():
    assert keyed(findings(cfg())) == {}


def test_published_40_gpu_layout_names_the_sum():
    c = cfg(
        placement={
            "ref": {"nodes": 1, "gpus_per_node": 8},
            "reward": {"nodes": 1, "gpus_per_node": 8},
            "actor": {"nodes": 1, "gpus_per_node": 8},
            "critic": {"nodes": 1, "gpus_per_node": 8},
            "vllm": {"engines": 2, "tensor_parallel_size": 4},
        }
    )
    err = keyed(findings(c))["placement"]
    assert "needs 40 GPUs (actor 8 + critic 8 + ref 8 + reward 8 + vLLM 2x4) but the cluster has 32" in err.message


def test_required_models_and_data():
    c = validate({"name": "t", "models": {}, "placement": {"vllm": {"engines": 1}}})
    errs = keyed(findings(c))
    assert {"models.actor", "data.prompt_dataset", "models.reward"} <= set(errs)
    remote = validate({"name": "t", "models": {"actor": "a", "reward_remote_url": "http://x"}, "data": {"prompt_dataset": "p"}})
    assert "models.reward" not in keyed(findings(remote))


def test_colocated_actor_ref_must_match():
    c = cfg(placement={"colocate": ["actor_ref"], "ref": {"nodes": 1, "gpus_per_node": 4}})
    assert "actor 1x8, ref 1x4" in keyed(findings(c))["placement.ref"].message
    off = cfg(placement={"colocate": ["actor_ref"], "ref": {"nodes": 1, "gpus_per_node": 4}}, train={"init_kl_coef": 0})
    assert "placement.ref" not in keyed(findings(off))  # OpenRLHF only asserts when ref exists


def test_colocated_critic_reward_must_match():
    c = cfg(placement={"colocate": ["critic_reward"]})
    assert "critic 1x8, reward 1x4" in keyed(findings(c))["placement.reward"].message


def test_colocate_all_needs_vllm_gpus_equal_actor_gpus():
    c = cfg(
        placement={
            "colocate": ["all"],
            "ref": {},
            "reward": {},
            "critic": {},
            "vllm": {"engines": 1, "tensor_parallel_size": 4, "enable_sleep": True},
        },
        deepspeed={"enable_sleep": True},
    )
    c = c.model_copy(
        update={
            "placement": c.placement.model_copy(
                update={
                    "ref": c.placement.ref.model_copy(update={"nodes": None, "gpus_per_node": None}),
                    "reward": c.placement.reward.model_copy(update={"nodes": None, "gpus_per_node": None}),
                    "critic": c.placement.critic.model_copy(update={"nodes": None, "gpus_per_node": None}),
                }
            )
        }
    )
    err = keyed(findings(c))["placement.vllm"]
    assert "1x4 = 4, actor 8" in err.message
    ok = c.model_copy(update={"placement": c.placement.model_copy(update={"vllm": c.placement.vllm.model_copy(update={"engines": 2})})})
    assert keyed(findings(ok)) == {}


def test_colocate_all_roles_must_match_actor():
    c = cfg(placement={"colocate": ["all"], "vllm": {"engines": 2, "tensor_parallel_size": 4}})
    errs = keyed(findings(c))
    # OpenRLHF asserts ref == actor; a smaller critic or reward takes the first bundles of the actor's group
    assert "placement.ref" in errs and "placement.reward" not in errs and errs["placement.ref"].reason == ""
    larger = cfg(placement={"colocate": ["all"], "ref": {"nodes": 1, "gpus_per_node": 8}, "reward": {"nodes": 2, "gpus_per_node": 8}})
    err = keyed(findings(larger))["placement.reward"]
    assert "cannot have more" in err.message and err.reason == "placement"


def test_packing_needs_vllm():
    c = cfg(deepspeed={"packing_samples": True}, placement={"vllm": {"engines": 0}})
    assert "only with vLLM" in keyed(findings(c))["deepspeed.packing_samples"].message


def test_group_estimators_need_several_samples_per_release():
    c = cfg(train={"advantage_estimator": "dr_grpo", "n_samples_per_prompt": 1})
    assert "train.n_samples_per_prompt" in keyed(findings(c, "0.11.2"))
    # 0.8.11 accepts dr_grpo with one sample (a silent no-op): a warning, not its error
    assert "train.n_samples_per_prompt" not in keyed(findings(c, "0.8.11"))
    assert "refuses it" in keyed(findings(c, "0.8.11"), "warning")["train.n_samples_per_prompt"].message
    # an estimator the release does not have at all
    newer = cfg(train={"advantage_estimator": "flash_reinforce"})
    assert "flash_reinforce" in keyed(findings(newer, "0.10.1"))["train.advantage_estimator"].message
    assert "train.advantage_estimator" not in keyed(findings(newer, "0.11.2"))
    ok = cfg(train={"advantage_estimator": "rloo", "n_samples_per_prompt": 4, "rollout_batch_size": 256})
    assert keyed(findings(ok, "0.8.11")) == {}


def test_sample_batches_must_cover_actor_processes():
    c = cfg(train={"rollout_batch_size": 8, "micro_rollout_batch_size": 4, "train_batch_size": 8, "micro_train_batch_size": 1})
    err = keyed(findings(c))["train.rollout_batch_size"]
    assert "2 sample batches, fewer than the 8 actor processes" in err.message
    # ring attention divides the actor processes, as OpenRLHF's assert does
    ring = cfg(
        train={"rollout_batch_size": 8, "micro_rollout_batch_size": 4, "train_batch_size": 8},
        extra_args={"ds.ring_attn_size": 4},
        deepspeed={"packing_samples": True},
    )
    assert "train.rollout_batch_size" not in keyed(findings(ring))


def test_batch_divisibility():
    c = cfg(train={"train_batch_size": 100, "micro_train_batch_size": 2})
    assert "2 x 8 = 16" in keyed(findings(c))["train.train_batch_size"].message
    c = cfg(train={"rollout_batch_size": 1022, "micro_rollout_batch_size": 4})
    # OpenRLHF runs it: the last micro batch is shorter
    assert "train.micro_rollout_batch_size" not in keyed(findings(c))
    assert "not divisible" in keyed(findings(c), "warning")["train.micro_rollout_batch_size"].message


def test_tensor_parallel_must_divide_and_fit_a_node():
    # OpenRLHF runs engines that span nodes (slower): warnings, not errors
    c = cfg(placement={"vllm": {"engines": 1, "tensor_parallel_size": 16}})
    assert "placement.vllm.tensor_parallel_size" not in keyed(findings(c))
    assert "does not fit on one node" in keyed(findings(c), "warning")["placement.vllm.tensor_parallel_size"].message
    c = cfg(placement={"vllm": {"engines": 2, "tensor_parallel_size": 3}})
    assert "does not divide" in keyed(findings(c), "warning")["placement.vllm.tensor_parallel_size"].message


@pytest.mark.parametrize(
    "actor,tp,words,working",
    [
        # vLLM: "Total number of attention heads (32) must be divisible by tensor parallel size (3)"
        (
            "meta-llama/Meta-Llama-3-8B",
            3,
            ["32 attention heads", "8 KV heads", "divisible by the tensor parallel size (3)"],
            "1, 2, 4 or 8",
        ),
        ("Qwen/Qwen2.5-7B-Instruct", 7, ["28 attention heads", "4 KV heads", "not a multiple of the 4 KV heads"], "1, 2 or 4"),
    ],
)
def test_vllm_tensor_parallel_must_divide_the_models_heads(actor, tp, words, working):
    c = cfg(models={"actor": actor}, placement={"vllm": {"engines": 1, "tensor_parallel_size": tp}})
    err = keyed(findings(c))["placement.vllm.tensor_parallel_size"]
    for word in words:
        assert word in err.message, err.message
    assert err.hint.endswith(working) and err.reason
    ok = cfg(models={"actor": actor}, placement={"vllm": {"engines": 1, "tensor_parallel_size": int(working[0])}})
    assert "placement.vllm.tensor_parallel_size" not in keyed(findings(ok))


def test_vllm_heads_come_from_a_local_config_json_or_the_shape_keys(tmp_path):
    import json

    (tmp_path / "config.json").write_text(
        json.dumps(
            {"num_hidden_layers": 2, "hidden_size": 640, "intermediate_size": 1024, "num_attention_heads": 10, "num_key_value_heads": 2}
            | {"vocab_size": 1000}
        )
    )
    local = cfg(models={"actor": str(tmp_path)}, placement={"vllm": {"engines": 1, "tensor_parallel_size": 4}})
    err = keyed(findings(local))["placement.vllm.tensor_parallel_size"]
    assert "10 attention heads" in err.message and "config.json" in err.message and err.hint.endswith("1 or 2")
    by_keys = cfg(
        models={"actor": "org/unknown", "heads": 12, "kv_heads": 4}, placement={"vllm": {"engines": 1, "tensor_parallel_size": 8}}
    )
    assert "12 attention heads" in keyed(findings(by_keys))["placement.vllm.tensor_parallel_size"].message
    unknown = cfg(models={"actor": "org/unknown"}, placement={"vllm": {"engines": 1, "tensor_parallel_size": 3}})
    assert "placement.vllm.tensor_parallel_size" not in keyed(findings(unknown))  # unknown shape: no guess


def test_vllm_sleep_without_colocate_all_is_switched_off_by_openrlhf():
    c = cfg(placement={"vllm": {"engines": 2, "tensor_parallel_size": 4, "enable_sleep": True}})
    assert "placement.vllm.enable_sleep" in keyed(findings(c), "warning")


def test_relative_checkpoint_path_on_several_nodes_warns():
    c = cfg(checkpoint={"save_steps": 10, "ckpt_path": "./ckpt"})
    assert "every node shares" in keyed(findings(c), "warning")["checkpoint.ckpt_path"].message
    c = cfg(checkpoint={"save_steps": 10, "ckpt_path": "/shared/ckpt"})
    assert "checkpoint.ckpt_path" not in keyed(findings(c), "warning")


def test_idle_gpus_warn():
    c = cfg(cluster={"nodes": 8})
    assert "uses 32 of the cluster's 64 GPUs" in keyed(findings(c), "warning")["placement"].message


@pytest.mark.parametrize("version", ["0.8.11", "0.11.2"])
def test_wandb_project_without_key_warns(version):
    c = cfg(logging={"wandb": {"project": "p"}})
    assert "logging.wandb.project" in keyed(findings(c, version), "warning")
    with_key = prepare(c, version=version, environ={"WANDB_API_KEY": "k" * 40}).findings
    assert "logging.wandb.project" not in keyed(with_key, "warning")


def test_the_last_guard_refuses_any_flag_the_target_release_lacks_naming_the_releases_that_have_it():
    """issue 32: whatever let it through (a rename, an abbreviation), a flag of another era in
    the argv is refused, since the release's parser refuses any name it does not have."""
    from rlhf_launch.core.flags import _foreign
    from rlhf_launch.openrlhf.flagset import load

    flags = load("0.8.11")
    found = _foreign(["--pretrain", "x", "--algo.advantage.is_correction_level", "token", "--vllm_is_truncated_threshold", "2"], flags, [])
    assert len(found) == 1 and found[0].level == "error"
    assert "--algo.advantage.is_correction_level" in found[0].message and "0.11.2" in found[0].message
    said = [*found]  # an error that names the flag already: not said twice
    assert _foreign(["--algo.advantage.is_correction_level", "token"], flags, said) == []
