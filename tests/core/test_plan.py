"""Per-role GPUs after colocation: the plan against ARCHITECTURE's GPU formula."""

from __future__ import annotations

import itertools

import pytest

from rlhf_launch.core.config import validate
from rlhf_launch.core.plan import TrainerExtras, build_plan


def make(colocate=(), kl=0.01, estimator="gae", remote=False, a=(1, 8), r=(1, 8), c=(1, 8), m=(1, 8), v=(2, 4)):
    data = {
        "name": "t",
        "models": {"actor": "x", "reward": None if remote else "rm", "reward_remote_url": "http://rm" if remote else None},
        "placement": {
            "actor": {"nodes": a[0], "gpus_per_node": a[1]},
            "ref": {"nodes": r[0], "gpus_per_node": r[1]},
            "critic": {"nodes": c[0], "gpus_per_node": c[1]},
            "reward": {"nodes": m[0], "gpus_per_node": m[1]},
            "vllm": {"engines": v[0], "tensor_parallel_size": v[1]},
            "colocate": list(colocate),
        },
        "train": {"init_kl_coef": kl, "advantage_estimator": estimator},
    }
    return validate(data)


def formula(colocate, A, R, C, M, V, async_train=False):
    """ARCHITECTURE.md: GPUs a layout needs."""
    if "all" in colocate:
        return A if not async_train else A + V
    actor_ref = "actor_ref" in colocate
    critic_reward = "critic_reward" in colocate and C > 0
    total = A + V
    total += 0 if actor_ref else R
    total += C
    total += 0 if critic_reward else M
    return total


CASES = list(
    itertools.product(
        [(), ("actor_ref",), ("critic_reward",), ("actor_ref", "critic_reward")],
        [0.0, 0.01],
        ["gae", "rloo"],
        [False, True],
    )
)


@pytest.mark.parametrize("colocate,kl,estimator,remote", CASES)
def test_gpus_required_matches_the_formula(colocate, kl, estimator, remote):
    plan = build_plan(make(colocate, kl, estimator, remote, a=(1, 8), r=(1, 8), c=(1, 8), m=(1, 8), v=(3, 2)))
    A, V = 8, 6
    R = 8 if kl > 0 else 0
    C = 8 if estimator == "gae" else 0
    M = 0 if remote else 8
    assert plan.gpus_required == formula(colocate, A, R, C, M, V)


def test_published_70b_layout_needs_40():
    plan = build_plan(make(v=(2, 4)))
    assert plan.gpus_required == 40
    assert plan.breakdown() == "actor 8 + critic 8 + ref 8 + reward 8 + vLLM 2x4"


def test_colocate_all_puts_everything_in_the_actors_group():
    plan = build_plan(make(colocate=["all"], a=(2, 8), r=(2, 8), c=(2, 8), m=(2, 8), v=(4, 4)))
    assert plan.gpus_required == 16
    assert len(plan.groups) == 1
    assert set(plan.groups[0].roles) == {"actor", "ref", "vllm", "critic", "reward"}
    assert plan.groups[0].chunk == 4
    assert plan.sync_colocate_all


def test_async_colocate_all_gives_vllm_its_own_gpus():
    plan = build_plan(make(colocate=["all"], a=(1, 8), r=(1, 8), c=(1, 8), m=(1, 8), v=(2, 4)), TrainerExtras(async_train=True))
    assert plan.gpus_required == 16
    assert [g.roles for g in plan.groups][1] == ("vllm",)


def test_roles_default_to_their_colocated_partner():
    cfg = validate(
        {
            "name": "t",
            "models": {"actor": "x", "reward": "rm"},
            "placement": {
                "actor": {"nodes": 2, "gpus_per_node": 4},
                "critic": {"nodes": 1, "gpus_per_node": 2},
                "colocate": ["actor_ref", "critic_reward"],
            },
        }
    )
    plan = build_plan(cfg)
    assert (plan.role("ref").nodes, plan.role("ref").gpus_per_node) == (2, 4)
    assert (plan.role("reward").nodes, plan.role("reward").gpus_per_node) == (1, 2)
    # without colocation a role gets OpenRLHF's default 1 x 8
    plain = build_plan(validate({"name": "t", "models": {"actor": "x", "reward": "rm"}}))
    assert (plain.role("ref").nodes, plain.role("ref").gpus_per_node) == (1, 8)


def test_order_matches_openrlhf_creation_order():
    plan = build_plan(make(colocate=["actor_ref", "critic_reward"]))
    assert [g.roles for g in plan.groups] == [("actor", "ref"), ("vllm",), ("critic", "reward")]
    plain = build_plan(make())
    assert [g.roles for g in plain.groups] == [("vllm",), ("actor",), ("ref",), ("critic",), ("reward",)]


def test_single_gpu_per_node_roles_are_separate_actors():
    plan = build_plan(make(a=(2, 1)))
    actor = next(g for g in plan.groups if g.roles == ("actor",))
    assert actor.packed is False and actor.bundles == 2


def test_disabled_roles_say_why():
    plan = build_plan(make(kl=0, estimator="rloo", remote=True))
    assert not plan.role("ref").enabled and "init_kl_coef" in plan.role("ref").reason
    assert not plan.role("critic").enabled and "rloo" in plan.role("critic").reason
    assert not plan.role("reward").enabled and "remote" in plan.role("reward").reason
