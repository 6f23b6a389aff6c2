"""OpenRLHF 0.9-0.11 features as config keys: rendered for every release that has the flag, an
error naming the release where it does not, the trainer's own checks and corrections on them,
files shipped with the job, and the memory they change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhf_launch.core.config import load_config, validate
from rlhf_launch.core.launch import prepare
from rlhf_launch.openrlhf import dialect
from rlhf_launch.openrlhf.checks import CHECKS
from rlhf_launch.openrlhf.flagset import load, supported_versions, version_key

from conftest import CONFIGS, ROOT, run_cli

BASE = {
    "name": "t",
    "cluster": {"nodes": 1, "gpus_per_node": 8},
    "models": {"actor": "org/actor", "reward_remote_url": "http://rm:5000/get_reward"},
    "data": {"prompt_dataset": "org/prompts"},
    "placement": {"actor": {"nodes": 1, "gpus_per_node": 4}, "vllm": {"engines": 2, "tensor_parallel_size": 2}, "colocate": ["actor_ref"]},
    "train": {
        "advantage_estimator": "reinforce_baseline",
        "n_samples_per_prompt": 4,
        "rollout_batch_size": 32,
        "micro_rollout_batch_size": 4,
        "train_batch_size": 64,
        "micro_train_batch_size": 2,
    },
}


def cfg(**sections):
    data = json.loads(json.dumps(BASE))
    for name, value in sections.items():
        data[name] = {**data.get(name, {}), **value} if isinstance(value, dict) else value
    return validate(data)


def launch(c, version="0.11.2"):
    return prepare(c, version=version, environ={})


def errors(result):
    return {f.key: f for f in result.findings if f.level == "error"}


def warnings(result):
    return {f.key: f for f in result.findings if f.level == "warning"}


def value(argv, flag):
    return argv[argv.index(flag) + 1]


# Each feature key with a value, and what its flags look like in each era.
FEATURES = {
    "train.async_train": ({"train": {"async_train": True}}, {"train.async_enable": True, "async_train": True}),
    "train.vllm_generate_batch_size": (
        {"train": {"async_train": True, "vllm_generate_batch_size": 64}},
        {"rollout.vllm_generate_batch_size": "64", "vllm_generate_batch_size": "64"},
    ),
    "train.dynamic_filtering": (
        {"train": {"dynamic_filtering": True, "dynamic_filtering_range": [0.0, 1.0]}},
        {"algo.dynamic_filtering_enable": True, "dynamic_filtering": True},
    ),
    "train.dynamic_batch": (
        {"train": {"dynamic_batch": True, "train_max_tokens_per_gpu": 8192, "rollout_max_tokens_per_gpu": 16384}},
        {"train.max_tokens_per_gpu": "8192", "train_max_tokens_per_gpu": "8192"},
    ),
    "deepspeed.ring_attn_size": ({"deepspeed": {"ring_attn_size": 2}}, {"ds.ring_attn_size": "2", "ring_attn_size": "2"}),
    "deepspeed.tensor_parallel_size": (
        {"deepspeed": {"tensor_parallel_size": 2}},
        {"ds.tensor_parallel_size": "2", "ds_tensor_parallel_size": "2"},
    ),
    "data.eval_dataset": (
        {"data": {"eval_dataset": "org/eval"}, "train": {"eval_steps": 20}},
        {"eval.dataset": "org/eval", "eval_dataset": "org/eval"},
    ),
    "train.partial_rollout": (
        {"train": {"async_train": True, "partial_rollout": True}},
        {"train.partial_rollout_enable": True, "partial_rollout": True},
    ),
    "train.is_correction": (
        {"train": {"is_correction": "tis"}},
        {"algo.advantage.is_correction_level": "token", "algo.advantage.is_correction_enable": True, "enable_vllm_is_correction": True},
    ),
}


@pytest.mark.parametrize("version", supported_versions())
@pytest.mark.parametrize("key", list(FEATURES))
def test_feature_keys_render_where_the_release_has_them(key, version):
    sections, flags = FEATURES[key]
    result = launch(cfg(**sections), version)
    fs = load(version)
    if dialect.spelling_for(key, fs) is None:
        err = errors(result)[key]
        assert f"openrlhf {version} has no flag for {key}" in err.message
        return
    vllm_too_old = key == "train.is_correction" and version in ("0.8.9", "0.8.9.post1")  # pins vllm 0.10.0
    assert result.ok or vllm_too_old, [f for f in result.findings if f.level == "error"]
    present = [flag for flag in flags if flag in fs]
    assert present, (key, version)
    for flag in present:
        expected = flags[flag]
        assert f"--{flag}" in result.argv
        if expected is not True:
            assert value(result.argv, f"--{flag}") == expected
    assert fs.parse(result.argv)  # the release's parser takes it


def test_soft_keys_leave_extra_args_alone_until_set():
    via_extra = launch(cfg(extra_args={"train.async_enable": True}))
    assert via_extra.ok and "--train.async_enable" in via_extra.argv
    assert via_extra.settings is not None and via_extra.settings.async_train
    both = launch(cfg(train={"async_train": True}, extra_args={"train.async_enable": True}))
    assert "train.async_train" in errors(both)["extra_args.train.async_enable"].message


def test_is_correction_schemes_per_era():
    new = launch(cfg(train={"is_correction": "icepop", "is_correction_threshold": [0.5, 5.0]}))
    assert value(new.argv, "--algo.advantage.is_correction_level") == "token"
    assert value(new.argv, "--algo.advantage.is_correction_mode") == "mask"
    mid = launch(cfg(train={"is_correction": "icepop"}), "0.10.2")
    assert "--algo.advantage.is_correction_enable" in mid.argv and value(mid.argv, "--algo.advantage.is_correction_type") == "icepop"
    old = launch(cfg(train={"is_correction": "icepop"}), "0.9.2")  # a switch, TIS only
    assert "cannot express IS correction 'icepop'" in errors(old)["train.is_correction"].message
    assert launch(cfg(train={"is_correction": "tis", "is_correction_threshold": [3.0]}), "0.9.2").findings
    single = launch(cfg(train={"is_correction": "tis", "is_correction_threshold": [0.5, 5.0]}), "0.8.11")
    assert "takes one value in openrlhf 0.8.11" in errors(single)["train.is_correction_threshold"].message


def test_dtype_and_attention_keys_use_each_eras_flags():
    sdpa = cfg(deepspeed={"attn_implementation": "sdpa", "param_dtype": "fp16"})
    new = launch(sdpa)
    assert value(new.argv, "--ds.attn_implementation") == "sdpa" and value(new.argv, "--ds.param_dtype") == "fp16"
    old = launch(sdpa, "0.8.9")
    assert "--bf16" not in old.argv
    assert "only --flash_attn" in errors(old)["deepspeed.attn_implementation"].message


def test_remote_reward_as_urls_or_a_reward_function(tmp_path):
    urls = launch(cfg(models={"reward_remote_url": ["http://a:1/r", "http://b:1/r"]}))
    assert value(urls.argv, "--reward.remote_url") == "http://a:1/r,http://b:1/r"
    assert urls.plan.role("reward").enabled is False

    func = tmp_path / "rules.py"
    func.write_text("def reward_func(queries, prompts, labels, **kwargs):\n    return {'rewards': [0.0] * len(queries)}\n")
    (tmp_path / "cfg.yaml").write_text(
        json.dumps(
            {**BASE, "models": {"actor": "org/actor", "reward_func": "rules.py"}, "data": {"prompt_dataset": "p", "label_key": "answer"}}
        )
    )
    shipped = prepare(load_config(tmp_path / "cfg.yaml"), version="0.8.11", environ={})
    assert shipped.ok, shipped.findings
    assert value(shipped.argv, "--remote_rm_url") == "rules.py" and value(shipped.argv, "--label_key") == "answer"
    assert shipped.spec.runtime_env["working_dir"] == str(tmp_path)  # the file's directory ships with the job

    func.write_text("def score(queries):\n    return 0\n")
    wrong = prepare(load_config(tmp_path / "cfg.yaml"), environ={})
    err = errors(wrong)["models.reward_func"]
    assert "does not define reward_func" in err.message and err.reason == "trainer_init"
    func.unlink()
    missing = prepare(load_config(tmp_path / "cfg.yaml"), environ={})
    assert "not found" in errors(missing)["models.reward_func"].message

    func.write_text("def reward_func(:\n")
    broken = prepare(load_config(tmp_path / "cfg.yaml"), environ={})
    assert "not valid Python" in errors(broken)["models.reward_func"].message

    func.write_text("def reward_func(q, p, l):\n    return {}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = load_config(tmp_path / "cfg.yaml", [f"runtime_env.working_dir={elsewhere}"])
    assert "would not ship with the job" in errors(prepare(outside, environ={}))["models.reward_func"].message

    with pytest.raises(Exception, match="both set"):
        validate({**BASE, "models": {"actor": "a", "reward_remote_url": "http://x", "reward_func": str(func)}})


def test_a_reward_function_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    func = tmp_path / "rules.py"
    func.write_text(f"open({str(marker)!r}, 'w').close()\n\ndef reward_func(q, p, l):\n    return {{}}\n")
    result = launch(cfg(models={"reward_remote_url": None, "reward_func": str(func)}))
    assert result.ok and not marker.exists()


def test_agent_function_ships_and_replaces_the_reward(tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text("class AgentExecutor:\n    pass\n")
    result = launch(cfg(models={"reward_remote_url": None, "reward": "org/rm", "agent_func": str(agent)}))
    assert result.ok, result.findings
    assert value(result.argv, "--train.agent_func_path") == "agent.py"
    assert result.plan.role("reward").enabled is False
    assert "org/rm is not used" in warnings(result)["models.agent_func"].message


def test_corrections_are_warnings_that_say_what_the_trainer_does():
    ring = launch(cfg(deepspeed={"ring_attn_size": 2}))
    assert "switches packing_samples on" in warnings(ring)["deepspeed.ring_attn_size"].message
    assert ring.settings is not None and ring.settings.packing
    critic = launch(cfg(models={"critic": "org/critic"}))
    assert "critic org/critic is dropped" in warnings(critic)["models.critic"].message
    template = launch(cfg(extra_args={"data.input_template": "Q: A:"}))
    assert "is dropped" in warnings(template)["extra_args.data.input_template"].message
    eager = launch(cfg(deepspeed={"packing_samples": True, "flash_attn": False}))
    assert "from eager to flash_attention_2" in warnings(eager)["deepspeed.flash_attn"].message


def test_checks_on_feature_keys_name_the_key():
    assert "needs async" in errors(launch(cfg(train={"partial_rollout": True})))["train.partial_rollout"].message
    assert "needs async" in errors(launch(cfg(train={"vllm_generate_batch_size": 64})))["train.vllm_generate_batch_size"].message
    no_remote = cfg(models={"reward_remote_url": None, "reward": "org/rm"}, data={"prompt_dataset": "p", "eval_dataset": "e"})
    assert "remote reward" in errors(launch(no_remote))["data.eval_dataset"].message
    backwards = launch(cfg(train={"dynamic_filtering": True, "dynamic_filtering_range": [1.0, 0.0]}))
    assert "increasing reward range" in errors(backwards)["train.dynamic_filtering_range"].message
    fp16 = launch(cfg(deepspeed={"tensor_parallel_size": 2, "bf16": False}))
    assert "needs bf16" in errors(fp16)["deepspeed.tensor_parallel_size"].message
    no_vllm = launch(cfg(placement={"vllm": {"engines": 0}}), "0.10.2")
    assert "without vLLM engines" in errors(no_vllm)["placement.vllm.engines"].message
    assert "placement.vllm.engines" not in errors(launch(cfg(placement={"vllm": {"engines": 0}}), "0.11.0"))


def test_async_colocate_all_gets_no_sleep_advice_it_would_refuse():
    async_all = cfg(placement={"colocate": ["all"], "ref": {}}, train={"async_train": True})
    result = launch(async_all)
    assert "placement.vllm.enable_sleep" not in warnings(result) and result.ok
    slept = launch(
        cfg(
            placement={"colocate": ["all"], "vllm": {"engines": 2, "tensor_parallel_size": 2, "enable_sleep": True}},
            train={"async_train": True},
        )
    )
    assert "does not support vLLM sleep" in errors(slept)["placement.vllm.enable_sleep"].message


def test_deepspeed_checks_the_batch_of_every_model_group():
    separate = {"colocate": [], "ref": {"nodes": 1, "gpus_per_node": 3}, "reward": {"nodes": 1, "gpus_per_node": 3}}
    result = launch(cfg(models={"reward_remote_url": None, "reward": "org/rm"}, placement=separate, train={"train_batch_size": 64}))
    for role in ("ref", "reward"):
        err = errors(result)[f"placement.{role}"]
        assert "2 x 3 = 6" in err.message and err.reason == "deepspeed_batch"
    dynamic = launch(cfg(train={"train_batch_size": 60, "dynamic_batch": True}))
    assert "train.train_batch_size" not in errors(dynamic)  # the trained models take micro = grad-accum = 1


def test_memory_follows_token_budgets_and_ring_attention():
    qwen = {"actor": "Qwen/Qwen3-8B", "reward_remote_url": "http://rm"}
    long = {"prompt_dataset": "p", "prompt_max_len": 2048, "generate_max_len": 63488}
    sections = {
        "models": qwen,
        "data": long,
        "deepspeed": {"zero_stage": 3, "gradient_checkpointing": True, "adam_offload": True},
        # 64 GB GPUs: the budgets fit, one max_len sequence in training would not
        "cluster": {"nodes": 1, "gpus_per_node": 8, "host_memory_gb": 1024, "gpu_memory_gb": 64},
    }
    padded = launch(cfg(**sections))
    assert any(f.reason == "memory" for f in padded.findings if f.level == "error")
    budget = cfg(**sections, train={"dynamic_batch": True, "train_max_tokens_per_gpu": 8192, "rollout_max_tokens_per_gpu": 8192})
    planned = launch(budget)
    actor = next(r for r in planned.memory.roles if r.role == "actor")
    assert actor.parts["logits"] == pytest.approx(8192 * 151936 * 10 / 1024**3)  # fp32 logits, their fp32 gradient, its bf16 cast
    ring = launch(budget.model_copy(update={"deepspeed": budget.deepspeed.model_copy(update={"ring_attn_size": 2})}))
    ring_actor = next(r for r in ring.memory.roles if r.role == "actor")
    # the budget is per GPU after the ring split (OpenRLHF packs max_tokens_per_gpu x ring_attn_size tokens)
    assert ring_actor.parts["logits"] == pytest.approx(actor.parts["logits"])
    # the budgets fit; a micro batch of one 65536-token sequence (max_len is a bound) would not: a warning
    assert planned.ok, [f for f in planned.findings if f.level == "error"]
    worst = [f for f in planned.findings if f.level == "warning" and "one sequence of max_len 65536" in f.message]
    assert worst and worst[0].key == "placement.actor"


def test_the_grpo_preset_is_critic_free_with_a_shipped_reward_function():
    result = prepare(load_config(CONFIGS / "qwen2.5-7b-grpo.yaml"), environ={})
    assert result.ok and [r.role for r in result.plan.roles if r.enabled] == ["actor", "ref"]
    assert value(result.argv, "--reward.remote_url") == "math_reward.py"
    assert Path(result.spec.runtime_env["working_dir"]) == (CONFIGS / "math_reward.py").resolve().parent


def test_init_copies_the_reward_function_along(tmp_path):
    done = run_cli("init", "qwen2.5-7b-grpo", str(tmp_path / "mine.yaml"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "math_reward.py").is_file()
    planned = run_cli("plan", str(tmp_path / "mine.yaml"), "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert json.loads(planned.stdout)["runtime_env"]["working_dir"] == str(tmp_path)


def test_check_table_ranges_are_releases_we_know():
    known = set(supported_versions())
    for check in CHECKS:
        assert check.since in known and (check.until is None or check.until in known), check.id
        assert check.applies(check.since) and (check.until is None or not check.applies(supported_versions()[-1]))
    assert version_key("0.10.4") < version_key("0.11.0")


def test_docs_list_every_check_with_its_releases():
    text = (ROOT / "docs" / "openrlhf-checks.md").read_text()
    for check in CHECKS:
        row = next((line for line in text.splitlines() if f"`{check.id}`" in line), "")
        assert row, check.id
        releases = f"{check.since} .. {check.until}" if check.until else ("all" if check.since == "0.8.0" else f"{check.since} ..")
        assert f"| {releases} |" in row, (check.id, row)


def test_a_remote_rm_url_naming_a_python_file_is_said_to_be_a_reward_function():
    """OpenRLHF reads a `.py` remote_rm_url as a reward function file on the nodes: `plan` must not
    call it a remote reward server (imported scripts carry it so: MM-EUREKA's, ProRL's)."""
    found = launch(cfg(models={"reward_remote_url": "examples/scripts/reward_func.py"}))
    reason = found.plan.role("reward").reason
    assert "the reward function examples/scripts/reward_func.py (read on the nodes" in reason and "server" not in reason
    assert "remote reward server" in launch(cfg()).plan.role("reward").reason
