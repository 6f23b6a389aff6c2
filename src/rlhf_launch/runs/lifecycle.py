"""Runs and their attempts on a live cluster: create a run, submit an attempt, refresh status.

Shared by `submit`, `resume`, `stop`, `runs` and the auto-resume watcher. Each record
change happens under the run's lock; an attempt is written to the record (SUBMITTING)
before Ray sees the job, so a crash between the two is recoverable from the record.
"""

from __future__ import annotations

import time
from typing import Any

from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.core.config import LaunchConfig, apply_overrides, validate
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.errors import JobNotFound, UserError
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

# Keys OpenRLHF needs unchanged to load a checkpoint (DeepSpeed partitioning, data order).
RESUME_SENSITIVE = (
    "placement",
    "models",
    "deepspeed.zero_stage",
    "train.train_batch_size",
    "train.micro_train_batch_size",
    "train.rollout_batch_size",
    "train.micro_rollout_batch_size",
    "train.n_samples_per_prompt",
    "checkpoint.ckpt_path",
)


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def changed_sensitive_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [key for key in RESUME_SENSITIVE if _get(before, key) != _get(after, key)]


def config_dict(cfg: LaunchConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json")


def new_run(launch: Launch, address: str, source: str, overrides: list[str], auto_resume: int, backoff: float) -> Run:
    cfg = config_dict(launch.cfg)
    run = Run(
        run_id=runs.new_run_id(launch.cfg.name),
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
        auto_resume=auto_resume,
        backoff=backoff,
    )
    runs.save(run)
    return run


def launch_for(run: Run, overrides: list[str] | None = None, *, load_checkpoint: bool) -> Launch:
    """Rebuild the run's launch from its record (the same flags), with optional overrides."""
    data = apply_overrides(run.config, overrides or [])
    cfg = validate(data, source=f"run {run.run_id}")
    return prepare(cfg, version=run.openrlhf_version, load_checkpoint=load_checkpoint)


def submit_attempt(jobs: Jobs, run_id: str, launch: Launch, reason: str, *, load_checkpoint: bool) -> Attempt:
    """Record the attempt, then submit it; refuses if the user stopped the run meanwhile."""
    with runs.locked(run_id):
        run = runs.load(run_id)
        if reason in ("auto-resume", "placement-retry") and run.stopped_by_user:
            raise UserError(f"run {run_id} was stopped by the user; not resubmitting")
        number = len(run.attempts) + 1
        attempt = Attempt(
            number=number,
            job_id=run.job_id(number),
            reason=reason,
            load_checkpoint=load_checkpoint,
            submitted=time.time(),
            status=AttemptStatus.SUBMITTING,
        )
        run.attempts.append(attempt)
        run.status = RunStatus.SUBMITTING
        if reason in ("submit", "resume"):
            run.stopped_by_user = False
        runs.save(run)
        metadata = {
            "rlhf_launch_run": run_id,
            "rlhf_launch_attempt": str(number),
            "rlhf_launch_config_hash": run.config_hash,
            "rlhf_launch_reason": reason,
        }
        try:
            jobs.submit(launch.spec.entrypoint, launch.spec.runtime_env, attempt.job_id, metadata)
        except Exception as exc:
            attempt.status = AttemptStatus.SUBMIT_FAILED
            attempt.message = str(exc)[:500]
            attempt.ended = time.time()
            run.status = RunStatus.FAILED
            runs.save(run)
            raise
        attempt.status = AttemptStatus.PENDING
        run.status = RunStatus.PENDING
        runs.save(run)
        return attempt


def observe(run: Run, jobs: Jobs) -> Run:
    """Refresh the current attempt's status from Ray and fold it into the record.

    Only a cluster that answers "no such job" makes an attempt LOST; a timeout or an
    unreachable cluster raises (ClusterError) and changes nothing: unknown is not dead.
    """
    attempt = run.current
    if attempt is None or attempt.status.is_terminal():
        return run
    try:
        info = jobs.info(attempt.job_id)
    except JobNotFound:
        status, message, ended = AttemptStatus.LOST, "the cluster has no such job (restarted?)", None
    else:
        status, message, ended = AttemptStatus.of_job(info.status), info.message, info.end_time

    def change(record: Run) -> None:
        current = record.current
        if current is None or current.job_id != attempt.job_id or current.status is not attempt.status:
            return  # changed since we read it (e.g. a submission finished): the next look decides
        current.status, current.message = status, message[:1000]
        if status.is_terminal():
            current.ended = ended if ended is not None else time.time()
        if record.status is not RunStatus.GAVE_UP:
            record.status = RunStatus.of_attempt(status, stopped_by_user=record.stopped_by_user)

    return runs.update(run.run_id, change)


def mark_stopped(run_id: str) -> Run:
    def change(record: Run) -> None:
        record.stopped_by_user = True
        record.status = RunStatus.STOPPED

    return runs.update(run_id, change)
