"""Ray PACK placement, simulated."""

from __future__ import annotations

from rlhf_launch.core.placement import NodeFree, declared_nodes, simulate, split_engines
from rlhf_launch.core.plan import GroupPlan


def g(name, bundles, packed=True, chunk=1):
    return GroupPlan(name=name, bundles=bundles, roles=(name,), packed=packed, chunk=chunk)


def test_pack_fills_the_freest_node_then_the_next():
    nodes = [NodeFree("a", "a", 8), NodeFree("b", "b", 4), NodeFree("c", "c", 8)]
    sim = simulate([g("x", 10)], nodes)
    assert sim.failed is None
    assert sim.placements[0].per_node == {"a": 8, "c": 2}
    assert [n.gpus for n in sim.free_after] == [0, 4, 6]


def test_a_group_that_does_not_fit_is_not_placed_and_stops_the_rest():
    sim = simulate([g("x", 12), g("y", 8), g("z", 1)], declared_nodes(2, 8))
    assert sim.failed.group.name == "y"
    assert len(sim.placements) == 2
    assert sim.free_after[0].gpus + sim.free_after[1].gpus == 4


def test_cpus_limit_bundles_too():
    sim = simulate([g("x", 4)], [NodeFree("a", "a", gpus=8, cpus=3)])
    assert sim.failed is not None


def test_single_gpu_actors_spread_by_score():
    sim = simulate([g("x", 3, packed=False)], [NodeFree("a", "a", 2), NodeFree("b", "b", 2)])
    assert sum(sim.placements[0].per_node.values()) == 3


def test_tp_engines_that_span_nodes_are_counted():
    assert split_engines({"a": 4, "b": 4}, 4, ["a", "b"]) == 0
    assert split_engines({"a": 6, "b": 2}, 4, ["a", "b"]) == 1
    assert split_engines({"a": 2, "b": 2}, 4, ["a", "b"]) == 1
    nodes = [NodeFree("a", "a", 6), NodeFree("b", "b", 8)]
    sim = simulate([g("v", 8, chunk=4)], nodes)
    assert sim.placements[0].per_node == {"b": 8} and sim.placements[0].split_engines == 0
    sim = simulate([g("v", 12, chunk=4)], [NodeFree("a", "a", 6), NodeFree("b", "b", 6)])
    assert sim.placements[0].split_engines == 1
