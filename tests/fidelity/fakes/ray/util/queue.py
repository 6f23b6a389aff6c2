from __future__ import annotations

from typing import Any


class Queue:
    def __init__(self, maxsize: int = 0, actor_options: dict[str, Any] | None = None) -> None:
        self.maxsize = maxsize
