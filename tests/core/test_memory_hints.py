"""A host-RAM hint names only the settings that put the RAM there (core/memory.py)."""

from __future__ import annotations

from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.memory import host_fix
from rlhf_launch.core.presets import config_path


def host_finding(*overrides: str):
    launch = prepare(load_config(config_path("llama70b-4node"), list(overrides)), environ={})
    found = [f for f in launch.findings if f.key == "cluster.host_memory_gb" and f.level == "error"]
    assert found, launch.findings
    return launch, found[0]


def test_host_ram_of_adam_offload_is_not_blamed_on_ref_reward_offload():
    launch, finding = host_finding("cluster.host_memory_gb=100")
    assert not launch.cfg.deepspeed.ref_reward_offload and launch.cfg.deepspeed.adam_offload
    assert "deepspeed.adam_offload" in finding.hint
    assert "ref_reward_offload" not in finding.hint


def test_each_setting_named_is_one_that_changes_the_number():
    _, finding = host_finding("cluster.host_memory_gb=100", "deepspeed.ref_reward_offload=true", "placement.colocate=[actor_ref]")
    sources = finding.hint.split("turn off ", 1)[1]
    assert "deepspeed.adam_offload" in sources and "deepspeed.ref_reward_offload" in sources


def test_host_fix_lists_the_largest_source_first_and_nothing_at_zero():
    hint = host_fix({"deepspeed.ref_reward_offload": 20.0, "deepspeed.adam_offload": 96.0, "placement.vllm.enable_sleep": 0.0})
    assert hint == (
        "spread the training roles over more nodes, or turn off deepspeed.adam_offload (~96 GiB of it) "
        "or deepspeed.ref_reward_offload (~20 GiB of it)"
    )
    assert host_fix({}) == "spread the training roles over more nodes"
