"""The W&B key: read from the launcher's environment, passed only through runtime_env, never shown."""

from __future__ import annotations

import os
from collections.abc import Mapping

SECRET_ENV = "WANDB_API_KEY"
REDACTED = "<redacted>"


def wandb_key(environ: Mapping[str, str] | None = None) -> str | None:
    value = (environ if environ is not None else os.environ).get(SECRET_ENV, "").strip()
    return value or None


def redact(text: str, secrets: list[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text


def redact_env(env_vars: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if k == SECRET_ENV else v) for k, v in env_vars.items()}
