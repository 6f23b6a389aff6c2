"""A finding: one problem or caution about a launch, tied to a config key."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    level: Level
    key: str
    message: str
    hint: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def error(key: str, message: str, hint: str = "") -> Finding:
    return Finding("error", key, message, hint)


def warning(key: str, message: str, hint: str = "") -> Finding:
    return Finding("warning", key, message, hint)


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]
