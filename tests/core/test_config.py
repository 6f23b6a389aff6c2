"""Config schema, YAML errors with key paths and lines, overrides."""

from __future__ import annotations

import pytest

from rlhf_launch.core.config import DEFAULT_EXCLUDES, apply_overrides, load_config, parse_override
from rlhf_launch.errors import UserError

BASE = """\
name: t
models:
  actor: some/actor
  reward: some/rm
placement:
  actor: {nodes: 1, gpus_per_node: 4}
  vllm:
    engines: 2
data:
  prompt_dataset: some/prompts
"""


def test_minimal_config_gets_defaults(write_config):
    cfg = load_config(write_config(BASE))
    assert cfg.name == "t"
    assert cfg.cluster.address == "http://127.0.0.1:8265"
    assert cfg.placement.actor.gpus_per_node == 4
    assert cfg.placement.critic.nodes is None  # resolved by the plan
    assert cfg.runtime_env.excludes == DEFAULT_EXCLUDES
    assert cfg.deepspeed.zero_stage == 2


def test_name_defaults_to_the_file_stem(write_config):
    cfg = load_config(write_config(BASE.replace("name: t\n", ""), name="my-run.yaml"))
    assert cfg.name == "my-run"


def test_unknown_key_names_path_line_and_guess(write_config):
    text = BASE.replace("  vllm:\n    engines: 2", "  vllm:\n    engins: 2")
    with pytest.raises(UserError) as info:
        load_config(write_config(text))
    msg = info.value.message
    assert "cfg.yaml:8" in msg
    assert "unknown key placement.vllm.engins" in msg
    assert "did you mean placement.vllm.engines?" in msg


def test_unknown_section_lists_known_keys(write_config):
    with pytest.raises(UserError) as info:
        load_config(write_config(BASE + "trainer:\n  x: 1\n"))
    assert "unknown key trainer" in info.value.message
    assert "train" in info.value.message


def test_wrong_type_names_key_and_line(write_config):
    text = BASE.replace("engines: 2", "engines: two")
    with pytest.raises(UserError) as info:
        load_config(write_config(text))
    msg = info.value.message
    assert "cfg.yaml:8: placement.vllm.engines" in msg and "'two'" in msg


def test_invalid_yaml_names_line(write_config):
    with pytest.raises(UserError) as info:
        load_config(write_config("name: t\nmodels:\n  actor: [unclosed\n"))
    assert "invalid YAML" in info.value.message and "cfg.yaml:" in info.value.message


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_wandb_key_is_refused_in_config(write_config):
    with pytest.raises(UserError) as info:
        load_config(write_config(BASE + "runtime_env:\n  env_vars:\n    WANDB_API_KEY: abc\n"))
    assert "runtime_env.env_vars" in info.value.message and "WANDB_API_KEY" in info.value.message


def test_overrides_are_yaml_typed_and_applied_before_validation(write_config):
    cfg = load_config(
        write_config(BASE),
        [
            "placement.actor.nodes=2",
            "placement.colocate=[actor_ref, critic_reward]",
            "deepspeed.adam_offload=true",
            "train.actor_learning_rate=5e-7",
            "extra_args.ds.ring_attn_size=2",
            "cluster.nodes=4",
        ],
    )
    assert cfg.placement.actor.nodes == 2
    assert cfg.placement.colocate == ["actor_ref", "critic_reward"]
    assert cfg.deepspeed.adam_offload is True
    assert cfg.train.actor_learning_rate == 5e-7
    assert cfg.extra_args == {"ds.ring_attn_size": 2}
    assert cfg.cluster.nodes == 4


def test_override_errors(write_config):
    with pytest.raises(UserError, match="not key=value"):
        parse_override("placement.actor.nodes")
    with pytest.raises(UserError, match="unknown key placement.actor.nodez"):
        load_config(write_config(BASE), ["placement.actor.nodez=2"])
    with pytest.raises(UserError, match="is not a section"):
        apply_overrides({"name": "x"}, ["name.sub=1"])
    with pytest.raises(UserError, match="colocate"):
        load_config(write_config(BASE), ["placement.colocate=[everything]"])


# Several reward servers as OpenRLHF's own remote_rm_url: one comma-separated string, which its
# start-up splits (train_ppo_ray.py, `args.remote_rm_url.split(",")`) and spreads batches over.
SERVERS = "http://rm-a:5000/get_reward,http://rm-b:5000/get_reward"


@pytest.mark.parametrize("version,flag", [("0.8.11", "--remote_rm_url"), ("0.11.2", "--reward.remote_url")])
def test_comma_separated_reward_urls_are_accepted_and_rendered_unchanged(write_config, version, flag):
    from rlhf_launch.core.launch import prepare

    cfg = load_config(write_config(BASE), ["models.reward=null", f"models.reward_remote_url={SERVERS}"])
    assert cfg.models.remote_urls == SERVERS.split(",")
    launch = prepare(cfg, version=version, environ={})
    assert not [f for f in launch.findings if f.key.startswith("models.reward")], launch.findings
    assert launch.argv[launch.argv.index(flag) + 1] == SERVERS
    assert launch.settings is not None and launch.settings.remote_reward == tuple(SERVERS.split(","))


@pytest.mark.parametrize(
    "value,words",
    [
        ("http://rm-a:5000/r,", "an empty URL (a stray comma?)"),
        ("http://rm-a:5000/r, http://rm-b:5000/r", "whitespace"),
        ("http://rm-a:99999/r", "the port must be 1..65535"),
        ("http://rm-a/r,/opt/rules.py", "cannot be combined with URLs"),
        ("[]", "give a URL"),
        ("['http://rm-a/r', '']", "an empty URL"),
    ],
)
def test_each_reward_url_is_validated(write_config, value, words):
    with pytest.raises(UserError, match="models.reward_remote_url") as caught:
        load_config(write_config(BASE), ["models.reward=null", f"models.reward_remote_url={value}"])
    assert words in caught.value.message


@pytest.mark.parametrize(
    "value,odd",
    [
        ("http://rm-a:5000/r,rm-b:5000", "rm-b:5000"),
        ("ftp://rm-a/r", "ftp://rm-a/r"),
        ("rule:http://rm-a:1/r,rule:http://rm-b:1/r", "rule:http://rm-a:1/r, rule:http://rm-b:1/r"),
    ],
)
def test_a_url_the_published_trainer_cannot_post_to_is_passed_on_with_a_warning(write_config, value, odd):
    from rlhf_launch.core.launch import prepare

    # OpenRLHF's parser takes any string (forks read forms such as `rule:http://...`): warn, render unchanged.
    cfg = load_config(write_config(BASE), ["models.reward=null", f"models.reward_remote_url={value}"])
    launch = prepare(cfg, version="0.11.2", environ={})
    found = [f for f in launch.findings if f.key == "models.reward_remote_url"]
    assert [str(f.level) for f in found] == ["warning"] and odd in found[0].message, launch.findings
    assert value in launch.argv


def test_a_reward_function_path_on_the_nodes_still_passes(write_config):
    cfg = load_config(write_config(BASE), ["models.reward=null", "models.reward_remote_url=/opt/rules.py"])
    assert cfg.models.remote_urls == ["/opt/rules.py"]  # OpenRLHF loads a lone .py as its reward_func
