"""Re-planning a run onto the nodes left after one was lost (fit/replan.py): pure, no Ray."""

from __future__ import annotations

from rlhf_launch.core import presets
from rlhf_launch.core.config import apply_overrides, load_config, validate
from rlhf_launch.core.launch import prepare
from rlhf_launch.core.placement import NodeFree, declared_nodes
from rlhf_launch.core.rules import deepspeed_batches
from rlhf_launch.fit.replan import CheckpointFacts, Refusal, Replan, data_parallel, facts_of, replan, revision


def cfg_of(name, *overrides):
    return load_config(presets.config_path(name), list(overrides))


def planned(cfg, plan):
    assert isinstance(plan, Replan), plan
    new = plan.config(cfg.model_dump(mode="json"))
    launch = prepare(new)
    assert launch.ok, [f.message for f in launch.findings if f.level == "error"]
    return new, launch


def test_a_lost_vllm_node_keeps_the_training_roles_dp_and_gives_up_engines():
    cfg = cfg_of("tiny-1node")  # actor+ref 2, critic+reward 2, vLLM 4x1 on 8 GPUs
    old = prepare(cfg)
    plan = replan(cfg, declared_nodes(1, 6), facts_of(old, step=10))
    new, launch = planned(cfg, plan)
    assert plan.tier == "same_dp" and plan.convert == ()
    assert data_parallel(launch, "actor") == 2 and data_parallel(launch, "critic") == 2
    assert launch.plan.vllm_engines == 2 and launch.plan.gpus_required <= 6
    assert "checkpoint.universal=true" not in plan.overrides
    assert new.train.train_batch_size == cfg.train.train_batch_size
    assert new.train.rollout_batch_size == cfg.train.rollout_batch_size


def test_the_70b_run_on_three_of_its_four_nodes_keeps_actor_and_critic_at_8():
    cfg = cfg_of("llama70b-4node")
    plan = replan(cfg, declared_nodes(3, 8), facts_of(prepare(cfg), step=4))
    _, launch = planned(cfg, plan)
    assert plan.tier == "same_dp"
    assert data_parallel(launch, "actor") == 8 and data_parallel(launch, "critic") == 8
    assert launch.plan.gpus_required <= 24
    assert launch.cfg.deepspeed.adam_offload is True  # what the checkpoint's optimizer state was saved with


def test_when_the_dp_size_cannot_stay_the_checkpoint_is_to_be_converted():
    cfg = cfg_of("tiny-1node")
    plan = replan(cfg, declared_nodes(1, 3), facts_of(prepare(cfg), step=10))
    new, launch = planned(cfg, plan)
    assert plan.tier == "new_dp"
    assert set(plan.convert) == {"actor", "critic"}
    assert "checkpoint.universal=true" in plan.overrides and new.checkpoint.universal
    assert launch.plan.gpus_required <= 3
    assert new.train.train_batch_size == cfg.train.train_batch_size  # the global batch never changes


def test_without_conversion_allowed_a_dp_change_is_refused_saying_what_is_pinned():
    cfg = cfg_of("tiny-1node")
    refused = replan(cfg, declared_nodes(1, 3), facts_of(prepare(cfg)), allow_convert=False)
    assert isinstance(refused, Refusal)
    assert "actor DP 2" in refused.reason and "critic DP 2" in refused.reason


def test_a_smaller_micro_batch_makes_the_global_batch_valid_at_the_new_dp():
    # saved at DP 1 with micro 32 x 1 = 96 / 3; on 4 GPUs the best layout has actor DP 2:
    # 96 is not a multiple of 32 x 2, so the micro batch halves and the global batch stays
    cfg = cfg_of(
        "tiny-1node",
        "train.train_batch_size=96",
        "train.micro_train_batch_size=32",
        "placement.actor.gpus_per_node=1",
        "placement.critic.gpus_per_node=1",
    )
    plan = replan(cfg, declared_nodes(1, 4), CheckpointFacts(actor_dp=1, critic_dp=1, step=3))
    new, launch = planned(cfg, plan)
    assert "train.micro_train_batch_size=16" in plan.overrides
    assert new.train.train_batch_size == 96 and new.train.rollout_batch_size == cfg.train.rollout_batch_size
    t = new.train
    for role in ("actor", "critic"):
        assert t.train_batch_size % (t.micro_train_batch_size * data_parallel(launch, role)) == 0
    assert not deepspeed_batches(new, launch.plan, launch.settings)
    assert "micro_train_batch_size 32 -> 16" in revision(plan, 1, reason="node lost", at=0.0).summary


def test_too_few_gpus_for_any_layout_is_a_refusal_that_says_why():
    cfg = cfg_of("llama70b-4node")
    refused = replan(cfg, declared_nodes(1, 8), facts_of(prepare(cfg), step=4))
    assert isinstance(refused, Refusal)
    assert "1 live node" in refused.reason and "memory" in refused.reason
    assert "train_batch_size 128" in refused.reason


def test_no_gpu_left_is_a_refusal():
    cfg = cfg_of("tiny-1node")
    refused = replan(cfg, [NodeFree("head", "10.0.0.1", 0.0)], facts_of(prepare(cfg)))
    assert isinstance(refused, Refusal) and "no alive node has a GPU" in refused.reason


def test_the_layout_is_placed_on_the_live_nodes_free_gpus():
    cfg = cfg_of("tiny-1node")
    live = [NodeFree("a", "10.0.0.1", 4.0), NodeFree("b", "10.0.0.2", 2.0)]  # 6 GPUs, unevenly
    plan = replan(cfg, live, facts_of(prepare(cfg)))
    _, launch = planned(cfg, plan)
    from rlhf_launch.core.placement import simulate

    assert simulate(launch.plan.groups, live).failed is None


def test_a_run_without_a_checkpoint_has_nothing_pinned():
    cfg = cfg_of("tiny-1node")
    plan = replan(cfg, declared_nodes(1, 3), CheckpointFacts(actor_dp=None, critic_dp=None))
    assert isinstance(plan, Replan) and plan.convert == ()
    assert "checkpoint.universal=true" not in plan.overrides


def test_the_revision_says_what_changed_on_how_many_gpus_and_the_step_time_change():
    cfg = cfg_of("tiny-1node")
    plan = replan(cfg, declared_nodes(1, 6), facts_of(prepare(cfg), step=10))
    rev = revision(plan, 1, reason="node lost", lost="node 10.0.0.4 (id 3f2a1b2c, 2 GPUs)", at=0.0, from_step=10)
    assert rev.summary.startswith("vLLM 4x1 -> 2x1 on 6 GPUs; step time +")
    assert rev.summary.endswith("% by estimate")
    assert rev.old_gpus == 8 and rev.new_gpus == 6 and rev.from_step == 10
    assert "node 10.0.0.4" in rev.text() and "plan revision 1 (node lost" in rev.text()
    assert rev.as_json()["overrides"] == list(plan.overrides)
    # the recorded overrides rebuild the new layout from the run's config
    again = validate(apply_overrides(cfg.model_dump(mode="json"), rev.overrides))
    assert prepare(again).plan.breakdown() == rev.new


def test_a_dp_change_is_named_in_the_revision():
    cfg = cfg_of("tiny-1node")
    plan = replan(cfg, declared_nodes(1, 3), facts_of(prepare(cfg)))
    rev = revision(plan, 2, reason="node lost", at=0.0)
    assert "actor DP 2 -> 1" in rev.summary and "critic DP 2 -> 1" in rev.summary
    assert rev.convert == ["actor", "critic"]
