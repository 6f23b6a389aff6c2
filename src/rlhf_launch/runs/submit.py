"""Submit a new run: the live checks, a record, the first attempt, and its supervisor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster import live as live_check
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.live import Live
from rlhf_launch.core.launch import Launch
from rlhf_launch.errors import ClusterError, UserError
from rlhf_launch.runs import checkpoints, claim, lifecycle, supervisor
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
    doctor: Any = None  # doctor.checks.Report of the nodes, when the checks ran

    @property
    def ok(self) -> bool:
        return self.run is not None

    def as_json(self) -> dict[str, Any]:
        out = self.launch.as_json()
        if self.live is not None:
            out["live"] = self.live.as_json()
        if self.doctor is not None:
            out["doctor"] = self.doctor.as_json()
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
    skip_checks: tuple[str, ...] = (),
    move_aside: bool = False,
) -> Submitted:
    """The live checks, the nodes' checks (doctor, less `skip_checks`), the checkpoint guard
    (ckpt_path claimed by no live run and holding no checkpoints, unless `move_aside` or the
    config's checkpoint.load, which continues them), then
    the record, the claim, the first attempt and its supervisor."""
    from rlhf_launch import doctor
    from rlhf_launch.cluster import doctor as cluster_doctor

    if not launch.ok:
        return Submitted(launch, None)
    live = live_check.check(launch, cluster, reserve=reserve, reserve_timeout=reserve_timeout)
    if not live.ok:
        return Submitted(launch, live)
    path = launch.cfg.checkpoint.ckpt_path
    found = claim.scan(cluster.jobs, path)
    claim.refuse_if_in_use(found, path, run_id="")  # before the node checks: it costs one read
    held = found.newest
    report = cluster_doctor.on_cluster(launch, cluster.jobs, live.snapshot, skip=(*skip_checks, "checkpoints"))
    live.findings += doctor.skipped_findings(skip_checks) + report.as_findings()
    if not report.ok:
        return Submitted(launch, live, doctor=report)
    state = existing_checkpoints(report)
    loads = launch.cfg.checkpoint.load  # the run continues what ckpt_path holds: no fresh start over it
    refuse_existing(state, held.run_id if held is not None else None, path, loads=loads, move_aside=move_aside)
    run_id = runs.new_run_id(launch.cfg.name)
    taken = claim.acquire(cluster.jobs, path, run_id, previous_ok=True)
    notes = []
    if state is not None and state.actor is not None and move_aside:
        target, moved = checkpoints.move_aside(cluster.jobs, path)
        notes.append(f"moved {', '.join(moved) or 'nothing'} from {path} to {target} (nothing deleted)")
    record = lifecycle.new_run(launch, cluster.address, source, overrides, policy, run_id=run_id)
    notes.append(f"ckpt_path {path} claimed for this run ({taken.job_id})")
    if loads and not move_aside:
        step = state.latest_step if state is not None else None
        notes.append(
            f"checkpoint.load: the first attempt loads step {step} from {path}"
            if step is not None
            else f"checkpoint.load: {path} holds no checkpoint yet, so the first attempt starts fresh"
        )
    try:
        attempt = lifecycle.submit_attempt(
            cluster.jobs,
            record.run_id,
            "submit",
            entrypoint=launch.spec.entrypoint,
            runtime_env=launch.spec.runtime_env,
            load_checkpoint=loads,
        )
    except ClusterError as exc:  # recorded, but did the job reach Ray? Say how to find out, never hide the run
        raise UserError(
            f"run {record.run_id} is recorded, but the cluster did not confirm its first attempt: {exc.message}",
            hint=f"`rlhf-launch runs` shows whether {record.run_id}-1 reached the cluster; `rlhf-launch stop {record.run_id}` ends it",
        ) from None
    if not claim.holds(cluster.jobs, path, record.run_id):  # lost between the claim and the attempt (a long upload)
        cluster.jobs.stop(attempt.job_id)
        raise claim.CheckpointClaimed(
            f"run {record.run_id}: another run claimed checkpoint.ckpt_path {path} before its first attempt started; "
            f"the attempt {attempt.job_id} was stopped",
            hint=f"rlhf-launch stop {record.run_id} proves it gone; choose another checkpoint.ckpt_path",
        )
    try:
        job: str | None = supervisor.start(runs.load(record.run_id), cluster.jobs)  # progress, stalls, diagnosis; resumes
    except (ClusterError, UserError) as exc:
        job = None
        notes.append(f"the run's supervisor was not started ({exc.message}): `rlhf-launch watch {record.run_id}` starts one")
    return Submitted(launch, live, runs.load(record.run_id), attempt, job, notes, report)


def refuse_existing(state: checkpoints.CheckpointState | None, writer: str | None, path: str, *, loads: bool, move_aside: bool) -> None:
    """Refuse (UserError) a first attempt over the checkpoints at ckpt_path: a fresh start would
    overwrite them, unless `move_aside` moves them first; with checkpoint.load (`loads`) the run
    continues them instead, refused only when they are broken (the trainer would fail loading)."""
    if state is None or state.actor is None or move_aside:
        return
    if loads:
        if state.status == "broken":
            raise UserError(
                f"checkpoint.ckpt_path {path} holds a broken checkpoint: {'; '.join(state.problems())}; "
                "with checkpoint.load the trainer would fail loading it",
                hint="repair it, choose another checkpoint.ckpt_path, or pass --move-checkpoints-aside to start fresh",
            )
        return
    by = f" (written by run {writer})" if writer is not None else ""
    resume = f"rlhf-launch resume {writer}" if writer is not None else "rlhf-launch resume RUN"
    raise UserError(
        f"checkpoint.ckpt_path {path} already holds checkpoints{by}: latest {state.actor.latest or 'missing'}"
        f", steps on disk {', '.join(map(str, state.actor.steps[-5:])) or 'none'}; a fresh run would start at step 0 over them "
        "and OpenRLHF's rotation (max_num) would delete them",
        hint=f"continue that run ({resume}), set checkpoint.load=true to continue from them, choose another "
        "checkpoint.ckpt_path, or pass --move-checkpoints-aside to move them into ckpt_path/.rlhf-launch-aside/ and start fresh",
    )


def existing_checkpoints(report: Any) -> checkpoints.CheckpointState | None:
    """What the nodes found at ckpt_path: the first node's view that holds checkpoints (on
    storage that is not shared, any node's checkpoints would be overwritten on it)."""
    states = [checkpoints.parse(n.facts["checkpoints"]) for n in report.nodes if n.answered and n.facts.get("checkpoints")]
    return next((s for s in states if s.actor is not None), states[0] if states else None)
