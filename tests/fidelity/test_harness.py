"""Tests of the fidelity harness: OpenRLHF's real start-up code, run on fakes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from packaging.version import Version

from .harness import Verdict, real_startup, real_startup_many
from .wheels import WheelError, trainer_root

pytestmark = pytest.mark.fidelity

FLAGSETS = Path(__file__).resolve().parents[2] / "src" / "rlhf_launch" / "openrlhf" / "flagsets"
RELEASES = sorted((json.loads(p.read_text())["version"] for p in FLAGSETS.glob("*.json")), key=Version)
ERAS = ["0.8.11", "0.10.2", "0.11.2"]

# Trainer flags by role: before 0.10.2 flat, from 0.10.2 dotted.
_FLAT = {
    "pretrain": "pretrain",
    "reward": "reward_pretrain",
    "data": "prompt_data",
    "actor_gpus": "actor_num_gpus_per_node",
    "critic_gpus": "critic_num_gpus_per_node",
    "ref_gpus": "ref_num_gpus_per_node",
    "reward_gpus": "reward_num_gpus_per_node",
    "engines": "vllm_num_engines",
    "tp": "vllm_tensor_parallel_size",
    "actor_ref": "colocate_actor_ref",
    "critic_reward": "colocate_critic_reward",
    "all": "colocate_all_models",
    "async": "async_train",
    "estimator": "advantage_estimator",
    "n_samples": "n_samples_per_prompt",
}
_DOTTED = {
    "pretrain": "actor.model_name_or_path",
    "reward": "reward.model_name_or_path",
    "data": "data.prompt_dataset",
    "actor_gpus": "actor.num_gpus_per_node",
    "critic_gpus": "critic.num_gpus_per_node",
    "ref_gpus": "ref.num_gpus_per_node",
    "reward_gpus": "reward.num_gpus_per_node",
    "engines": "vllm.num_engines",
    "tp": "vllm.tensor_parallel_size",
    "actor_ref": "train.colocate_actor_ref",
    "critic_reward": "train.colocate_critic_reward",
    "all": "train.colocate_all",
    "async": "train.async_enable",
    "estimator": "algo.advantage.estimator",
    "n_samples": "rollout.n_samples_per_prompt",
}


def flag(version: str, role: str) -> str:
    return "--" + (_DOTTED if Version(version) >= Version("0.10.2") else _FLAT)[role]


def argv(version: str, **settings: object) -> list[str]:
    """The models and data every run needs, then `settings` by role (True: a bare switch)."""
    out = [flag(version, "pretrain"), "org/actor", flag(version, "reward"), "org/rm", flag(version, "data"), "org/data"]
    for role, value in settings.items():
        out += [flag(version, role)] if value is True else [flag(version, role), str(value)]
    return out


# actor 1x8, critic 1x8, ref 1x4, reward 1x4, vLLM 2 engines x TP 4; then the colocation layouts.
_SEPARATE: dict[str, object] = {"actor_gpus": 8, "critic_gpus": 8, "ref_gpus": 4, "reward_gpus": 4, "engines": 2, "tp": 4}
_ALL_8: dict[str, object] = {**_SEPARATE, "ref_gpus": 8, "reward_gpus": 8, "all": True}
LAYOUTS: dict[str, dict[str, object]] = {
    "separate": _SEPARATE,
    "actor_ref": {**_SEPARATE, "ref_gpus": 8, "actor_ref": True},
    "critic_reward": {**_SEPARATE, "critic_gpus": 4, "critic_reward": True},
    "colocate_all": _ALL_8,
    "colocate_all_async": {**_ALL_8, "async": True},
}
ENGINE = "engine"  # stands for the release's vLLM actor class (LLMRayActor, later RolloutRayActor)
# Each placement group in creation order: its size and the actor classes placed in it.
EXPECTED: dict[str, list[tuple[int, set[str]]]] = {
    "separate": [
        (8, {ENGINE}),
        (8, {"PolicyModelActor"}),
        (4, {"ReferenceModelActor"}),
        (8, {"CriticModelActor"}),
        (4, {"RewardModelActor"}),
    ],
    "actor_ref": [(8, {"PolicyModelActor", "ReferenceModelActor"}), (8, {ENGINE}), (8, {"CriticModelActor"}), (4, {"RewardModelActor"})],
    "critic_reward": [
        (8, {ENGINE}),
        (8, {"PolicyModelActor"}),
        (4, {"ReferenceModelActor"}),
        (4, {"CriticModelActor", "RewardModelActor"}),
    ],
    "colocate_all": [(8, {ENGINE, "PolicyModelActor", "ReferenceModelActor", "CriticModelActor", "RewardModelActor"})],
    "colocate_all_async": [(8, {"PolicyModelActor", "ReferenceModelActor", "CriticModelActor", "RewardModelActor"}), (8, {ENGINE})],
}


@cache
def layouts(version: str) -> dict[str, Verdict]:
    verdicts = real_startup_many(version, [argv(version, **settings) for settings in LAYOUTS.values()])
    return dict(zip(LAYOUTS, verdicts, strict=True))


def groups(verdict: Verdict) -> list[tuple[int, set[str]]]:
    owners: list[set[str]] = [set() for _ in verdict.placement_groups]
    for actor in verdict.actors:
        if actor["placement_group"] is not None:
            owners[actor["placement_group"]].add(ENGINE if actor["engine"] else actor["class"])
    return [(len(pg["bundles"]), owner) for pg, owner in zip(verdict.placement_groups, owners, strict=True)]


def assert_accepted(verdict: Verdict) -> None:
    assert not verdict.harness_error, verdict.harness_error
    assert (verdict.ok, verdict.stage) == (True, "done"), f"{verdict.error_type}: {verdict.message}"


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layout_placement_groups(version: str, layout: str) -> None:
    verdict = layouts(version)[layout]
    assert_accepted(verdict)
    assert groups(verdict) == EXPECTED[layout]
    assert all(pg["strategy"] == "PACK" for pg in verdict.placement_groups)
    assert all(bundle == {"GPU": 1, "CPU": 1} for pg in verdict.placement_groups for bundle in pg["bundles"])


@pytest.mark.parametrize("version", ERAS)
def test_separate_layout_actors(version: str) -> None:
    verdict = layouts(version)["separate"]
    counts = {
        cls: verdict.actor_count(cls)
        for cls in ("PolicyModelActor", "ReferenceModelActor", "CriticModelActor", "RewardModelActor", "PPOTrainer")
    }
    assert counts == {"PolicyModelActor": 8, "ReferenceModelActor": 4, "CriticModelActor": 8, "RewardModelActor": 4, "PPOTrainer": 1}
    # Each TP-4 engine takes the first of its 4 bundles; its GPUs go to vLLM's own Ray workers.
    assert [(e["placement_group"], e["bundle_index"], e["kwargs"]["tensor_parallel_size"]) for e in verdict.engines] == [
        (0, 0, 4),
        (0, 4, 4),
    ]
    assert [a["bundle_index"] for a in verdict.actors if a["class"] == "PolicyModelActor"] == list(range(8))
    # The post-parse correction: gae with no critic given trains the reward model as critic.
    critic = "critic.model_name_or_path" if Version(version) >= Version("0.10.2") else "critic_pretrain"
    assert verdict.args[critic] == "org/rm"


@pytest.mark.parametrize("version", ERAS)
def test_unknown_flag_is_a_parse_error(version: str) -> None:
    verdict = real_startup(version, [*argv(version), "--no_such_flag", "1"])
    assert not verdict.harness_error
    assert (verdict.ok, verdict.stage, verdict.error_type) == (False, "parse", "SystemExit")
    assert verdict.message == "unrecognized arguments: --no_such_flag 1"


@pytest.mark.parametrize("version", ERAS)
def test_group_estimator_needs_several_samples(version: str) -> None:
    verdict = real_startup(version, argv(version, estimator="group_norm", n_samples=1, engines=1))
    assert not verdict.harness_error
    assert (verdict.ok, verdict.stage, verdict.error_type) == (False, "checks", "AssertionError")
    assert verdict.message == "group_norm requires n_samples_per_prompt > 1"
    assert verdict.placement_groups == []


@pytest.mark.parametrize("version", ERAS)
def test_colocate_all_engine_gpus_must_match_actor(version: str) -> None:
    # This check sits in train(), before any placement group but after the one for actor and ref.
    verdict = real_startup(version, argv(version, all=True, engines=1, tp=4))
    assert not verdict.harness_error
    assert (verdict.ok, verdict.stage, verdict.error_type) == (False, "train", "AssertionError")
    assert verdict.message.startswith("actor_num_nodes * actor_num_gpus_per_node must be equal to ")
    assert verdict.message.endswith("got 8 and 4")
    assert verdict.bundle_counts == [8]


def test_no_vllm_crashes_releases_0_9_8_to_0_10_4() -> None:
    """A real OpenRLHF bug: train() reads max_len, set only when vLLM engines are asked for."""
    broken = real_startup("0.10.4", argv("0.10.4"))
    assert not broken.harness_error
    assert (broken.stage, broken.error_type) == ("train", "UnboundLocalError")
    assert_accepted(real_startup("0.11.0", argv("0.11.0")))
    assert_accepted(real_startup("0.9.7", argv("0.9.7")))


def test_a_misused_fake_is_a_harness_error() -> None:
    verdict = real_startup("0.11.2", argv("0.11.2", engines=1), values={"torch.distributed.is_initialized": None})
    assert not verdict.ok
    assert "torch.distributed.is_initialized" in verdict.harness_error


def test_batch_runs_are_isolated() -> None:
    good, bad = argv("0.11.2", engines=2, tp=4), argv("0.11.2", engines=1, tp=4, all=True)
    batch = real_startup_many("0.11.2", [good, bad, good], workers=1)
    single = real_startup("0.11.2", good)
    assert [v.stage for v in batch] == ["done", "train", "done"]
    assert batch[0].placement_groups == batch[2].placement_groups == single.placement_groups
    assert batch[0].actors == batch[2].actors == single.actors


def test_version_values_reach_the_fakes() -> None:
    """0.8.9 pins vllm 0.10.0 yet needs vllm > 0.10.0 for --enable_vllm_is_correction."""
    settings = argv("0.8.9", engines=1) + ["--enable_vllm_is_correction"]
    pinned = real_startup("0.8.9", settings)
    assert (pinned.stage, pinned.message) == ("train", "vLLM > 0.10.0 is required for logprobs_mode")
    assert_accepted(real_startup("0.8.9", settings, values={"vllm.__version__": "0.10.1"}))


def test_unknown_release_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLHF_LAUNCH_CACHE", str(tmp_path))
    with pytest.raises(WheelError, match=r"could not download openrlhf==0\.0\.999"):
        trainer_root("0.0.999")
    assert not list(tmp_path.glob("openrlhf-*"))


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_every_release_accepts_a_minimal_argv(version: str) -> None:
    verdict = real_startup(version, argv(version, engines=1))
    assert_accepted(verdict)
    # vLLM's one TP-1 engine, then actor, ref, critic (the reward model, by default) and reward: 1x8 each.
    assert verdict.bundle_counts == [1, 8, 8, 8, 8]
