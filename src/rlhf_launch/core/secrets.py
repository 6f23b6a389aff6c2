"""Secrets: the W&B key, read from the launcher's environment, passed only through
runtime_env, never shown; and the one redaction policy for anything shown or stored (log
lines, evidence, messages): the environment's key and anything shaped like a secret."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["REDACTED", "SECRET_ENV", "redact", "redact_env", "redact_line", "wandb_key"]

SECRET_ENV = "WANDB_API_KEY"
REDACTED = "<redacted>"

# Shapes of secrets, whatever the environment holds: bearer tokens, `hf_...` tokens, a
# 40-hex W&B key (Ray's 56-hex ids are left alone), `wandb_v1_...` keys, `key=`/`token=`
# style values (namespace(wandb=namespace(key='...')) included), a value given to any name that
# ends like a secret's (WANDB_API_KEY=, HF_TOKEN:), the W&B key flags.
SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer|token)(\s+|=|:\s*)[A-Za-z0-9._~+/=-]{8,}"), rf"\1\2{REDACTED}"),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), REDACTED),
    (re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])"), REDACTED),
    (re.compile(r"\bwandb_v\d+_[A-Za-z0-9_]{16,}"), REDACTED),
    (
        re.compile(r"(?i)\b((?:use_wandb|api[_-]?key|(?:access|auth)[_-]?token|token|password|secret)\s*[=:]\s*)(['\"]?)[^'\"\s,)]{6,}\2"),
        rf"\1\2{REDACTED}\2",
    ),
    (re.compile(r"\b(key\s*=\s*)(['\"]?)[^'\"\s,)]{6,}\2"), rf"\1\2{REDACTED}\2"),
    # a secret's name inside a longer one: `runtime_env.env_vars.WANDB_API_KEY=abc123`, HF_TOKEN=...
    (
        re.compile(
            r"(?i)((?<![A-Za-z0-9])[A-Za-z0-9_.]*?(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|"
            r"token|secret|password|passwd)\s*[=:]\s*)(['\"]?)[^'\"\s,)]{4,}\2"
        ),
        rf"\1\2{REDACTED}\2",
    ),
    (re.compile(r"(--(?:use_wandb|logger\.wandb\.key)[ =])\S+"), rf"\1{REDACTED}"),
)


def wandb_key(environ: Mapping[str, str] | None = None) -> str | None:
    value = (environ if environ is not None else os.environ).get(SECRET_ENV, "").strip()
    return value or None


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with each known secret value (at least 4 characters) replaced, the longest
    first (one secret may hold another)."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redact_line(line: str, environ: Mapping[str, str] | None = None, secrets: Iterable[str | None] = ()) -> str:
    """A line fit to show: the W&B key of the environment, the given secret values, and
    anything shaped like a secret replaced."""
    line = redact(line, [wandb_key(environ), *secrets])
    for pattern, replacement in SECRET_PATTERNS:
        line = pattern.sub(replacement, line)
    return line


def redact_env(env_vars: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if k == SECRET_ENV else v) for k, v in env_vars.items()}
