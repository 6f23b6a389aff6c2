"""The placement picture: nodes as rows, GPUs as cells, each the role Ray's PACK puts there."""

from __future__ import annotations

from collections import Counter

import yaml

from rlhf_launch.core.config import load_config, validate
from rlhf_launch.core.picture import HEADER, draw
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.core.plan import build_plan

from conftest import CONFIGS, PUBLISHED_40

CODE = {"actor": "A", "critic": "C", "ref": "R", "reward": "M"}


def preset(name: str):
    return build_plan(load_config(CONFIGS / f"{name}.yaml", []))


def rows(lines: list[str], count: int) -> list[tuple[str, list[str]]]:
    """(label, cells) of the `count` node rows that follow the header."""
    assert lines[0] == HEADER
    out = []
    for line in lines[1 : 1 + count]:
        label, *cells = line.split()
        out.append((label, cells))
    return out


def layout(nodes: int, gpus_per_node: int = 8, **placement):
    data = {
        "name": "t",
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node},
        "models": {"actor": "meta-llama/Llama-2-7b-hf", "reward": "rm"},
        "placement": placement,
    }
    return build_plan(validate(data))


def test_70b_four_nodes_draws_four_rows_of_eight_with_each_roles_gpus():
    plan = preset("llama70b-4node")
    lines = draw(plan)
    drawn = rows(lines, 4)
    assert [label for label, _ in drawn] == ["node0", "node1", "node2", "node3"]
    assert all(len(cells) == 8 for _, cells in drawn)
    counts = Counter(cell for _, cells in drawn for cell in cells)
    for role in plan.roles:
        assert counts[CODE[role.role]] == (role.gpus if role.enabled else 0)
    assert sum(n for cell, n in counts.items() if cell.startswith("V")) == plan.vllm_gpus
    assert "." not in counts  # every GPU used
    assert "Vn vLLM engine n (TP 4)" in lines[-1] and "M reward" in lines[-1]


def test_vllm_engines_of_tp_4_fill_four_consecutive_cells_each():
    plan = preset("llama70b-8node")
    cells = [cell for _, row in rows(draw(plan), 8) for cell in row]
    engines = [cell for cell in cells if cell.startswith("V")]
    assert engines == [f"V{k}" for k in range(plan.vllm_engines) for _ in range(4)]
    first = cells.index("V0")
    assert cells[first : first + 4] == ["V0"] * 4


def test_colocate_all_shows_every_role_in_one_cell():
    plan = preset("llama70b-2node-hybrid")
    assert len(plan.groups) == 1
    drawn = rows(draw(plan), plan.cluster_nodes)
    cells = [cell for _, row in drawn for cell in row]
    assert len(cells) == plan.cluster_gpus
    tp = plan.vllm_tp
    assert cells == [f"ACRMV{k}" for k in range(plan.vllm_engines) for _ in range(tp)]


def test_colocated_actor_ref_shares_cells_and_other_groups_follow_in_order():
    plan = build_plan(load_config(CONFIGS / "tiny-1node.yaml", []))
    (_, cells), *_ = rows(draw(plan), 1)
    group_order = [g.name for g in plan.groups]
    assert group_order[0] == "actor+ref"
    assert cells[0] == "AR"
    assert Counter(cells)["AR"] == plan.role("actor").gpus


def test_an_unplaceable_group_is_named_and_what_follows_is_not_reached():
    plan = build_plan(validate(yaml.safe_load(PUBLISHED_40)))
    assert plan.gpus_required > plan.cluster_gpus
    lines = draw(plan)
    drawn = rows(lines, 4)
    assert all(len(cells) == 8 for _, cells in drawn)
    failed = [line for line in lines if "cannot be placed" in line]
    assert failed == ["  reward: 8 GPUs cannot be placed (would wait forever)"]
    assert "M" not in {cell for _, cells in drawn for cell in cells}


def test_a_group_after_the_failed_one_is_reported_not_reached():
    # actor 16 + vLLM 8 on 2 x 8: vLLM goes first, then the actor cannot be placed.
    plan = layout(
        2,
        actor={"nodes": 2, "gpus_per_node": 8},
        ref={"nodes": 1, "gpus_per_node": 1},
        critic={"nodes": 1, "gpus_per_node": 1},
        reward={"nodes": 1, "gpus_per_node": 1},
        vllm={"engines": 2, "tensor_parallel_size": 4},
    )
    lines = draw(plan)
    assert "  actor: 16 GPUs cannot be placed (would wait forever)" in lines
    assert any("not reached" in line and "ref" in line and "critic" in line for line in lines)
    drawn = rows(lines, 2)
    assert drawn[0][1] == ["V0"] * 4 + ["V1"] * 4
    assert drawn[1][1] == ["."] * 8
    assert ". idle" in lines[-1]


def test_64_nodes_draw_64_rows():
    plan = layout(
        64,
        actor={"nodes": 16, "gpus_per_node": 8},
        ref={"nodes": 8, "gpus_per_node": 8},
        critic={"nodes": 16, "gpus_per_node": 8},
        reward={"nodes": 8, "gpus_per_node": 8},
        vllm={"engines": 32, "tensor_parallel_size": 4},
    )
    assert plan.gpus_required == 512
    lines = draw(plan)
    drawn = rows(lines, 64)
    assert [label for label, _ in drawn] == [f"node{i}" for i in range(64)]
    assert all(len(cells) == 8 for _, cells in drawn)
    assert len(lines) == 1 + 64 + 1  # header, rows, legend
    assert max(len(line) for line in lines[1:65]) <= 48  # one short line per node
    cells = [cell for _, row in drawn for cell in row]
    assert cells.count("V31") == 4 and cells.count("A") == 128


def test_live_nodes_are_labelled_by_ip_and_show_only_their_gpus():
    plan = preset("llama70b-4node")
    nodes = [
        NodeFree("head", "10.0.0.1", gpus=0.0),
        *(NodeFree(f"n{i}", f"10.0.0.{i + 2}", gpus=8.0) for i in range(4)),
    ]
    lines = draw(plan, nodes)
    assert lines[1].split() == ["10.0.0.1", "(no", "GPUs)"]
    drawn = rows([HEADER, *lines[2:]], 4)  # past the head row
    assert [label for label, _ in drawn] == [f"10.0.0.{i + 2}" for i in range(4)]
    assert sum(len(cells) for _, cells in drawn) == 32


def test_an_engine_split_across_nodes_is_said():
    plan = layout(
        2,
        6,
        actor={"nodes": 1, "gpus_per_node": 1},
        ref={"nodes": 1, "gpus_per_node": 1},
        critic={"nodes": 1, "gpus_per_node": 1},
        reward={"nodes": 1, "gpus_per_node": 1},
        vllm={"engines": 2, "tensor_parallel_size": 4},
    )
    lines = draw(plan)
    drawn = rows(lines, 2)
    assert drawn[0][1][:6] == ["V0"] * 4 + ["V1"] * 2
    assert drawn[1][1][:2] == ["V1"] * 2
    assert any("1 vLLM engine(s) of vLLM span nodes" in line for line in lines)
