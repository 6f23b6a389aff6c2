"""Wait for a condition with a deadline: the one polling loop of the launcher."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(
    check: Callable[[], T],
    timeout: float,
    interval: float = 0.5,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `check` until it returns something truthy or `timeout` seconds have passed.

    Returns that truthy value, or the last (falsy) value at the deadline. `check` runs at
    least once, also with a timeout of 0; it is never called after the deadline passed.
    """
    deadline = clock() + timeout
    while True:
        value = check()
        if value:
            return value
        left = deadline - clock()
        if left <= 0:
            return value
        sleep(min(interval, left))
