"""Text as people read it: without terminal escape sequences."""

from __future__ import annotations

import re

__all__ = ["ANSI", "plain"]

# Terminal escapes: Ray colours its `(actor pid=..., ip=...)` prefixes (`\x1b[36m...\x1b[0m`),
# tqdm and loggers colour levels and move the cursor; OSC sequences set titles.
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def plain(text: str) -> str:
    """`text` without terminal escape sequences (colours, cursor moves, titles)."""
    return ANSI.sub("", text) if "\x1b" in text else text
