"""Global steps of a run from its data and batch sizes, per release. Pure.

Shared by the plan's estimate (core/estimate.py) and the progress of a running job
(runs/progress.py, which re-exports these), so both count the same M.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rlhf_launch.core.config import LaunchConfig


def release_key(release: str | None) -> tuple[int, int, int] | None:
    """`0.10.2` / `0.8.0.post1` -> (0, 10, 2) / (0, 8, 0); None when unreadable."""
    if not release:
        return None
    parts = re.findall(r"\d+", release.split("+")[0])[:3]
    if len(parts) < 2:
        return None
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return nums[0], nums[1], nums[2]


class StepCount(NamedTuple):
    global_steps: int  # PPO iterations: what `Global step N` counts and `runs` shows as M
    optimizer_steps: int  # OpenRLHF's own `max_steps` (LR-scheduler length)
    per_episode: int  # global steps per episode


def total_steps(
    dataset_size: int,
    rollout_batch_size: int,
    n_samples_per_prompt: int,
    train_batch_size: int,
    num_episodes: int,
    max_epochs: int,
    release: str | None = None,
    *,
    vllm_generate_batch_size: int | None = None,
) -> StepCount:
    """Steps of a run of `dataset_size` prompts (after `max_samples`), per release
    (LOG_FORMATS.md §1-§4); without dynamic filtering, which can make a global step consume
    several generation batches.

    - 0.8.x-0.9.0: the prompt dataloader's batch is `vllm_generate_batch_size` (default
      `rollout_batch_size`), `drop_last=True`: `dataset_size // batch` global steps per
      episode (trainer/ppo_trainer.py:458-472 in 0.8.11).
    - 0.9.1-0.10.x: prompts are drawn one by one until a rollout batch is full and the loop
      breaks when the dataloader is exhausted, so the last partial batch is not trained on:
      `dataset_size // rollout_batch_size` (0.10.4 trainer/ppo_trainer.py:531-532).
    - 0.11.0+ (and an unknown release: the newest behaviour): the last partial batch is
      trained too: `ceil(dataset_size / rollout_batch_size)`.
    - optimizer steps, all releases: `dataset_size * n_samples // train_batch_size *
      num_episodes * max_epochs` (`max_steps`, trainer/ppo_trainer.py:348-354 in 0.8.11,
      :72-78 in 0.11.2).
    """
    for name, value in (
        ("dataset_size", dataset_size),
        ("rollout_batch_size", rollout_batch_size),
        ("n_samples_per_prompt", n_samples_per_prompt),
        ("train_batch_size", train_batch_size),
        ("num_episodes", num_episodes),
        ("max_epochs", max_epochs),
    ):
        if value < (0 if name == "dataset_size" else 1):
            raise ValueError(f"{name} must be positive, got {value}")
    key = release_key(release)
    if key is not None and key < (0, 9, 1):
        per_episode = dataset_size // (vllm_generate_batch_size or rollout_batch_size)
    elif key is not None and key < (0, 11, 0):
        per_episode = dataset_size // rollout_batch_size
    else:
        per_episode = -(-dataset_size // rollout_batch_size)
    optimizer = dataset_size * n_samples_per_prompt // train_batch_size * num_episodes * max_epochs
    return StepCount(per_episode * num_episodes, optimizer, per_episode)


def planned_steps(cfg: LaunchConfig, version: str | None) -> int | None:
    """Global steps of the run when `data.max_samples` bounds its prompts (None otherwise):
    an upper bound, since the dataset may hold fewer; the trainer's episode bar corrects it."""
    train, samples = cfg.train, cfg.data.max_samples
    if not samples:
        return None
    count = total_steps(
        samples,
        train.rollout_batch_size,
        train.n_samples_per_prompt,
        train.train_batch_size,
        train.num_episodes,
        train.max_epochs,
        version,
        vllm_generate_batch_size=train.vllm_generate_batch_size,
    )
    return count.global_steps or None
