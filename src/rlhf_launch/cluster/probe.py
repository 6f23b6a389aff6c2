"""Run one of probes/*.py as a short Ray job and read its `RLHF_LAUNCH_RESULT {json}` line.

The probe's source goes inline (`python3 -c SOURCE ARG`), so the cluster needs nothing but
Ray and its tasks can use the workers Ray already started (no runtime_env to build). The
job is stopped if it overruns or the user presses Ctrl-C; nothing it held survives it.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf_launch.cluster.jobs import Jobs, JobStatus

MARKER = "RLHF_LAUNCH_RESULT"


@dataclass
class ProbeRun:
    job_id: str
    status: JobStatus
    result: Any
    seconds: float
    logs: str
    timed_out: bool = False
    driver_job_id: str | None = None  # the hex id Ray's state API knows its actors and groups by


def _parse(logs: str) -> Any:
    for line in reversed(logs.splitlines()):
        if line.startswith(MARKER + " "):
            try:
                return json.loads(line[len(MARKER) + 1 :])
            except ValueError:
                return None  # a truncated line: no result
    return None


def library(script: str) -> str:
    """A probe's source without its `__main__` block, to prepend to another probe's."""
    return (Path(__file__).parent / "probes" / script).read_text().split('\nif __name__ == "__main__":', 1)[0]


def source(script: str, uses: tuple[str, ...] = ()) -> str:
    """The source shipped for `script`: the probes it uses (their functions only), then its own."""
    return "\n\n".join([*(library(name) for name in uses), (Path(__file__).parent / "probes" / script).read_text()])


def run(jobs: Jobs, script: str, argument: str, deadline: float, kind: str, uses: tuple[str, ...] = ()) -> ProbeRun:
    """`uses`: other probes whose functions `script` calls (see `source`)."""
    job_id = f"rlhf-launch-{kind}-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    source_text = source(script, uses)
    jobs.submit(f"python3 -c {shlex.quote(source_text)} {shlex.quote(argument)}", {}, job_id, {"rlhf_launch": kind})
    status, timed_out = JobStatus.PENDING, False
    try:
        status = jobs.wait_terminal(job_id, deadline)
        timed_out = not status.is_terminal()
    finally:
        if not status.is_terminal():
            jobs.stop(job_id)
            status = jobs.wait_terminal(job_id, 30)
    logs = jobs.logs(job_id)
    driver = jobs.info(job_id).driver_job_id
    if status.is_terminal():
        jobs.delete(job_id)  # probes are the launcher's own business: keep the job table the user's
    return ProbeRun(job_id, status, _parse(logs), time.monotonic() - started, logs, timed_out, driver)
