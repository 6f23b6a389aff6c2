"""Which expanded command runs OpenRLHF's trainer, what launches it, and the `ray job submit`
options around it. Pure functions of an argv."""

from __future__ import annotations

import json
import re
from typing import Any

from rlhf_launch.importer.bash.expand import clip

TRAINER_MODULE = "openrlhf.cli.train_ppo_ray"
_TRAINER_PATH = re.compile(r"(?:^|/)openrlhf/cli/train_ppo_ray\.py$")
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?$")
SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_NOT_LAUNCHERS = {
    "echo", "printf", "pkill", "pgrep", "kill", "killall", "grep", "ps", "cat", "tail", "head",
    "ls", "cp", "mv", "rm", "logger", "test", "[", "[[", "true", ":", "nvidia-smi",
}  # fmt: skip
# `ray job submit` options that take a value as the next argument.
_RAY_VALUE_OPTIONS = {
    "--address", "--runtime-env-json", "--working-dir", "--runtime-env", "--submission-id",
    "--job-id", "--metadata-json", "--entrypoint-num-cpus", "--entrypoint-num-gpus",
    "--entrypoint-memory", "--entrypoint-resources", "--entrypoint-label-selector",
    "--headers", "--log-style", "--log-color",
}  # fmt: skip


def _is_launcher(arg: str) -> bool:
    base = arg.rsplit("/", 1)[-1]
    return bool(_PYTHON.match(base)) or base in ("deepspeed", "torchrun")


def trainer_index(argv: list[str]) -> int | None:
    """Index of the trainer module (after -m/--module) or of a .../openrlhf/cli/train_ppo_ray.py path."""
    if not argv or argv[0].rsplit("/", 1)[-1] in _NOT_LAUNCHERS:
        return None
    for k, arg in enumerate(argv):
        if arg == TRAINER_MODULE and k > 0:
            prev = argv[k - 1]
            if prev in ("-m", "--module") or re.fullmatch(r"-[A-Za-z]*m", prev):
                return k
        if _TRAINER_PATH.search(arg) and any(_is_launcher(a) for a in argv[:k]):
            return k
    return None


def ray_index(argv: list[str]) -> int | None:
    for k in range(len(argv) - 2):
        if argv[k].rsplit("/", 1)[-1] == "ray" and argv[k + 1] == "job" and argv[k + 2] == "submit":
            return k
    return None


def launcher(argv: list[str], at: int, notes: list[str]) -> tuple[str, int]:
    """The program that runs the trainer module, and its index in argv."""
    for k in range(at - 1, -1, -1):
        base = argv[k].rsplit("/", 1)[-1]
        if base == "torchrun" or argv[k] in ("torch.distributed.run", "torch.distributed.launch"):
            j = k
            if argv[k].startswith("torch.") and k >= 2 and _PYTHON.match(argv[k - 2].rsplit("/", 1)[-1]):
                j = k - 2
            return "torchrun", j
        if base == "deepspeed":
            return "deepspeed", k
        if _PYTHON.match(base):
            return "python", k
        if argv[k] == "--":
            break
    guess = at - 2 if argv[at - 1] in ("-m", "--module") else at - 1
    guess = max(guess, 0)
    notes.append(f"the program that runs the trainer ({argv[guess]!r}) is not python, deepspeed or torchrun; taken as python")
    return "python", guess


def ray_options(
    argv: list[str], ray_at: int, launcher_at: int, env_address: str | None, notes: list[str]
) -> tuple[str | None, dict[str, Any] | None]:
    """The Ray address and runtime env of `ray job submit` at argv[ray_at] (`env_address`: the
    script's RAY_ADDRESS, used when there is no --address)."""
    end = argv.index("--", ray_at) if "--" in argv[ray_at:launcher_at] else launcher_at
    opts = _ray_opts(argv, ray_at + 3, end)
    address = opts.get("--address")
    if address is None:
        if env_address is not None:
            address = env_address
            notes.append(f"ray job submit has no --address; using RAY_ADDRESS={env_address}")
        else:
            notes.append("ray job submit has no --address and RAY_ADDRESS is not set in the script")
    runtime_env = _runtime_env_json(opts.get("--runtime-env-json"), notes)
    if "--runtime-env" in opts:
        notes.append(f"--runtime-env {opts['--runtime-env']} names a YAML file, which is not read")
    if "--working-dir" in opts:
        runtime_env = dict(runtime_env or {})
        runtime_env["working_dir"] = opts["--working-dir"]
        notes.append(f"--working-dir {opts['--working-dir']} is taken as runtime_env working_dir")
    return address, runtime_env


def _ray_opts(argv: list[str], k: int, end: int) -> dict[str, str]:
    opts: dict[str, str] = {}
    while k < end:
        arg = argv[k]
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg.partition("=")
            opts[key] = value
        elif arg in _RAY_VALUE_OPTIONS and k + 1 < end:
            opts[arg] = argv[k + 1]
            k += 1
        k += 1
    return opts


def _runtime_env_json(raw: str | None, notes: list[str]) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        notes.append(f"--runtime-env-json is not valid JSON ({exc.msg} at column {exc.colno}): {clip(raw)}")
        return None
    if isinstance(parsed, dict):
        return parsed
    notes.append("--runtime-env-json is not a JSON object")
    return None
