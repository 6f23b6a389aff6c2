"""What `resume` lets change and still load the run's checkpoint (issue 28): what DeepSpeed's
ZeRO checkpoint pins (the trained roles' data-parallel size, the stage, the model), not the
micro batch sizes; and the gpu_oom hint offers as "resume with" only what resume accepts."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.diagnose import checks
from rlhf_launch.runs import compat, lifecycle

from conftest import CONFIGS

PRESET = CONFIGS / "llama70b-4node.yaml"
BASE = ["train.micro_train_batch_size=2", "deepspeed.zero_stage=2"]  # room to lower; a stage to raise


def launch(*overrides: str) -> Launch:
    return prepare(load_config(PRESET, [*BASE, *overrides]), environ={})


def refused(*overrides: str) -> list[compat.Change]:
    return compat.refused_changes(launch(), launch(*overrides), lambda x: lifecycle.config_dict(x.cfg))


@pytest.mark.parametrize(
    "override",
    [
        "train.micro_train_batch_size=1",
        "train.micro_rollout_batch_size=2",
        "deepspeed.gradient_checkpointing=true",
        "deepspeed.adam_offload=true",
        "placement.vllm.gpu_memory_utilization=0.6",
        "placement.vllm.tensor_parallel_size=8",
        "placement.ref.gpus_per_node=8",  # ref is not trained: its checkpoint is the pretrained model
    ],
)
def test_changes_a_zero_checkpoint_allows_are_accepted(override):
    assert refused(override) == []


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("placement.actor.gpus_per_node=4", "DP world size of 8 but the current world size is 4"),
        ("placement.critic.gpus_per_node=4", "DP world size of 8"),
        ("deepspeed.zero_stage=3", "ZeRO stage"),
        ("models.actor=/models/other", "weights"),
        ("train.rollout_batch_size=512", "global step"),
    ],
)
def test_changes_the_checkpoint_pins_are_refused_naming_why(override, said):
    changes = refused(override)
    assert changes and said in " ".join(c.text for c in changes)
    assert override.split("=")[0].rsplit(".", 1)[0] in changes[0].key


VARIANTS = [
    SimpleNamespace(text="torch.OutOfMemoryError: CUDA out of memory", phase=phase, near=lambda n=near: n)
    for phase, near in ((None, ""), ("train", ""), ("make_experience", ""), ("model_load", ""), ("weight_sync", ""), (None, "wake_up"))
] + [SimpleNamespace(text="(LLMRayActor pid=1) CUDA out of memory", phase="generate", near=lambda: "")]


def changed_value(key: str, before_key: str, config: dict) -> str:
    node = config
    for part in key.split("."):
        node = node[part]
    if isinstance(node, bool):
        return str(not node).lower()
    if re.search(r"\b(lower|fewer)\W*$", before_key):
        return str(node / 2 if isinstance(node, float) else max(1, node // 2))
    return str(node * 2)


@pytest.mark.parametrize("ctx", VARIANTS)
def test_the_gpu_oom_hint_and_resume_agree(ctx):
    hint = checks.gpu_oom_hint(ctx)
    resumable, _, new_run = hint.partition(checks.NEW_RUN)
    config = lifecycle.config_dict(launch().cfg)
    for part, accepted in ((resumable, True), (new_run, False)):
        for match in re.finditer(r"`([a-z_.]+)(?:=([^`]+))?`", part):
            key, value = match.group(1), match.group(2)
            if key.count(".") < 1:
                continue
            override = f"{key}={value if value is not None else changed_value(key, part[: match.start()], config)}"
            assert (refused(override) == []) is accepted, (hint, override)
    assert "resume with" in resumable
