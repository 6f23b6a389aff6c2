"""Progress from OpenRLHF driver logs, per release era (line formats: tests/data/diagnose/
LOG_FORMATS.md; each synthetic line below names the OpenRLHF file:line it mirrors), step
accounting, milestones and stall detection on a fake clock."""

from __future__ import annotations

import math

import pytest

from rlhf_launch.runs.progress import (
    Milestone,
    Tracker,
    default_deadlines,
    parse_deadlines,
    parse_metrics,
    release_key,
    scan,
    stall,
    total_steps,
)

# ---------------------------------------------------------------- lines per era

# 0.8.11: strategy.print(args) cli/train_ppo_ray.py:25 (flat Namespace)
ARGS_08 = "Namespace(actor_num_nodes=1, actor_num_gpus_per_node=8, rollout_batch_size=128, n_samples_per_prompt=4, num_episodes=2)"
# 0.8.11: vLLM engine creation trainer/ray/vllm_engine.py:44
VLLM_08 = "(LLMRayActor pid=2210) creating LLM with bundle_indices=[0, 1]"
# 0.8.11: model repr from strategy.print(actor) trainer/ray/ppo_actor.py:419
MODEL_08 = "(PolicyModelActor pid=2301) Actor("
# 0.8.11: episode bar trainer/ppo_trainer.py:458-463 (N = rollout batches per episode; initial = global_step + 1)
EPISODE_08 = "(PPOTrainer pid=2100) \nEpisode [1/2]:  30%|###       | 3/10 [05:01<11:43, 100.4s/it]"
# 0.8.11: train epoch bar trainer/ray/ppo_actor.py:175-202 (postfix act_loss, reward, return, gen_len, tot_len, kl, act_lr)
TRAIN_08 = "Train epoch [1/1]: 100%|##########| 8/8 [00:13<00:00,  1.63s/it, act_loss=0.795, reward=0.17, return=0.1, gen_len=412, tot_len=880, kl=0.0021, act_lr=5e-07]"
# 0.8.11: trainer/ppo_trainer.py:532
STEP_08 = (
    "(PPOTrainer pid=2100) INFO 03-11 19:53:36 ppo_trainer.py:532] \u2728 Global step {n}: "
    "{{'policy_loss': 0.12, 'actor_lr': 5e-07, 'kl': 0.0021, 'response_length': 412.5, 'total_length': 880.0, 'reward': 0.{n}, 'return': 0.38}}"
)
# 0.9.10: trainer/ppo_trainer.py:541, with the 0.9.6+ timing and 0.9.8+ rollout keys
STEP_09 = (
    "(PPOTrainer pid=3100) INFO 05-02 10:00:01 ppo_trainer.py:541] \u2728 Global step {n}: "
    "{{'policy_loss': 0.1, 'kl': 0.004, 'reward': 0.5, 'rollout/reward_mean': 0.55, 'timing/step_total': 312.5}}"
)
# 0.9.10 async trainer: trainer/ppo_trainer_async.py:240 (no emoji)
STEP_09_ASYNC = "(PPOTrainerAsync pid=3100) INFO 05-02 10:00:01 ppo_trainer_async.py:240] Global step {n}: {{'kl': 0.003, 'reward': 0.6}}"
# 0.9.10: episode bar counts prompts, trainer/ppo_trainer.py:514-518
EPISODE_09 = "Episode [1/1]:  12%|#2        | 256/2048 [10:00<1:10:00,  2.34s/it]"
# 0.9.9+: Generate samples bar trainer/ppo_utils/samples_generator.py:137
GENERATE_09 = "Generate samples:  50%|#####     | 64/128 [00:30<00:30,  2.1it/s, prompts_consumed=64]"
# 0.10.4 / 0.11.2: strategy.print(args) prints the hierarchized namespace (cli/train_ppo_ray.py:36)
ARGS_011 = (
    "namespace(ref=namespace(num_nodes=1, num_gpus_per_node=8), rollout=namespace(batch_size=128, n_samples_per_prompt=4, "
    "vllm_generate_batch_size=128), train=namespace(batch_size=64, num_episodes=2, max_epochs=1))"
)
# 0.11.2: trainer/ray/vllm_engine.py:88 under the 0.10.2+ actor name
VLLM_011 = "(RolloutRayActor pid=48211, ip=10.0.0.2) creating LLM with bundle_indices=[0, 1, 2, 3]"
# 0.11.2: checkpoint_states trainer/ppo_trainer.py:439
RESUME_011 = "(PPOTrainer pid=4182) INFO 09-14 10:01:00 ppo_trainer.py:439] checkpoint_states: {'episode': 0, 'global_step': 12, 'total_consumed_prompts': 1536, 'data_loader_state_dict': {}}"
# 0.11.2: episode bar trainer/ppo_trainer.py:522-526 (prompts)
EPISODE_011 = "(PPOTrainer pid=4182) Episode [1/2]:  75%|#######5  | 1536/2048 [3:00:00<1:00:00, 7.0s/it]"
# 0.11.2: trainer/ppo_trainer.py:551, with 0.11 keys
STEP_011 = (
    "(PPOTrainer pid=4182) INFO 09-14 10:02:11 ppo_trainer.py:551] \u2728 Global step {n}: "
    "{{'policy_loss': 0.05, 'actor_grad_norm': 0.8, 'kl': 0.0{n}, 'reward': 0.{n}, 'ppo_clip_ratio': 0.01, 'vllm_kl': nan}}"
)


def at(n: int, seconds: float) -> str:
    """STEP_011 of step n as the trainer's logger stamps it `seconds` after 10:00:00."""
    minute, second = divmod(int(seconds), 60)
    hour, minute = divmod(600 + minute, 60)
    return STEP_011.format(n=n).replace("10:02:11", f"{hour:02d}:{minute:02d}:{second:02d}")


def feed(tracker: Tracker, lines: list[str], now: float) -> list[tuple[Milestone, str]]:
    return tracker.feed("\n".join(lines) + "\n", now)


# ---------------------------------------------------------------- parsing


def test_metrics_are_a_python_repr_read_without_eval():
    assert parse_metrics("{'kl': 0.1, 'reward': -1e-3, 'x': None}") == {"kl": 0.1, "reward": -0.001, "x": None}
    odd = parse_metrics("{'kl': nan, 'r': np.float64(0.5), 't': tensor(0.25, device='cuda:0'), 'i': -inf}")
    assert math.isnan(odd["kl"]) and odd["r"] == 0.5 and odd["t"] == 0.25 and odd["i"] == -math.inf
    assert parse_metrics("{'kl': 0.1, 'bad': __import__('os')}") == {"kl": 0.1}  # never evaluated
    assert parse_metrics("not a dict") == {}


def test_release_key():
    assert release_key("0.10.2") == (0, 10, 2)
    assert release_key("0.8.0.post1") == (0, 8, 0)
    assert release_key(None) is None and release_key("main") is None


def test_scan_finds_milestones_in_order():
    lines = [
        ARGS_011,
        VLLM_011,
        "(RolloutRayActor pid=48211) INFO loading weights",
        EPISODE_011,
        STEP_011.format(n=13),
        STEP_011.format(n=14),
    ]
    assert [m for m, _ in scan(lines)] == [
        Milestone.PLACEMENT_READY,
        Milestone.PLACEMENT_READY,
        Milestone.MODELS_LOADED,
        Milestone.STEP,
        Milestone.STEP,
    ]
    assert scan([STEP_09_ASYNC.format(n=5)]) == [(Milestone.STEP, "5")]
    assert scan(["Evaluation completed in 0:01:00, global_step 5, eval_metrics: {}"]) == []


# ---------------------------------------------------------------- tracking per era


def test_era_08_steps_metrics_and_total_from_the_episode_bar():
    tracker = Tracker(release="0.8.11", started=0.0)
    found = feed(tracker, [ARGS_08, VLLM_08, MODEL_08, *EPISODE_08.splitlines(), TRAIN_08], 100.0)
    assert [m for m, _ in found] == [Milestone.PLACEMENT_READY, Milestone.MODELS_LOADED]
    assert tracker.total == 20  # 10 rollout batches per episode x 2 episodes
    assert tracker.metrics["reward"] == 0.17 and tracker.metrics["kl"] == 0.0021  # from the bar until a step line
    found = feed(tracker, [STEP_08.format(n=1)], 200.0)
    assert [m for m, _ in found] == [Milestone.FIRST_STEP, Milestone.STEP]
    feed(tracker, [STEP_08.format(n=2)], 300.0)
    progress = tracker.progress(300.0)
    assert (progress.step, progress.total_steps, progress.reward, progress.kl) == (2, 20, 0.2, 0.0021)
    # every step line of this excerpt has the same logger time: the bar's own meter (100.4 s a batch) is the rate
    assert progress.steps_per_hour == pytest.approx(3600 / 100.4, abs=0.001)
    assert progress.eta_seconds == 1807  # 18 steps at 100.4 s


def test_era_08_pre_083_bar_postfix_names_the_reward_rm():
    # lmm-r1 (OpenRLHF 0.6-0.8 fork) bar from OpenRLHF-era code: pg, rm, ret, glen, tlen, kl, act_lr
    tracker = Tracker()
    feed(
        tracker,
        ["Train epoch [1/1]: 100%|##########| 8/8 [02:00<00:00, 15.12s/it, pg=0.319, rm=0.163, ret=-0.0964, kl=0, act_lr=6.72e-9]"],
        1.0,
    )
    progress = tracker.progress()
    assert progress.reward == 0.163 and progress.kl == 0.0


def test_era_080_has_no_step_line_so_the_bar_counts():
    tracker = Tracker(release="0.8.0")
    # 0.8.0 trainer/ppo_trainer.py: bar initial=steps (= global_step + 1), no "Global step" line
    feed(tracker, ["Episode [1/1]:  40%|####      | 4/10 [05:00<07:30, 75.0s/it]"], 10.0)
    assert tracker.step == 3 and tracker.total == 10


def test_era_09_prompt_bar_needs_the_rollout_batch_size():
    tracker = Tracker(release="0.9.10")
    feed(tracker, [EPISODE_09], 1.0)
    assert tracker.total is None  # the bar counts prompts; steps need the rollout batch size
    tracker = Tracker(release="0.9.10")
    feed(tracker, [ARGS_08, GENERATE_09, EPISODE_09, STEP_09.format(n=4)], 1.0)
    assert tracker.total == 16  # 2048 prompts // 128 per step, 1 episode (0.10.x and older drop the partial batch)
    progress = tracker.progress()
    assert progress.reward == 0.5 and progress.kl == 0.004
    assert progress.metrics["rollout/reward_mean"] == 0.55


def test_era_09_async_trainer_step_line_has_no_emoji():
    tracker = Tracker()
    feed(tracker, [STEP_09_ASYNC.format(n=7)], 5.0)
    assert tracker.step == 7 and tracker.progress().reward == 0.6


def test_era_011_resume_nested_namespace_and_nan_metrics():
    tracker = Tracker(started=0.0)  # no release given: told from the log (namespace(...) = 0.10.2+)
    feed(tracker, [ARGS_011, VLLM_011, RESUME_011], 50.0)
    assert tracker.step == 12 and tracker.first_step is None  # resumed at 12, no step of this attempt yet
    assert Milestone.MODELS_LOADED in tracker.seen
    feed(tracker, [EPISODE_011, STEP_011.format(n=13)], 400.0)
    assert tracker.first_step == 13
    assert tracker.total == 32  # ceil(2048 / 128) x 2 episodes (0.11 trains the last partial batch)
    progress = tracker.progress()
    assert progress.reward == 0.13 and progress.kl == 0.013
    assert math.isnan(progress.metrics["vllm_kl"]) and "vllm_kl" not in progress.as_json()["metrics"]


def test_plan_total_wins_and_partial_lines_wait_for_their_end():
    tracker = Tracker(total_steps=100)
    line = STEP_011.format(n=5)
    assert tracker.feed(line[:40], 1.0) == []
    assert tracker.step is None
    found = tracker.feed(line[40:] + "\n", 2.0)
    assert (Milestone.STEP, "5") in found and tracker.step == 5 and tracker.total == 100


def test_rate_is_the_trainers_own_pace_not_the_pace_lines_were_read_at():
    tracker = Tracker(total_steps=40)
    # issue 28: `logs --follow` joined mid-run reads 18 steps of backlog in one chunk
    feed(tracker, [at(n, 3 * n) for n in range(1, 19)], 100.0)
    assert tracker.steps_per_hour() == pytest.approx(1200.0)  # one step per 3 s by the trainer's clock
    assert tracker.eta_seconds(100.0) == pytest.approx(22 * 3)
    feed(tracker, [at(19, 57)], 100.5)  # read half a second later: still the trainer's pace
    assert tracker.steps_per_hour() == pytest.approx(1200.0)
    assert tracker.eta_seconds(101.5) == pytest.approx(21 * 3 - 1)


def test_no_trustworthy_timing_means_no_rate():
    tracker = Tracker(total_steps=40)
    for when in (1.0, 2.0, 3.0):  # no logger time, no timing keys, no bar: only when the lines were read
        tracker.feed(f"Global step {int(when)}: {{'reward': 0.1}}\n", when * 1000)
    assert tracker.steps_per_hour() is None and tracker.eta_seconds(3000.0) is None
    assert tracker.progress(3000.0).steps_per_hour is None


def test_step_total_timings_then_the_bar_meter_when_logger_times_span_too_little():
    tracker = Tracker(total_steps=20)
    feed(tracker, [STEP_09.format(n=1), STEP_09.format(n=2)], 5.0)  # the same logger second: no span
    assert tracker.steps_per_hour() == pytest.approx(3600 / 312.5)  # `timing/step_total`
    bar = Tracker(release="0.11.2", rollout_batch_size=128)
    feed(bar, [EPISODE_011], 1.0)  # 7.0 s a prompt, 128 prompts a step
    assert bar.steps_per_hour() == pytest.approx(3600 / (7.0 * 128))
    unstarted = Tracker(release="0.8.11")
    feed(unstarted, ["Episode [1/1]:   0%|          | 0/8 [00:00<?, ?it/s]"], 1.0)
    assert unstarted.steps_per_hour() is None


def test_the_logger_clock_crosses_a_year():
    tracker = Tracker()
    late = STEP_011.format(n=1).replace("09-14 10:02:11", "12-31 23:59:50")
    early = STEP_011.format(n=2).replace("09-14 10:02:11", "01-01 00:00:10")
    feed(tracker, [late, early], 1.0)
    assert tracker.steps_per_hour() == pytest.approx(3600 / 20)


def test_progress_json_has_the_run_record_keys():
    tracker = Tracker(total_steps=4)
    feed(tracker, [at(1, 0)], 0.0)
    feed(tracker, [at(2, 60)], 60.0)
    data = tracker.progress(60.0).as_json()
    assert {"step", "total_steps", "steps_per_hour", "eta_seconds", "reward", "kl"} <= set(data)
    assert data["step"] == 2 and data["total_steps"] == 4 and data["eta_seconds"] == 120


# ---------------------------------------------------------------- step accounting


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("0.8.11", (15, 15)),  # 2000 // 128 = 15 batches per episode
        ("0.9.0", (15, 15)),
        ("0.9.10", (15, 15)),  # 2000 // 128: the partial batch is dropped
        ("0.10.4", (15, 15)),
        ("0.11.0", (16, 16)),  # ceil: 0.11.0 trains the last partial batch
        ("0.11.2", (16, 16)),
        (None, (16, 16)),  # unknown release: the newest behaviour
    ],
)
def test_total_steps_per_release(release, expected):
    count = total_steps(2000, 128, 4, 64, 1, 2, release)
    assert (count.global_steps, count.per_episode) == expected
    assert count.optimizer_steps == 2000 * 4 // 64 * 1 * 2  # OpenRLHF's max_steps, all releases


def test_total_steps_08_uses_the_generate_batch_and_episodes():
    assert total_steps(2048, 128, 1, 128, 3, 1, "0.8.5", vllm_generate_batch_size=256).global_steps == 24
    with pytest.raises(ValueError, match="rollout_batch_size"):
        total_steps(10, 0, 1, 1, 1, 1)


# ---------------------------------------------------------------- stalls


def test_deadlines_scale_with_model_size_and_nodes():
    small, big = default_deadlines(7, 1), default_deadlines(70, 4)
    assert all(big[m] >= small[m] for m in Milestone)
    assert 40 * 60 <= big[Milestone.MODELS_LOADED] <= 60 * 60  # a 70B load on 4 nodes: tens of minutes
    assert big[Milestone.STEP] >= 30 * 60  # a 70B PPO step can take 10+ minutes; be generous
    assert parse_deadlines({"step": 60}, big)[Milestone.STEP] == 60.0
    with pytest.raises(ValueError, match="unknown milestone 'steps'"):
        parse_deadlines({"steps": 60})
    with pytest.raises(ValueError, match="positive"):
        parse_deadlines({"step": -1})


def test_stall_at_each_milestone_on_a_fake_clock():
    deadlines = {m: 100.0 for m in Milestone}
    tracker = Tracker(started=0.0)
    assert stall(tracker, 50.0, deadlines) is None
    late = stall(tracker, 150.0, deadlines)
    assert late is not None and late.milestone is Milestone.RUNTIME_ENV_READY and late.waited == 150.0
    tracker.mark(Milestone.RUNTIME_ENV_READY, 120.0)  # the supervisor saw the job RUNNING
    assert stall(tracker, 200.0, deadlines) is None
    assert stall(tracker, 230.0, deadlines).milestone is Milestone.PLACEMENT_READY
    feed(tracker, [VLLM_011], 230.0)
    assert stall(tracker, 340.0, deadlines).milestone is Milestone.MODELS_LOADED
    feed(tracker, [EPISODE_011], 340.0)
    assert stall(tracker, 450.0, deadlines).milestone is Milestone.FIRST_STEP
    feed(tracker, [STEP_011.format(n=1)], 450.0)
    # the first step took 110 s (models loaded at 340): the next one may take 4x that
    assert stall(tracker, 450.0 + 439.0, deadlines) is None
    late = stall(tracker, 450.0 + 441.0, deadlines)
    assert late.milestone is Milestone.STEP and late.step == 1 and late.deadline == 440.0
    assert "no step after step 1" in late.message


def test_log_lines_imply_the_earlier_milestones():
    tracker = Tracker(started=0.0)
    feed(tracker, [STEP_011.format(n=3)], 10.0)
    assert set(tracker.seen) == set(Milestone)
    assert stall(tracker, 50.0, {m: 100.0 for m in Milestone}) is None


def test_a_slow_steady_run_is_not_a_stall():
    deadlines = {m: 100.0 for m in Milestone}
    tracker = Tracker(started=0.0)
    feed(tracker, [EPISODE_011], 0.0)
    for n, when in enumerate((1000.0, 2000.0, 3000.0), start=1):  # 1000 s per step, 10x the configured deadline
        feed(tracker, [STEP_011.format(n=n)], when)
    assert stall(tracker, 3000.0 + 3900.0, deadlines) is None  # within 4x the median step
    late = stall(tracker, 3000.0 + 4100.0, deadlines)
    assert late is not None and late.deadline == 4000.0


def test_no_deadline_no_stall():
    tracker = Tracker(started=0.0)
    assert stall(tracker, 1e9, {}) is None
    assert stall(Tracker(), 1e9, {m: 1.0 for m in Milestone}) is None  # no start time known


def test_re_reading_the_same_tail_changes_nothing():
    tracker = Tracker(total_steps=10)
    first = [at(1, 0), at(2, 100)]
    feed(tracker, first, 100.0)
    feed(tracker, [at(3, 200)], 200.0)
    assert feed(tracker, [*first, at(3, 200)], 300.0) == []  # an overlapping read of the log tail
    assert (tracker.step, tracker.progress().reward, tracker.steps_per_hour()) == (3, 0.3, 36.0)


def test_a_short_stall_says_seconds_once_and_hints_at_the_stall():
    from rlhf_launch.cli import report
    from rlhf_launch.runs.progress import stall_diagnosis

    tracker = Tracker(started=0.0)
    feed(tracker, [EPISODE_011, at(3, 0)], 10.0)
    late = stall(tracker, 35.0, {m: 20.0 for m in Milestone})
    assert late is not None and late.message == "no step after step 3 for 25 s (deadline 20 s)"
    unknown = {"class": "unknown", "retriable": False, "phase": None, "step": 3, "evidence": [], "hint": "no known failure class matched"}
    diagnosis = stall_diagnosis(unknown, late)
    text = report.diagnose_text({"run_id": "r", "attempt": 1, "job_id": "r-1", "job_status": "FAILED", **diagnosis})
    assert "  stalled: no step after step 3 for 25 s (deadline 20 s)" in text.splitlines()
    assert "stalled: stalled" not in text and "0 min" not in text
    assert diagnosis["class"] == "stall" and "no known failure class" not in diagnosis["hint"]
    assert "supervise.deadlines.step" in diagnosis["hint"]
    nccl = stall_diagnosis({**unknown, "class": "nccl", "hint": "check NCCL_SOCKET_IFNAME"}, late)
    assert "the log also shows nccl: check NCCL_SOCKET_IFNAME" in nccl["hint"]
    long = stall(tracker, 10.0 + 5000.0, {m: 3700.0 for m in Milestone})
    assert long is not None and long.message.endswith("(deadline 1 h 02 min)")
