"""What `plan` renders, accepted by the real start-up of the release it targets: extra_args in
the other era's spelling, and several remote reward URLs in one comma-separated value."""

from __future__ import annotations

import pytest

from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.presets import config_path

from .harness import real_startup

pytestmark = pytest.mark.fidelity

URLS = "http://rm-a:5000/get_reward,http://rm-b:5000/get_reward"
CRITIC_FREE = ["models.reward=null", "train.advantage_estimator=reinforce_baseline", "train.n_samples_per_prompt=4"]


def _launch(version: str, overrides: list[str]):
    return prepare(load_config(config_path("tiny-1node"), overrides), version=version, environ={})


@pytest.mark.parametrize(
    "version,written,rendered,dest",
    [
        ("0.8.11", "algo.advantage.is_correction_threshold", "--vllm_is_truncated_threshold", "vllm_is_truncated_threshold"),
        ("0.11.2", "vllm_is_truncated_threshold", "--algo.advantage.is_correction_threshold", "algo.advantage.is_correction_threshold"),
        ("0.11.2", "temperature", "--rollout.temperature", "rollout.temperature"),
        ("0.8.11", "rollout.temperature", "--temperature", "temperature"),
    ],
)
def test_extra_args_in_the_other_eras_spelling_start(version, written, rendered, dest):
    launch = _launch(version, [f"extra_args.{written}=3.0"])
    assert launch.ok, [f for f in launch.findings if f.level == "error"]
    assert rendered in launch.argv and f"--{written}" not in launch.argv
    assert any(f.key == f"extra_args.{written}" and "renamed" in f.message for f in launch.findings)
    verdict = real_startup(version, launch.argv)
    assert verdict.ok, (verdict.stage, verdict.message, verdict.harness_error)
    value = verdict.args[dest]
    assert 3.0 in (value if isinstance(value, list) else [value])  # 0.11.2 reads one value as HIGH


@pytest.mark.parametrize("version,dest", [("0.8.11", "remote_rm_url"), ("0.11.2", "reward.remote_url")])
def test_comma_separated_reward_urls_start_as_several_servers(version, dest):
    launch = _launch(version, [*CRITIC_FREE, f"models.reward_remote_url={URLS}"])
    assert launch.ok, [f for f in launch.findings if f.level == "error"]
    verdict = real_startup(version, launch.argv)
    assert verdict.ok, (verdict.stage, verdict.message, verdict.harness_error)
    assert verdict.args[dest] == URLS.split(",")  # the trainer split them: two reward servers
