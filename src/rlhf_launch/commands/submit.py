"""`rlhf-launch submit CONFIG`: validate, preflight on the live cluster, record the run, submit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch import auth, lifecycle, presets, supervisor
from rlhf_launch.commands import preflight
from rlhf_launch.commands import plan as plan_cmd
from rlhf_launch.dashboard import resolve_address
from rlhf_launch.jobs import Jobs
from rlhf_launch.launch import Launch
from rlhf_launch.runs import Attempt, Run


@dataclass
class Submitted:
    launch: Launch
    live: preflight.Live | None
    run: Run | None = None
    attempt: Attempt | None = None
    watcher_pid: int | None = None

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
            out["watcher_pid"] = self.watcher_pid
        return out


def run(
    config: str,
    overrides: list[str],
    version: str | None,
    *,
    address: str | None,
    token_file: str | None,
    reserve: bool,
    reserve_timeout: float,
    auto_resume: int,
    backoff: float,
    poll: float,
) -> Submitted:
    launch = plan_cmd.run(config, overrides, version)
    if not launch.ok:
        return Submitted(launch, None)
    target = resolve_address(address, launch.cfg.cluster.address)
    live = preflight.run(launch, target, token_file, reserve=reserve, reserve_timeout=reserve_timeout)
    if any(f.level == "error" for f in live.findings):
        return Submitted(launch, live)
    jobs = Jobs(target, auth.find_token(token_file=token_file), checked=True)
    record = lifecycle.new_run(launch, jobs.address, str(presets.resolve(config)), overrides, auto_resume, backoff)
    attempt = lifecycle.submit_attempt(jobs, record.run_id, launch, "submit", load_checkpoint=False)
    pid = supervisor.spawn(record.run_id, poll, token_file) if auto_resume > 0 else None
    return Submitted(launch, live, record, attempt, pid)
