"""`rlhf-launch resume [RUN]`: resubmit a recorded run with the checkpoint load flag."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch import auth, checkpoints, lifecycle, probejob, runs
from rlhf_launch.commands import preflight
from rlhf_launch.dashboard import normalize
from rlhf_launch.errors import UserError
from rlhf_launch.findings import Finding
from rlhf_launch.jobs import Jobs
from rlhf_launch.runs import Attempt, Run


@dataclass
class Resumed:
    run: Run
    attempt: Attempt | None
    checkpoint: checkpoints.CheckpointState | None
    findings: list[Finding] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run.run_id,
            "job_id": self.attempt.job_id if self.attempt else None,
            "attempt": self.attempt.number if self.attempt else None,
            "checkpoint": self.checkpoint.as_json() if self.checkpoint else None,
            "findings": [f.as_dict() for f in self.findings],
            "ok": self.attempt is not None,
        }


def discover(jobs: Jobs | None, path: str) -> tuple[checkpoints.CheckpointState, list[Finding]]:
    """The trainer's view of ckpt_path: read on every alive node when a cluster is at hand."""
    if jobs is None:
        return checkpoints.read_local(path), []
    probe = probejob.run(jobs, "ckpt.py", path, 120, "ckpt")
    if not probe.result:
        raise UserError(f"could not list {path} on the cluster (probe job {probe.job_id} ended {probe.status})")
    per_node = probe.result
    first = next(iter(per_node.values()))
    return checkpoints.parse(first["listing"]), checkpoints.compare_nodes(per_node)


def run(
    run_id: str | None,
    overrides: list[str],
    *,
    force: bool,
    allow_fresh: bool,
    address: str | None,
    token_file: str | None,
) -> Resumed:
    record = runs.resolve(run_id)
    if address and address != record.address:  # the cluster moved (restarted elsewhere)
        record = runs.update(record.run_id, lambda r: setattr(r, "address", normalize(address)))
    jobs = Jobs(record.address, auth.find_token(token_file=token_file))
    record = lifecycle.observe(record, jobs)
    current = record.current
    if current is not None and current.status in ("PENDING", "RUNNING", "SUBMITTING"):
        raise UserError(
            f"run {record.run_id} is still running (attempt {current.number}, {current.job_id}: {current.status})",
            hint=f"rlhf-launch stop {record.run_id} first, or follow it with rlhf-launch logs {record.run_id} --follow",
        )
    launch = lifecycle.launch_for(record, overrides, load_checkpoint=True)
    changed = lifecycle.changed_sensitive_keys(record.config, lifecycle.config_dict(launch.cfg))
    if changed and not force:
        raise UserError(
            f"these overrides change what the checkpoint was made with: {', '.join(changed)}",
            hint="OpenRLHF needs the same layout and batch sizes to load it; pass --force if you mean it",
        )
    if not launch.ok:
        errors = [f for f in launch.findings if f.level == "error"]
        raise UserError(f"the resumed config is invalid: {errors[0].key}: {errors[0].message}")
    state, findings = discover(jobs, record.ckpt_path)
    findings += checkpoints.resume_findings(state, allow_fresh)
    live = preflight.run(launch, record.address, token_file)
    findings += live.findings
    if any(f.level == "error" for f in findings):
        return Resumed(record, None, state, findings)
    attempt = lifecycle.submit_attempt(jobs, record.run_id, launch, "resume", load_checkpoint=True)
    runs.update(record.run_id, lambda r: setattr(r.current, "resumed_from_step", state.latest_step))
    return Resumed(runs.load(record.run_id), attempt, state, findings)
