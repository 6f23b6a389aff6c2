"""The job to submit: entrypoint string, runtime_env, and the equivalent `ray job submit` line."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.secrets import SECRET_ENV, redact_env
from rlhf_launch.openrlhf.flagset import TRAINER_MODULE

PYTHON = "python3"


@dataclass(frozen=True)
class JobSpec:
    entrypoint: str
    runtime_env: dict[str, Any]  # what is submitted (may hold the W&B key in env_vars)

    @property
    def shown_runtime_env(self) -> dict[str, Any]:
        """runtime_env as printed or stored: the key replaced by a marker."""
        shown = dict(self.runtime_env)
        if "env_vars" in shown:
            shown["env_vars"] = redact_env(shown["env_vars"])
        return shown


def entrypoint(argv: list[str]) -> str:
    return shlex.join([PYTHON, "-m", TRAINER_MODULE, *argv])


# Environment variables OpenRLHF's train() passes to its own ray.init(runtime_env=...) (every
# release from 0.8.0). Ray refuses to merge a job's runtime_env that sets one of them ("Failed
# to merge the Job's runtime env ... because of a conflict") unless RAY_OVERRIDE_JOB_RUNTIME_ENV
# is 1, so the trainer would die at start-up; with it, the trainer's ray.init wins, and from
# 0.10.2 that reads the job's own value from its environment.
TRAINER_RAY_INIT_ENV = ("TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS")
OVERRIDE_ENV = "RAY_OVERRIDE_JOB_RUNTIME_ENV"


def runtime_env(cfg: LaunchConfig, secret: str | None, working_dir: str | None = None) -> dict[str, Any]:
    """`working_dir`: the directory to upload when the config sets none (it ships local files, core/shipped.py)."""
    env: dict[str, Any] = {}
    upload = cfg.runtime_env.working_dir or working_dir
    if upload:
        env["working_dir"] = upload
        env["excludes"] = list(cfg.runtime_env.excludes)
    env_vars = dict(cfg.runtime_env.env_vars)
    if secret:
        env_vars[SECRET_ENV] = secret
    if any(name in env_vars for name in TRAINER_RAY_INIT_ENV):
        env_vars.setdefault(OVERRIDE_ENV, "1")
    if env_vars:
        env["env_vars"] = env_vars
    return env


def job_spec(cfg: LaunchConfig, argv: list[str], secret: str | None, working_dir: str | None = None) -> JobSpec:
    return JobSpec(entrypoint=entrypoint(argv), runtime_env=runtime_env(cfg, secret, working_dir))


def _double_quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    return f'"{escaped}"'


def ray_job_submit(address: str, spec: JobSpec) -> str:
    """The `ray job submit` line that submits the same job. The W&B key is never in it: it is
    written as "$WANDB_API_KEY", expanded by the shell of whoever runs the line."""
    parts = ["ray", "job", "submit", "--address", shlex.quote(address)]
    if spec.runtime_env:
        env = json.loads(json.dumps(spec.runtime_env))
        has_secret = SECRET_ENV in env.get("env_vars", {})
        if has_secret:
            marker = "__RLHF_LAUNCH_SECRET__"
            env["env_vars"][SECRET_ENV] = marker
            quoted = _double_quoted(json.dumps(env, sort_keys=True)).replace(marker, "$" + SECRET_ENV)
        else:
            quoted = shlex.quote(json.dumps(env, sort_keys=True))
        parts += ["--runtime-env-json", quoted]
    parts += ["--", spec.entrypoint]
    return " ".join(parts)
