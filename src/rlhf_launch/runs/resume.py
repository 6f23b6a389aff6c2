"""Resume a recorded run: the same arguments plus the release's checkpoint load flag."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch import doctor
from rlhf_launch.cluster import doctor as cluster_doctor
from rlhf_launch.cluster import live as live_check
from rlhf_launch.cluster import sweep
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.dashboard import normalize
from rlhf_launch.core.findings import Finding, warning
from rlhf_launch.errors import UserError
from rlhf_launch.runs import checkpoints, claim, compat, gone, lifecycle, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus


@dataclass
class Resumed:
    run: Run
    attempt: Attempt | None
    checkpoint: checkpoints.CheckpointState | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.attempt is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run.run_id,
            "job_id": self.attempt.job_id if self.attempt else None,
            "attempt": self.attempt.number if self.attempt else None,
            "checkpoint": self.checkpoint.as_json() if self.checkpoint else None,
            "findings": [f.as_dict() for f in self.findings],
            "ok": self.ok,
        }


GONE_WAIT = 30.0


def resume(
    record: Run,
    overrides: list[str],
    cluster: Cluster,
    *,
    force: bool,
    allow_fresh: bool,
    moved: bool = False,
    sweeper: gone.Sweeper | None = None,
    skip_checks: tuple[str, ...] = (),
) -> Resumed:
    """moved: `cluster` is a new address for the run (the cluster was restarted elsewhere).
    sweeper: how to end the earlier attempts' processes (default: a probe job)."""
    if moved and cluster.address != record.address:
        record = runs.update(record.run_id, lambda r: setattr(r, "address", normalize(cluster.address)))
    jobs = cluster.checked().jobs
    record = lifecycle.observe(record, jobs)
    current = record.current
    if current is not None and current.status.is_live():
        raise UserError(
            f"run {record.run_id} is still running (attempt {current.number}, {current.job_id}: {current.status})",
            hint=f"rlhf-launch stop {record.run_id} first, or follow it with rlhf-launch logs {record.run_id} --follow",
        )
    if current is not None and current.status is AttemptStatus.SUCCEEDED and not force:
        raise UserError(
            f"run {record.run_id} already SUCCEEDED (attempt {current.number}): a resume would reserve its GPUs only to finish at once",
            hint="pass --force to resume it anyway (e.g. after raising train.num_episodes), or submit a new run",
        )
    earlier = [a.job_id for a in record.attempts]
    if earlier:  # a terminal job is not proof: its entrypoint may still start, or a process outlive it
        sweep_with = sweeper or (lambda r, j: sweep.by_probe_job(jobs, r, j))
        left = gone.wait_gone(jobs, cluster.dashboard, earlier, sweep_with, GONE_WAIT)
        if left:
            raise UserError(
                f"run {record.run_id}: an earlier attempt is not proven gone: " + "; ".join(x for lo in left for x in lo.describe()),
                hint=f"rlhf-launch stop {record.run_id} ends what is left; then resume",
            )
    from rlhf_launch.runs import checkpoints, replanning

    settled: list[Finding] = []  # said as a warning: the run loads its newest step as saved, not the converted one
    record = replanning.settle_universal(
        record, lambda r: checkpoints.discover(jobs, r.ckpt_path)[0].latest_step, lambda text: settled.append(warning("checkpoint", text))
    )
    launch = lifecycle.launch_for(record, overrides, load_checkpoint=True)
    refused = compat.refused_changes(lifecycle.launch_for(record, [], load_checkpoint=True), launch, lambda x: lifecycle.config_dict(x.cfg))
    if refused and not force:
        raise UserError(
            "the checkpoint cannot be resumed with " + "; ".join(c.text for c in refused),
            hint=(
                "a resume may change the micro batch sizes, gradient checkpointing, offload and vLLM settings, not these; "
                "submit a new run for them, or pass --force if you mean it"
            ),
        )
    if not launch.ok:
        errors = [f for f in launch.findings if f.level == "error"]
        raise UserError(f"the resumed config is invalid: {errors[0].key}: {errors[0].message}")
    state, findings = checkpoints.discover(jobs, record.ckpt_path)
    findings += settled + checkpoints.resume_findings(state, allow_fresh)
    live = live_check.check(launch, cluster)
    findings += live.findings
    if not any(f.level == "error" for f in findings):
        # not the disk budget: the run's own checkpoints already fill part of it (as the supervisor)
        report = cluster_doctor.on_cluster(launch, jobs, live.snapshot, skip=(*skip_checks, "checkpoints", "disk"))
        findings += doctor.skipped_findings(skip_checks) + report.as_findings()
    if any(f.level == "error" for f in findings):
        return Resumed(record, None, state, findings)
    claim.acquire(jobs, record.ckpt_path, record.run_id, previous_ok=force)  # one writer: refused while another run holds it
    attempt = lifecycle.submit_attempt(
        jobs, record.run_id, "resume", entrypoint=launch.spec.entrypoint, runtime_env=launch.spec.runtime_env, load_checkpoint=True
    )
    runs.update(record.run_id, lambda r: setattr(r.attempts[-1], "resumed_from_step", state.latest_step))
    if supervisor.live_supervisor(record, jobs) is None:  # progress, stalls, diagnosis; resumes if the run asks
        supervisor.start(runs.load(record.run_id), jobs)
    return Resumed(runs.load(record.run_id), attempt, state, findings)
