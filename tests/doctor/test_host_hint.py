"""doctor's host-RAM failure names the settings that put the RAM on that node."""

from __future__ import annotations

from rlhf_launch import doctor
from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.core.presets import config_path

NODE = "n" * 56


def test_a_node_short_of_host_ram_is_told_which_offload_fills_it():
    launch = prepare(load_config(config_path("tiny-1node")), environ={})
    assert launch.cfg.deepspeed.adam_offload and not launch.cfg.deepspeed.ref_reward_offload
    facts = {NODE: {"ip": "10.0.0.1", "memory": {"total": 0.001}}}
    report = doctor.examine(launch, lambda request: facts, nodes_free=[NodeFree(NODE, "10.0.0.1", 8, 16)])
    [memory] = [f for f in report.failed() if f.check == "memory"]
    assert "turn off deepspeed.adam_offload (~" in memory.fix
    assert "ref_reward_offload" not in memory.fix
