"""Advisory file locks (fcntl.flock), the one locking primitive of the launcher.

`locked` serialises a read-modify-write between processes; `try_lock` takes a lock only if
it is free (and keeps it while the returned handle is open); `is_locked` asks whether some
process holds it. Locks end with the process that holds them, crash included.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def try_lock(path: Path) -> IO[str] | None:
    """The open, locked handle, or None when another process holds the lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")  # noqa: SIM115 - returned to the caller, who holds the lock with it
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def is_locked(path: Path) -> bool:
    handle = try_lock(path)
    if handle is None:
        return True
    handle.close()
    return False
