"""Submit a new run: the live checks, a record, the first attempt, and its supervisor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster import live as live_check
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.live import Live
from rlhf_launch.core.launch import Launch
from rlhf_launch.runs import lifecycle, supervisor
from rlhf_launch.runs.record import Attempt, Run


@dataclass
class Submitted:
    launch: Launch
    live: Live | None
    run: Run | None = None
    attempt: Attempt | None = None
    supervisor_pid: int | None = None

    @property
    def ok(self) -> bool:
        return self.run is not None

    def as_json(self) -> dict[str, Any]:
        out = self.launch.as_json()
        if self.live is not None:
            out["live"] = self.live.as_json()
        out["ok"] = self.ok
        if self.run is not None and self.attempt is not None:
            out["run_id"] = self.run.run_id
            out["job_id"] = self.attempt.job_id
            out["dashboard"] = f"{self.run.address}/#/jobs/{self.attempt.job_id}"
            out["watcher_pid"] = self.supervisor_pid
        return out


@dataclass(frozen=True)
class AutoResume:
    times: int = 0
    backoff: float = 10.0
    poll: float = 5.0


def submit(
    launch: Launch,
    cluster: Cluster,
    *,
    source: str,
    overrides: list[str],
    reserve: bool = False,
    reserve_timeout: float = 60.0,
    auto_resume: AutoResume = AutoResume(),
    token_file: str | None = None,
) -> Submitted:
    if not launch.ok:
        return Submitted(launch, None)
    live = live_check.check(launch, cluster, reserve=reserve, reserve_timeout=reserve_timeout)
    if not live.ok:
        return Submitted(launch, live)
    record = lifecycle.new_run(launch, cluster.address, source, overrides, auto_resume.times, auto_resume.backoff)
    attempt = lifecycle.submit_attempt(cluster.jobs, record.run_id, launch, "submit", load_checkpoint=False)
    pid = supervisor.spawn(record.run_id, auto_resume.poll, token_file) if auto_resume.times > 0 else None
    return Submitted(launch, live, record, attempt, pid)
