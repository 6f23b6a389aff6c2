"""A Ray dashboard address as the cluster edge accepts it. Its own module, so the cluster edge
checks an address without importing the config schema (pydantic, yaml)."""

from __future__ import annotations

import re

_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
_ADDRESS = re.compile(rf"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<host>{_HOST})(?::(?P<port>\d{{1,5}}))?(?P<path>/(?!/)[^\s?#]*)?")


def check_address(value: str) -> str:
    """A Ray dashboard address: `host:port` or an http(s) URL (what the cluster edge accepts)."""
    match = _ADDRESS.fullmatch(value.strip())
    if not match or (match["scheme"] or "http") not in ("http", "https") or (match["path"] and not match["scheme"]):
        raise ValueError("not an http(s) address of the Ray dashboard, e.g. http://127.0.0.1:8265")
    if match["port"] is not None and not 1 <= int(match["port"]) <= 65535:
        raise ValueError(f"port {match['port']} is out of range 1-65535")
    return value
