"""Everything the CLI prints goes through here, so the W&B key is redacted everywhere."""

from __future__ import annotations

import json
import sys
from typing import Any

from rlhf_launch.errors import UserError
from rlhf_launch.secrets import redact, wandb_key


def _clean(text: str) -> str:
    return redact(text, [wandb_key()])


def echo(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(_clean(text) + end)
    stream.flush()


def echo_json(data: Any) -> None:
    echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def user_error(exc: UserError) -> None:
    echo(f"error: {exc.message}", err=True)
    if exc.hint:
        echo(f"  hint: {exc.hint}", err=True)
