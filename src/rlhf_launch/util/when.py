"""A moment as a person reads it in a message: the local clock time, with the date when it is
not today."""

from __future__ import annotations

import time


def moment(ts: float, now: float | None = None) -> str:
    """`12:03:41` today (local time), else `2025-05-01 12:03:41`."""
    now = time.time() if now is None else now
    day = time.strftime("%Y-%m-%d", time.localtime(ts))
    clock = time.strftime("%H:%M:%S", time.localtime(ts))
    return clock if day == time.strftime("%Y-%m-%d", time.localtime(now)) else f"{day} {clock}"
