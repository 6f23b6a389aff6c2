"""Submit a new run: the live checks, a record, the first attempt, and its supervisor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster import live as live_check
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.live import Live
from rlhf_launch.core.launch import Launch
from rlhf_launch.errors import UserError
from rlhf_launch.runs import lifecycle, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.lifecycle import Policy
from rlhf_launch.runs.record import Attempt, Run


@dataclass
class Submitted:
    launch: Launch
    live: Live | None
    run: Run | None = None
    attempt: Attempt | None = None
    supervisor_job: str | None = None

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
            out["supervisor_job"] = self.supervisor_job
        return out


def check_policy(launch: Launch, policy: Policy, *, allow_fresh: bool) -> None:
    """Auto-resume needs checkpoints to resume from, or every resume restarts at step 0."""
    if policy.auto_resume > 0 and launch.cfg.checkpoint.save_steps <= 0 and not allow_fresh:
        raise UserError(
            f"--auto-resume {policy.auto_resume} with checkpoint.save_steps {launch.cfg.checkpoint.save_steps}: "
            "the trainer saves no checkpoint, so every automatic resume would start again from step 0",
            hint="set checkpoint.save_steps (e.g. checkpoint.save_steps=50), or pass --allow-fresh if restarting from 0 is what you want",
        )


def submit(
    launch: Launch,
    cluster: Cluster,
    *,
    source: str,
    overrides: list[str],
    reserve: bool = False,
    reserve_timeout: float = 60.0,
    policy: Policy = Policy(),
) -> Submitted:
    if not launch.ok:
        return Submitted(launch, None)
    live = live_check.check(launch, cluster, reserve=reserve, reserve_timeout=reserve_timeout)
    if not live.ok:
        return Submitted(launch, live)
    record = lifecycle.new_run(launch, cluster.address, source, overrides, policy)
    attempt = lifecycle.submit_attempt(
        cluster.jobs, record.run_id, "submit", entrypoint=launch.spec.entrypoint, runtime_env=launch.spec.runtime_env, load_checkpoint=False
    )
    job = supervisor.start(runs.load(record.run_id), cluster.jobs)  # progress, stalls, diagnosis; resumes if asked
    return Submitted(launch, live, runs.load(record.run_id), attempt, job)
