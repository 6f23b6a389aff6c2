"""`fit`: the layouts the launcher accepts on a cluster, ranked by the step-time estimate."""

from __future__ import annotations

import json

import pytest

from rlhf_launch.core import presets
from rlhf_launch.core.config import apply_overrides, load_config, validate
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.fit import changed, search
from rlhf_launch.fit.space import Layout, Size, Space, engine_counts, sizes

from conftest import run_cli


def step_s(launch):
    return launch.estimate.step_s if launch.estimate else float("inf")


def cfg_of(name, *overrides):
    return load_config(presets.config_path(name), list(overrides))


def on(cfg, nodes, gpus_per_node, overrides=()):
    data = apply_overrides(cfg.model_dump(mode="json"), [f"cluster.nodes={nodes}", f"cluster.gpus_per_node={gpus_per_node}", *overrides])
    return prepare(validate(data))


# -- the space (pure) ---------------------------------------------------------------------


def test_sizes_are_sub_node_powers_of_two_then_whole_nodes():
    assert [s.gpus for s in sizes(2, 8)] == [1, 2, 4, 8, 16]
    assert all(s.nodes == 1 or s.gpus_per_node == 8 for s in sizes(4, 8))
    assert [s.gpus for s in sizes(4, 8, at_least=8)] == [8, 16, 24, 32]


def test_engine_counts_fill_the_room_then_halve():
    assert engine_counts(16, 4) == [4, 2, 1]
    assert engine_counts(3, 4) == []


def test_colocated_roles_take_their_partners_size_and_are_counted_once():
    space = Space(nodes=2, gpus_per_node=8, critic=True, ref=True, reward=True, tps=[1, 2, 4, 8])
    for layout in space.layouts():
        if "actor_ref" in layout.colocate:
            assert layout.ref == layout.actor
        if "critic_reward" in layout.colocate:
            assert layout.reward == layout.critic
        if "all" in layout.colocate:
            assert layout.engines * layout.tp == layout.actor.gpus == layout.gpus
        assert layout.gpus <= 16 or "all" in layout.colocate


def test_a_layouts_overrides_put_exactly_it_into_a_config():
    layout = Layout(Size(1, 8), Size(1, 4), Size(1, 4), Size(1, 4), 2, 2, ("critic_reward",), True, 0.8)
    launch = on(cfg_of("llama70b-4node"), 4, 8, layout.overrides())
    assert launch.plan.gpus_required == layout.gpus == 8 + 4 + 4 + 4
    assert launch.plan.vllm_engines == 2 and launch.plan.vllm_tp == 2
    assert launch.cfg.placement.colocate == ["critic_reward"] and launch.cfg.deepspeed.adam_offload


def test_changed_lists_only_what_differs_from_the_config():
    cfg = cfg_of("llama70b-4node")
    data = cfg.model_dump(mode="json")
    assert changed(data, ["placement.actor.gpus_per_node=8", "placement.vllm.engines=4", "placement.colocate=[]"]) == [
        "placement.vllm.engines=4"
    ]


# -- the search ---------------------------------------------------------------------------


def test_the_widely_published_70b_layout_that_needs_40_gpus_gets_a_valid_one_on_32():
    cfg = cfg_of(
        "llama70b-4node",
        "placement.ref.gpus_per_node=8",
        "placement.reward.gpus_per_node=8",
    )
    assert not on(cfg, 4, 8).ok  # 8 + 8 + 8 + 8 + 2 x 4 = 40 GPUs on 32: refused
    result = search(cfg, 4, 8, step_s)
    assert result.layouts, result.refused
    best = result.layouts[0]
    again = on(cfg, 4, 8, best.layout.overrides())
    assert again.ok and again.plan.gpus_required <= 32


@pytest.mark.parametrize("eight", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["1-4 nodes", "1-8 nodes"])
@pytest.mark.parametrize("name", presets.names())
def test_every_preset_fits_and_the_first_layout_plans_and_is_no_slower_than_its_own(name, eight):
    EIGHT = eight  # noqa: N806 - 8 nodes too under -m slow (the issue's 1, 2, 4 and 8)
    cfg = cfg_of(name)
    previous = float("inf")
    for nodes in (1, 2, 4, *((8,) if EIGHT else ())):
        result = search(cfg, nodes, 8, step_s)
        if not result.layouts:
            assert nodes * 8 < 16 or result.refused, name  # nothing fits: said why
            continue
        best = result.layouts[0]
        replayed = on(cfg, nodes, 8, best.layout.overrides())
        assert replayed.ok, [f.message for f in replayed.findings if f.level == "error"]
        assert replayed.plan.gpus_required <= nodes * 8
        own = on(cfg, nodes, 8)
        if own.ok and own.estimate is not None:
            assert best.step_s <= own.estimate.step_s + 1e-6, (name, nodes, best.layout.describe(), own.plan.breakdown())
        assert best.step_s <= previous + 1e-6, f"{name}: more GPUs raised the best time ({nodes} nodes)"
        previous = best.step_s
        assert [f.step_s for f in result.layouts] == sorted(f.step_s for f in result.layouts)


def test_layouts_on_the_live_cluster_fit_its_free_gpus():
    cfg = cfg_of("qwen2.5-7b-grpo")
    live = [NodeFree("a", "10.0.0.1", 8, 64), NodeFree("b", "10.0.0.2", 2, 64)]  # 6 GPUs of node b are taken
    result = search(cfg, 2, 8, step_s, live=live)
    assert result.layouts and all(f.gpus <= 10 for f in result.layouts)
    assert result.refused.get("placement (live)", 0) > 0


def test_keep_restricts_the_search():
    cfg = cfg_of("tiny-1node")
    result = search(cfg, 1, 8, step_s, keep=lambda layout: layout.actor.gpus == 2 and not layout.colocate)
    assert result.layouts and all(f.layout.actor.gpus == 2 and f.layout.colocate == () for f in result.layouts)


# -- the verb -----------------------------------------------------------------------------


def test_fit_prints_a_table_and_the_best_layouts_overrides():
    out = run_cli("fit", "llama70b-4node", "--top", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "s/step" in (out.stdout + out.stderr) and "best:" in (out.stdout + out.stderr) and "overrides:" in (out.stdout + out.stderr)
    assert "yours" in (out.stdout + out.stderr)


def test_fit_json_lists_layouts_best_first():
    out = run_cli("fit", "qwen2.5-7b-grpo", "--nodes", "2", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    steps = [row["estimate"]["step_s"] for row in data["layouts"]]
    assert steps == sorted(steps) and data["layouts"][0]["gpus"] <= 16


def test_fit_writes_the_config_with_the_best_layout_and_refuses_to_overwrite(tmp_path):
    target = tmp_path / "fitted.yaml"
    out = run_cli("fit", "llama70b-4node", "--nodes", "4", "-o", str(target))
    assert out.returncode == 0, out.stdout + out.stderr
    planned = run_cli("plan", str(target), "--json")
    assert planned.returncode == 0, planned.stdout
    assert json.loads(planned.stdout)["ok"]
    again = run_cli("fit", "llama70b-4node", "-o", str(target))
    assert again.returncode == 2 and "already exists" in (again.stdout + again.stderr)


def test_fit_with_no_valid_layout_says_why():
    out = run_cli("fit", "llama70b-4node", "--nodes", "1", "--gpus-per-node", "2")
    assert out.returncode == 2
    assert "no layout" in (out.stdout + out.stderr) and "memory" in (out.stdout + out.stderr)


def test_the_written_config_finds_the_presets_own_files_from_anywhere(tmp_path):
    """qwen2.5-7b-grpo names math_reward.py beside itself: the written config must still find it."""
    target = tmp_path / "elsewhere" / "fit.yaml"
    out = run_cli("fit", "qwen2.5-7b-grpo", "--nodes", "2", "-o", str(target))
    assert out.returncode == 0, out.stdout + out.stderr
    planned = run_cli("plan", str(target), "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
