"""`StrEnum`: a str-valued enum that prints and formats as its value, and is JSON as-is (the
launcher's statuses, failure classes and milestones; Python 3.10 has no enum.StrEnum)."""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
