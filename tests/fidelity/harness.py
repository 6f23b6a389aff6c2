"""Ask OpenRLHF's own start-up code, run on fakes, whether it accepts a trainer argv.

    verdict = real_startup("0.11.2", ["--actor.model_name_or_path", "m", ...])
    verdicts = real_startup_many("0.8.11", [argv1, argv2, ...])   # one process per worker, fast

See runner.py for how the script is run and fakes/ for the stand-ins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .wheels import trainer_root

RUNNER = Path(__file__).resolve().parent / "runner.py"
MIN_CHUNK = 40


@dataclass
class Verdict:
    ok: bool  # the real start-up accepted the config: train() ran to its end on the fakes
    stage: str  # "parse" (argparse rejected), "checks" (the __main__ block after parsing), "train", "done"
    error_type: str  # "SystemExit", "AssertionError", "UnboundLocalError", ...; "" if ok
    message: str  # the error message (argparse's own for a parse error)
    placement_groups: list[dict[str, Any]]  # {"bundles": [{"GPU": 1, "CPU": 1}, ...], "strategy": "PACK"}, in order
    actors: list[dict[str, Any]]  # every actor created: class, engine, num_gpus, num_cpus, placement_group, ...
    args: dict[str, Any]  # vars(args) as train() received it, dotted dest names ("actor.num_nodes")
    harness_error: str  # non-empty when the failure came from a fake or the harness, not from OpenRLHF
    output: str = field(default="", repr=False)  # tail of what the trainer printed

    def actor_count(self, cls: str) -> int:
        return sum(1 for actor in self.actors if actor["class"] == cls)

    @property
    def engines(self) -> list[dict[str, Any]]:
        """The vLLM engine actors."""
        return [actor for actor in self.actors if actor["engine"]]

    @property
    def bundle_counts(self) -> list[int]:
        """The size of each placement group, in creation order."""
        return [len(pg["bundles"]) for pg in self.placement_groups]


def _run(version: str, argvs: list[list[str]], timeout: float, values: dict[str, Any] | None) -> list[Verdict]:
    trainer_root(version)  # download here, where a failure is clearest
    env = {**os.environ, "FIDELITY_TIMEOUT": str(timeout), "FIDELITY_VALUES": json.dumps(values or {})}
    done = subprocess.run(
        [sys.executable, str(RUNNER), version],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=timeout * len(argvs) + 30,
    )
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(argvs):
        raise RuntimeError(f"fidelity runner failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return [Verdict(**json.loads(line)) for line in lines]


def real_startup_many(
    version: str,
    argvs: list[list[str]],
    timeout: float = 60,
    workers: int | None = None,
    values: dict[str, Any] | None = None,
) -> list[Verdict]:
    """One verdict per argv, in order; up to `workers` runner processes (default: one per CPU) share the list.

    The fakes report the versions the release pins (vllm, deepspeed, transformers, ...); `values`
    overrides those or any other value the fakes hand out, e.g. {"vllm.__version__": "0.10.1"}.
    """
    if not argvs:
        return []
    # Each argv costs some 20-30 ms, a runner process some 250 ms to start: split only long lists.
    workers = max(1, min(workers or os.cpu_count() or 1, -(-len(argvs) // MIN_CHUNK)))
    size = -(-len(argvs) // workers)
    chunks = [argvs[i : i + size] for i in range(0, len(argvs), size)]
    if len(chunks) == 1:
        return _run(version, chunks[0], timeout, values)
    trainer_root(version)  # download once, before the workers race for it
    with ThreadPoolExecutor(len(chunks)) as pool:
        results = pool.map(lambda chunk: _run(version, chunk, timeout, values), chunks)
    return [verdict for chunk in results for verdict in chunk]


def real_startup(version: str, argv: list[str], timeout: float = 60, values: dict[str, Any] | None = None) -> Verdict:
    """What OpenRLHF `version`'s own start-up makes of `argv` (the arguments after train_ppo_ray.py)."""
    return _run(version, [argv], timeout, values)[0]
