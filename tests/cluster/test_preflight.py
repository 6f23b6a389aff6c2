"""The live preflight's placement refusals say what is missing: GPUs, or the CPU every bundle needs."""

from __future__ import annotations

from pathlib import Path

from rlhf_launch.cluster.preflight import placement
from rlhf_launch.cluster.snapshot import Node, Snapshot
from rlhf_launch.core.config import load_config
from rlhf_launch.core.plan import build_plan

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _cluster(cpus: float, gpus: float = 8, nodes: int = 4) -> Snapshot:
    return Snapshot(
        address="http://127.0.0.1:8265",
        ray_version="2.40.0",
        nodes=tuple(Node(f"n{i}", f"10.0.0.{i + 1}", i == 0, gpus, gpus, cpus, cpus) for i in range(nodes)),
    )


def test_four_cpus_per_node_is_refused_as_short_cpus_with_the_numbers_and_the_fix():
    plan = build_plan(load_config(CONFIGS / "llama70b-4node.yaml"))
    assert plan.gpus_required == 32
    findings = [f for f in placement(plan, _cluster(cpus=4)) if f.level == "error"]
    assert len(findings) == 1, findings
    (refusal,) = findings
    assert refusal.key == "placement.cpus"
    assert "CPU" in refusal.message and "4 CPUs" in refusal.message and "8 GPUs" in refusal.message
    assert "10.0.0.1" in refusal.message
    assert "only 0 can be placed" not in refusal.message
    assert "--num-cpus" in refusal.hint and "8" in refusal.hint
    assert "wait for running jobs" not in refusal.hint


def test_enough_cpus_places_the_same_layout():
    plan = build_plan(load_config(CONFIGS / "llama70b-4node.yaml"))
    assert not [f for f in placement(plan, _cluster(cpus=16)) if f.level == "error"]


def test_missing_gpus_with_no_job_running_does_not_say_wait_for_jobs():
    plan = build_plan(load_config(CONFIGS / "llama70b-4node.yaml"))
    busy = _cluster(cpus=16)
    nodes = tuple(Node(n.node_id, n.ip, n.is_head, n.gpus, 2, n.cpus, n.cpus) for n in busy.nodes)
    findings = [f for f in placement(plan, Snapshot(busy.address, busy.ray_version, nodes)) if f.level == "error"]
    assert findings and findings[0].key != "placement.cpus"
    assert "wait for running jobs" not in findings[0].hint
