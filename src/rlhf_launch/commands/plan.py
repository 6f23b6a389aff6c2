"""`rlhf-launch plan` (and `submit --dry-run`): config -> validated launch, no cluster."""

from __future__ import annotations

from rlhf_launch import presets
from rlhf_launch.config import load_config
from rlhf_launch.launch import Launch, prepare


def run(config: str, overrides: list[str], version: str | None = None, *, load_checkpoint: bool = False) -> Launch:
    cfg = load_config(presets.resolve(config), overrides)
    return prepare(cfg, version=version, load_checkpoint=load_checkpoint)
