"""A finding: one problem or caution about a launch, tied to a config key."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Level = Literal["error", "warning"]

# Why an error refuses a config that OpenRLHF's own start-up (parser, checks, train() up to the
# trainer actors) would accept: the run would fail, or hang, later.
REASONS = {
    "placement": "Ray would wait forever to place the layout's GPUs",
    "deepspeed_batch": "DeepSpeed's batch check fails when the model is initialized",
    "trainer_init": "the trainer's actors fail when they load models, data or files",
    "memory": "a GPU or host runs out of memory",
}


@dataclass(frozen=True)
class Finding:
    level: Level
    key: str
    message: str
    hint: str = ""
    reason: str = ""  # one of REASONS when the launcher is stricter than OpenRLHF's start-up

    def as_dict(self) -> dict[str, str]:
        out = asdict(self)
        if not self.reason:
            del out["reason"]
        return out


def error(key: str, message: str, hint: str = "", reason: str = "") -> Finding:
    assert not reason or reason in REASONS, reason
    return Finding("error", key, message, hint, reason)


def warning(key: str, message: str, hint: str = "") -> Finding:
    return Finding("warning", key, message, hint)


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]
