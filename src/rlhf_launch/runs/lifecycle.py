"""Runs and their attempts on a live cluster: create a run, submit an attempt, refresh it.

Shared by `submit`, `resume`, `stop`, `runs`, `watch` and the supervisor. Each record change
happens under the run's lock. An attempt is written to the record (SUBMITTING) before Ray
sees it and keeps that status until the cluster says what became of it: a submission whose
answer timed out may or may not have reached Ray, and its deterministic job id lets a later
look find out. Attempts submitted elsewhere (by the cluster-side supervisor, or from another
machine) are adopted into this machine's record from their job metadata.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster.jobs import JobInfo, Jobs
from rlhf_launch.core import command
from rlhf_launch.core.config import LaunchConfig, apply_overrides, validate
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.core.secrets import SECRET_ENV
from rlhf_launch.errors import AuthRejected, ClusterError, ClusterRefused, JobExists, JobNotFound, UserError
from rlhf_launch.openrlhf import dialect, flagset
from rlhf_launch.runs import jobmeta, replanning
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

# A submission Ray has not answered may still arrive: its attempt is LOST only after this.
SUBMIT_GRACE = 120.0


class StoppedByUser(UserError):
    """The run was stopped by a user: nothing resubmits it automatically."""


class AttemptTaken(ClusterRefused):
    """Ray already has a job with this attempt's id: another process submitted it."""


@dataclass(frozen=True)
class Supervision:
    """How a run is supervised: automatic resumes (the retry policy of runs/retry.py, with its
    --retry-on / --no-retry-on overrides), the backoff before each and the poll interval."""

    auto_resume: int = 0
    backoff: float = 10.0
    poll: float = 5.0
    retry_on: tuple[str, ...] = ()
    no_retry_on: tuple[str, ...] = ()


def config_dict(cfg: LaunchConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json")


def _params_billion(launch: Launch) -> float | None:
    from rlhf_launch.core.shapes import from_fields, lookup

    shape = from_fields(launch.cfg.models) or lookup(launch.cfg.models.actor)[0]
    return round(shape.params / 1e9, 2) if shape else None


def planned_steps(cfg: LaunchConfig, version: str) -> int | None:
    """Global steps of the run when `data.max_samples` bounds its prompts (core/steps.py)."""
    from rlhf_launch.core.steps import planned_steps as planned

    return planned(cfg, version)


def new_run(
    launch: Launch, address: str, source: str, overrides: list[str], policy: Supervision = Supervision(), run_id: str | None = None
) -> Run:
    cfg = config_dict(launch.cfg)
    run = Run(
        run_id=run_id or runs.new_run_id(launch.cfg.name),
        name=launch.cfg.name,
        created=time.time(),
        address=address,
        openrlhf_version=launch.flags.version,
        config=cfg,
        config_hash=runs.config_hash(cfg),
        config_source=source,
        overrides=list(overrides),
        argv=list(launch.argv),
        runtime_env=launch.spec.shown_runtime_env,
        ckpt_path=launch.cfg.checkpoint.ckpt_path,
        auto_resume=policy.auto_resume,
        backoff=policy.backoff,
        poll=policy.poll,
        retry_on=list(policy.retry_on),
        no_retry_on=list(policy.no_retry_on),
        gpus_required=launch.plan.gpus_required,
        params_billion=_params_billion(launch),
        nodes=launch.plan.cluster_nodes,
        total_steps=planned_steps(launch.cfg, launch.flags.version),
        rollout_batch_size=launch.cfg.train.rollout_batch_size,
        estimate=launch.estimate.as_json() if launch.estimate is not None else None,
    )
    runs.save(run)
    return run


def launch_for(run: Run, overrides: list[str] | None = None, *, load_checkpoint: bool) -> Launch:
    """Rebuild the run's launch from its record (the same flags), with optional overrides."""
    data = apply_overrides(run.config, overrides or [])
    cfg = validate(data, source=f"run {run.run_id}", overrides=overrides or [])
    return prepare(cfg, version=run.openrlhf_version, load_checkpoint=load_checkpoint)


def resume_entrypoint(run: Run) -> str:
    """The recorded trainer argv plus the release's checkpoint load flag."""
    load = dialect.pick(flagset.load(run.openrlhf_version), dialect.LOAD_FLAG)
    argv = list(run.argv) + ([f"--{load}"] if load and f"--{load}" not in run.argv else [])
    return command.entrypoint(argv)


def wandb_run_id(run_id: str) -> str:
    """One W&B run for all attempts of a run (W&B ids: letters, digits, - and _)."""
    import hashlib

    return "rlhf-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


def _job_runtime_env(runtime_env: dict[str, Any], run_id: str, job_id: str) -> dict[str, Any]:
    env = jobmeta.with_markers(runtime_env, run_id, job_id)
    if SECRET_ENV in env["env_vars"]:  # W&B is on: every attempt resumes the same W&B run
        env["env_vars"].setdefault("WANDB_RUN_ID", wandb_run_id(run_id))
        env["env_vars"].setdefault("WANDB_RESUME", "allow")
    return env


def next_number(run: Run) -> int:
    return max((a.number for a in run.attempts), default=0) + 1


def stop_on_cluster(jobs: Jobs, run: Run) -> str:
    """Leave the user's stop where every machine and supervisor looks: a job
    `<run>-stopped-<N>` (it does nothing) for the run's latest attempt N."""
    number = max((a.number for a in run.attempts), default=0)
    job_id = jobmeta.stop_marker_id(run.run_id, number)
    try:
        jobs.submit("true", {}, job_id, jobmeta.metadata(run, jobmeta.STOP, number, "stop"))
    except JobExists:
        pass  # stopped there already
    return job_id


def stopped_on_cluster(jobs: Jobs, run: Run) -> bool:
    """Did a user stop the run at its latest attempt? (ClusterError: unknown.)"""
    number = max((a.number for a in run.attempts), default=0)
    try:
        jobs.info(jobmeta.stop_marker_id(run.run_id, number))
    except JobNotFound:
        return False
    return True


def _confirm(jobs: Jobs, job_id: str) -> bool | None:
    """After a refused submission: does the job exist after all? None: unknown."""
    try:
        jobs.info(job_id)
    except JobNotFound:
        return False
    except ClusterError:
        return None
    return True


def submit_attempt(jobs: Jobs, run_id: str, reason: str, *, entrypoint: str, runtime_env: dict[str, Any], load_checkpoint: bool) -> Attempt:
    """Record attempt N+1, then submit it as job `<run>-<N+1>`.

    Refuses (StoppedByUser) an automatic resubmission of a run a user stopped (here, or on
    the cluster). A refusal by Ray marks the attempt SUBMIT_FAILED only once the cluster
    confirms it has no such job; a submission whose answer did not come (timeout, connection
    lost, a gateway error) stays SUBMITTING, and the error is raised."""
    with runs.locked(run_id):
        run = runs.load(run_id)
        if reason in ("auto-resume", "placement-retry", "grow") and (run.stopped_by_user or stopped_on_cluster(jobs, run)):
            raise StoppedByUser(f"run {run_id} was stopped by the user; not resubmitting")
        number = next_number(run)
        job_id = jobmeta.attempt_job_id(run_id, number)
        attempt = Attempt(
            number=number,
            job_id=job_id,
            reason=reason,
            load_checkpoint=load_checkpoint,
            submitted=time.time(),
            status=AttemptStatus.SUBMITTING,
        )
        run.attempts.append(attempt)
        run.status = RunStatus.SUBMITTING
        if reason in ("submit", "resume"):
            run.stopped_by_user = False
            run.diagnosis = None
        runs.save(run)
        try:
            jobs.submit(
                entrypoint, _job_runtime_env(runtime_env, run_id, job_id), job_id, jobmeta.metadata(run, jobmeta.TRAINER, number, reason)
            )
        except JobExists:
            raise AttemptTaken(f"attempt {number} of {run_id} ({job_id}) was already submitted elsewhere") from None
        except (ClusterRefused, AuthRejected) as exc:
            if _confirm(jobs, job_id) is not False:  # it may be there after all: the next look decides
                raise
            attempt.status = AttemptStatus.SUBMIT_FAILED
            attempt.message = exc.message[:500]
            attempt.ended = time.time()
            run.status = RunStatus.FAILED
            runs.save(run)
            raise
        attempt.status = AttemptStatus.PENDING
        run.status = RunStatus.PENDING
        runs.save(run)
        return attempt


def _adopt(run: Run, info: JobInfo) -> Attempt:
    meta = info.metadata
    return Attempt(
        number=jobmeta.number_of(meta),
        job_id=info.job_id,
        reason=meta.get("rlhf_launch_reason", "auto-resume"),
        load_checkpoint=True,
        submitted=info.start_time or time.time(),
        status=AttemptStatus.of_job(info.status),
        ended=info.end_time,
        message=info.message[:1000],
    )


def observe(run: Run, jobs: Jobs, *, deciding: bool = False) -> Run:
    """Refresh the current attempt from Ray, adopt attempts submitted elsewhere, fold both
    into the record.

    deciding: the caller is the run's supervisor, which decides what follows a failed
    attempt; until it has, the run is WAITING (a FAILED written now would be read by every
    other machine as the run's end, before its diagnosis and decision are).

    Only a cluster that answers "no such job" (and, for a submission still in flight, only
    after SUBMIT_GRACE) makes an attempt LOST; a timeout, an unreachable cluster or a refused
    token raises (ClusterError) and changes nothing: unknown is not dead.
    """
    attempt = run.current
    newer: list[JobInfo] = []
    number = next_number(run)
    while True:  # attempts a supervisor or another machine submitted after ours
        try:
            info = jobs.info(jobmeta.attempt_job_id(run.run_id, number))
        except JobNotFound:
            break
        newer.append(info)
        number += 1
    status: AttemptStatus | None = None
    message, ended = "", None
    if attempt is not None and not attempt.status.is_terminal():
        try:
            info = jobs.info(attempt.job_id)
        except JobNotFound:
            in_flight = attempt.status is AttemptStatus.SUBMITTING and time.time() - attempt.submitted < SUBMIT_GRACE
            if not in_flight:
                status, message = AttemptStatus.LOST, "the cluster has no such job (restarted, or the submission never arrived)"
        else:
            status, message, ended = AttemptStatus.of_job(info.status), info.message, info.end_time
    if status is None and not newer:
        return run

    def change(record: Run) -> None:
        current = record.current
        unchanged = current is not None and attempt is not None and current.job_id == attempt.job_id and current.status is attempt.status
        if status is not None and current is not None and unchanged:  # else it changed meanwhile: the next look decides
            current.status, current.message = status, message[:1000]
            if status.is_terminal():
                current.ended = ended if ended is not None else time.time()
        known = {a.job_id for a in record.attempts}
        adopted = [_adopt(record, info) for info in newer if info.job_id not in known]
        for info in newer:  # a re-plan elsewhere (the supervisor): its layout and revisions travel with the attempt
            replanning.adopt_revisions(record, info.metadata)
        replanning.mark_superseded(record)
        record.attempts += adopted
        if any(a.reason in ("submit", "resume") for a in adopted):
            record.stopped_by_user = False  # a user resumed it since (from another machine)
        latest = record.current
        if latest is not None and record.status is not RunStatus.GAVE_UP:
            record.status = RunStatus.of_attempt(latest.status, stopped_by_user=record.stopped_by_user)
            if deciding and latest.status.is_failure() and not record.stopped_by_user:
                record.status = RunStatus.WAITING

    return runs.update(run.run_id, change)


def mark_interrupted(run_id: str, why: str, now: float | None = None) -> Run:
    """The run's cluster ended under it (a Slurm allocation cancelled or out of time, its pods
    deleted): nothing of it can still run, so the run is STOPPED as a user stop is, and every
    attempt still recorded live ends STOPPED with `why`. A run that SUCCEEDED stays so."""
    ended = time.time() if now is None else now

    def change(record: Run) -> None:
        for attempt in record.attempts:
            if attempt.status.is_live():
                attempt.status = AttemptStatus.STOPPED
                attempt.ended = ended
                attempt.message = f"interrupted: {why}"
        if record.status is not RunStatus.SUCCEEDED:
            record.stopped_by_user = True
            record.status = RunStatus.STOPPED

    return runs.update(run_id, change)


def mark_stopped(run_id: str) -> Run:
    def change(record: Run) -> None:
        record.stopped_by_user = True
        record.status = RunStatus.STOPPED

    return runs.update(run_id, change)
