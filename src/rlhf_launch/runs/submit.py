"""Submit a new run: the live checks, a record, the first attempt, and its supervisor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster import live as live_check
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.live import Live
from rlhf_launch.core.launch import Launch
from rlhf_launch.errors import ClusterError, UserError
from rlhf_launch.runs import lifecycle, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.lifecycle import Supervision
from rlhf_launch.runs.record import Attempt, Run


@dataclass
class Submitted:
    launch: Launch
    live: Live | None
    run: Run | None = None
    attempt: Attempt | None = None
    supervisor_job: str | None = None
    notes: list[str] = field(default_factory=list)

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
            out["notes"] = self.notes
        return out


def check_policy(launch: Launch, policy: Supervision, *, allow_fresh: bool) -> None:
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
    policy: Supervision = Supervision(),
) -> Submitted:
    if not launch.ok:
        return Submitted(launch, None)
    live = live_check.check(launch, cluster, reserve=reserve, reserve_timeout=reserve_timeout)
    if not live.ok:
        return Submitted(launch, live)
    record = lifecycle.new_run(launch, cluster.address, source, overrides, policy)
    try:
        attempt = lifecycle.submit_attempt(
            cluster.jobs,
            record.run_id,
            "submit",
            entrypoint=launch.spec.entrypoint,
            runtime_env=launch.spec.runtime_env,
            load_checkpoint=False,
        )
    except ClusterError as exc:  # recorded, but did the job reach Ray? Say how to find out, never hide the run
        raise UserError(
            f"run {record.run_id} is recorded, but the cluster did not confirm its first attempt: {exc.message}",
            hint=f"`rlhf-launch runs` shows whether {record.run_id}-1 reached the cluster; `rlhf-launch stop {record.run_id}` ends it",
        ) from None
    notes = []
    try:
        job: str | None = supervisor.start(runs.load(record.run_id), cluster.jobs)  # progress, stalls, diagnosis; resumes
    except (ClusterError, UserError) as exc:
        job = None
        notes.append(f"the run's supervisor was not started ({exc.message}): `rlhf-launch watch {record.run_id}` starts one")
    return Submitted(launch, live, runs.load(record.run_id), attempt, job, notes)
