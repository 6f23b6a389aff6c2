"""Helpers of the real-cluster tests: the stand-in trainer's overrides, submitting through the
CLI, polling a run as `runs` does, and what the stand-in recorded of each attempt."""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from conftest import ROOT, run_cli

STANDIN = ROOT / "tests" / "standin"
KEY = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c"


def standin(ckpt: Path, *, steps=6, crash_at=0, crash_times=1, step_seconds=0.5, version="0.11.2") -> list[str]:
    return [
        f"checkpoint.ckpt_path={ckpt}",
        f"checkpoint.save_path={ckpt}-final",
        "checkpoint.save_steps=2",
        # A 2-layer model and 8 prompts every node has (tests/standin/README.md): the test nodes
        # share one 24 GiB machine, where doctor rightly refuses an 8B model's host memory.
        f"models.actor={STANDIN / 'models' / 'tiny-actor'}",
        f"models.reward={STANDIN / 'models' / 'tiny-rm'}",
        f"data.prompt_dataset={STANDIN / 'data' / 'prompts.jsonl'}",
        f"openrlhf.version='{version}'",
        f"runtime_env.env_vars.PYTHONPATH={STANDIN}",
        f"runtime_env.env_vars.STANDIN_OPENRLHF_VERSION='{version}'",
        f"runtime_env.env_vars.STANDIN_STEPS='{steps}'",
        f"runtime_env.env_vars.STANDIN_STEP_SECONDS='{step_seconds}'",
        f"runtime_env.env_vars.STANDIN_CRASH_AT_STEP='{crash_at}'",
        f"runtime_env.env_vars.STANDIN_CRASH_TIMES='{crash_times}'",
    ]


def submit(env, *overrides, extra=(), preset="tiny-1node"):
    done = run_cli("submit", preset, *overrides, "--json", *extra, env=env, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


@contextmanager
def in_env(env):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def wait_run(env, run_id, statuses, timeout=240):
    """Poll as `rlhf-launch runs` does, in this process (spawning a CLI every second would
    take a core from the cluster on a 2-core machine)."""
    from rlhf_launch.runs.overview import overview

    with in_env(env):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = next(r for r in overview().rows if r["run_id"] == run_id)
            if row["status"] in statuses:
                return row
            time.sleep(1)
    raise AssertionError(f"{run_id} not in {statuses}: {row}")


def record(env, run_id) -> dict:
    return json.loads((Path(env["RLHF_LAUNCH_HOME"]) / "runs" / f"{run_id}.json").read_text())


def attempts_seen(ckpt: Path) -> list[dict]:
    path = ckpt / ".standin.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
