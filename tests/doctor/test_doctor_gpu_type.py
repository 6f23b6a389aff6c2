"""doctor's GPU type check: the name nvidia-smi reports on each node (the probe's `gpu` facts)
against cluster.gpu, through core/gpus.py from_smi. No Ray."""

from __future__ import annotations

import copy

from rlhf_launch.core.config import load_config
from rlhf_launch.core.launch import prepare
from rlhf_launch.doctor import checks, spec
from rlhf_launch.doctor.checks import Node, Status

from conftest import CONFIGS


def needs(*overrides: str) -> spec.Needs:
    return spec.needs(prepare(load_config(CONFIGS / "qwen2.5-7b-grpo.yaml", list(overrides)), environ={}))


def node(*products: str, memory: float = 79.6, ip: str = "10.0.0.1") -> Node:
    facts = {"gpu": {"reported": True, "gpus": [{"name": p, "memory_gib": memory} for p in products]}}
    return Node(ip.replace(".", "") + "0" * 24, ip, facts)


def judge(need: spec.Needs, nodes: list[Node]) -> checks.Report:
    return checks.judge(need, nodes, skip=tuple(n for n in checks.NAMES if n != "gpu"))  # the GPU check alone


def type_findings(report: checks.Report) -> list[checks.NodeFinding]:
    return [f for f in report.findings if f.check == "gpu" and "nvidia-smi names" in f.found]


def test_a_gpu_other_than_cluster_gpu_is_a_warning_naming_the_fix():
    report = judge(needs("cluster.gpu=A100-80GB"), [node("NVIDIA H100 80GB HBM3")])
    [finding] = type_findings(report)
    assert finding.status is Status.WARN and report.ok  # a warning: the run still starts
    assert "'NVIDIA H100 80GB HBM3' (H100-80GB), but cluster.gpu is A100-80GB" in finding.found
    assert finding.fix == "set cluster.gpu=H100-80GB"


def test_the_same_gpu_passes():
    report = judge(needs("cluster.gpu=H100-80GB"), [node("NVIDIA H100 80GB HBM3")])
    assert type_findings(report) == [] and report.cells[("gpu", report.nodes[0].node_id)] is Status.PASS


def test_unset_cluster_gpu_is_suggested_with_what_the_estimate_assumed():
    report = judge(needs(), [node("NVIDIA H20", memory=95.6)])
    [finding] = type_findings(report)
    assert "cluster.gpu is unset, so the step-time estimate assumes A100-80GB, not H20" in finding.found
    assert finding.fix == "set cluster.gpu=H20"


def test_a_gpu_the_table_lacks_is_said_only_while_cluster_gpu_is_unset():
    unknown = node("Tesla V100-SXM2-32GB", memory=31.7)
    [finding] = type_findings(judge(needs(), [unknown]))
    assert "does not know" in finding.found and "H100-80GB" in finding.fix
    assert type_findings(judge(needs("cluster.gpu=A100-40GB"), [unknown])) == []  # the closest type, named on purpose


def test_every_node_alike_is_one_finding_and_a_mixed_node_names_each_type():
    nodes = [node("NVIDIA A800-SXM4-80GB", ip=f"10.0.0.{i}") for i in range(1, 5)]
    [finding] = type_findings(judge(needs("cluster.gpu=A100-80GB"), nodes))
    assert finding.node.startswith("4 nodes (10.0.0.1")
    mixed = node("NVIDIA H100 80GB HBM3", "NVIDIA H200")
    found = type_findings(judge(needs("cluster.gpu=H100-80GB"), [mixed]))
    assert [f.fix for f in found] == ["set cluster.gpu=H200"]


def test_no_nvidia_smi_says_nothing_of_the_type():
    logical = Node("n" * 32, "10.0.0.9", {"gpu": {"reported": False, "why": "no nvidia-smi on this node"}})
    report = judge(needs(), [copy.deepcopy(logical)])
    assert type_findings(report) == [] and report.cells[("gpu", "n" * 32)] is Status.WARN  # the memory check's warning
