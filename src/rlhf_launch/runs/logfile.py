"""A driver log file on this machine, diagnosed from its end (`diagnose --log FILE`): the
edge that opens the file and hands diagnose/ a pread over it (diagnose/ itself is pure)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlhf_launch.diagnose import Diagnosis, diagnose_reader


def diagnose_file(
    path: str | Path,
    *,
    job_message: str = "",
    dead_actors: Sequence[Mapping[str, Any]] = (),
    pending_groups: Sequence[Mapping[str, Any]] = (),
    exit_code: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Diagnosis:
    """Diagnose a driver log file of any size: memory stays at a few chunks whatever the size."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        return diagnose_reader(
            lambda offset, length: os.pread(fd, length, offset),
            os.fstat(fd).st_size,
            job_message=job_message,
            dead_actors=dead_actors,
            pending_groups=pending_groups,
            exit_code=exit_code,
            environ=environ,
        )
    finally:
        os.close(fd)
