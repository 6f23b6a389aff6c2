"""Runs as the cluster knows them: rebuilt from its job table, so any machine with the
address and the token sees every run, its attempts and its supervisor's last word.

The local record (runs/record.py) is a cache of this: a run found only on the cluster is
written to this machine's state dir; a local record is brought up to date from the cluster
(attempts adopted, the supervisor's status, diagnosis and progress folded in).
"""

from __future__ import annotations

from typing import Any

from rlhf_launch.cluster import state
from rlhf_launch.cluster.jobs import JobInfo, Jobs
from rlhf_launch.errors import ClusterError, UserError
from rlhf_launch.runs import jobmeta, lifecycle, replanning, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus


def _by_run(infos: list[JobInfo]) -> dict[str, list[JobInfo]]:
    grouped: dict[str, list[JobInfo]] = {}
    for info in infos:
        run_id = info.metadata.get("rlhf_launch_run")
        if run_id and jobmeta.role_of(info.metadata):
            grouped.setdefault(run_id, []).append(info)
    return grouped


def _waiting_on(run: Run, supervisor_live: bool) -> None:
    """A run whose status is only its failed attempt's is WAITING while a live supervisor has
    yet to decide what comes next."""
    undecided = run.status in (RunStatus.FAILED, RunStatus.LOST) and run.current is not None and run.current.status.is_failure()
    if supervisor_live and undecided:
        run.status = RunStatus.WAITING


def _merge(run: Run, infos: list[JobInfo]) -> Run:
    """Fold the cluster's jobs of a run into its record (attempts by number)."""
    trainers = sorted((i for i in infos if jobmeta.role_of(i.metadata) == jobmeta.TRAINER), key=lambda i: jobmeta.number_of(i.metadata))
    sups = sorted((i for i in infos if jobmeta.role_of(i.metadata) == jobmeta.SUPERVISOR), key=lambda i: jobmeta.number_of(i.metadata))
    stops = {jobmeta.number_of(i.metadata) for i in infos if jobmeta.role_of(i.metadata) == jobmeta.STOP}
    by_number = {a.number: a for a in run.attempts}
    for info in trainers:
        number = jobmeta.number_of(info.metadata)
        status = AttemptStatus.of_job(info.status)
        attempt = by_number.get(number)
        if attempt is None:
            by_number[number] = Attempt(
                number=number,
                job_id=info.job_id,
                reason=info.metadata.get("rlhf_launch_reason", "auto-resume"),
                load_checkpoint=number > 1,
                submitted=info.start_time or run.created,
                status=status,
                ended=info.end_time,
                message=info.message[:1000],
            )
        elif not attempt.status.is_terminal() or attempt.status is AttemptStatus.LOST:
            attempt.status, attempt.ended, attempt.message = status, info.end_time, info.message[:1000]
    run.attempts = [by_number[n] for n in sorted(by_number)]
    for info in trainers:  # a re-plan on the cluster: its layout and revisions travel with the attempt
        replanning.adopt_revisions(run, info.metadata)
    replanning.mark_superseded(run)
    latest = max(by_number, default=0)
    if latest in stops:
        run.stopped_by_user = True  # a user stopped it at its latest attempt, from whichever machine
    elif any(by_number[n].reason in ("submit", "resume") for n in by_number if n > max(stops, default=0)):
        run.stopped_by_user = False  # resumed since
    if sups:
        run.supervisor_job = sups[-1].job_id
    current = run.current
    if current is not None and run.status is not RunStatus.GAVE_UP:
        run.status = RunStatus.of_attempt(current.status, stopped_by_user=run.stopped_by_user)
        _waiting_on(run, supervisor_live=bool(sups) and not sups[-1].status.is_terminal())
    return run


def fold_supervisor(run: Run, jobs: Jobs) -> Run:
    """The supervisor's last state line (read from its log's tail): its diagnosis, progress,
    and its status decision. A failed attempt's run is WAITING only while a live supervisor
    has not decided; a supervisor that no longer runs decides nothing more (its last WAITING
    is stale: the run is what its attempt says until its decision is read), and a final run
    stays final. When the cluster does not answer, nothing changes."""
    if not run.supervisor_job:
        return run
    if run.final and not _stopped_by_its_supervisor(run):
        return _final_words(run, jobs)
    entering = run.status
    current = run.current
    if run.status is RunStatus.WAITING and current is not None and current.status.is_failure():
        run.status = RunStatus.of_attempt(current.status, stopped_by_user=run.stopped_by_user)  # decided afresh below
    try:
        info = jobs.info(run.supervisor_job)
    except ClusterError:
        run.status = entering  # unknown changes nothing
        return run
    _waiting_on(run, supervisor_live=not info.status.is_terminal())  # its decision: the line below, if any
    try:
        log = _log_tail(jobs, info)
    except ClusterError:
        return run  # its decision unread: the next look reads it
    said = supervisor.latest_state(log)
    if not said:
        return run
    _fold(run, said)
    decided = said.get("status")
    same_attempt = current is not None and said.get("attempt") == current.number
    if decided == RunStatus.WAITING and info.status.is_terminal():
        return run
    if decided in (RunStatus.WAITING, RunStatus.GAVE_UP, RunStatus.FAILED, RunStatus.SUCCEEDED, RunStatus.STOPPED) and (
        same_attempt or decided == RunStatus.GAVE_UP
    ):
        run.status = RunStatus(decided)
    return run


def _stopped_by_its_supervisor(run: Run) -> bool:
    """A run that reads STOPPED only because its attempt's job was stopped, not by a user: the
    supervisor stops a stalled attempt (or one a re-plan replaces), and its own decision (FAILED,
    GAVE_UP, WAITING) is the run's status, which the supervisor's state line says."""
    current = run.current
    return (
        run.status is RunStatus.STOPPED
        and not run.stopped_by_user
        and bool(run.supervisor_job)
        and current is not None
        and current.status is AttemptStatus.STOPPED
    )


def _log_tail(jobs: Jobs, info: JobInfo) -> str:
    """The last lines of the supervisor job's log (its state lines), "" before it has a driver."""
    return state.driver_log_tail(jobs.dashboard, info.job_id, info.driver_node_id, 200) if info.driver_node_id else ""


def _fold(run: Run, said: dict[str, Any]) -> None:
    """The supervisor's latest state into the record: the run's diagnosis and progress, and
    each attempt's diagnosis (what history is told from)."""
    run.diagnosis = said.get("diagnosis") or run.diagnosis
    run.progress = said.get("progress") or run.progress
    diagnoses = said.get("diagnoses") or {}
    for attempt in run.attempts:
        found = diagnoses.get(str(attempt.number))
        if found and attempt.diagnosis is None:
            attempt.diagnosis = found


def _final_words(run: Run, jobs: Jobs) -> Run:
    """A run already final here: the supervisor's last state may still hold what this machine
    has not seen (the last step, the attempts' diagnoses); the status stays as it is."""
    try:
        info = jobs.info(run.supervisor_job or "")
        log = _log_tail(jobs, info)
    except ClusterError:
        return run
    said = supervisor.latest_state(log)
    if said:
        _fold(run, said)
    return run


def cluster_runs(jobs: Jobs) -> list[Run]:
    """Every run on the cluster, merged with (and saved to) this machine's records."""
    out = []
    for run_id, infos in _by_run(jobs.list()).items():
        out.append(sync_run(run_id, infos, jobs))
    return out


def sync_run(run_id: str, infos: list[JobInfo], jobs: Jobs) -> Run:
    try:
        local: Run | None = runs.load(run_id)
    except UserError:
        local = None
    if local is None:
        first = min(infos, key=lambda i: (jobmeta.role_of(i.metadata) != jobmeta.TRAINER, jobmeta.number_of(i.metadata)))
        local = jobmeta.run_from_metadata(first.metadata, jobs.address)
        if local is None:
            raise UserError(f"the cluster's jobs of run {run_id} carry no readable record")
    with runs.locked(run_id):
        try:
            fresh = runs.load(run_id)
        except UserError:
            fresh = local
        before = fresh.as_json()
        merged = _merge(fresh, infos)
        if not merged.final or _stopped_by_its_supervisor(merged):
            merged = fold_supervisor(merged, jobs)
        if merged.as_json() != before or not runs.path_of(run_id).exists():
            runs.save(merged)
    return merged


def find(run_id: str | None, jobs: Jobs) -> Run:
    """A run by id or unique prefix (None: the newest) among the cluster's runs."""
    grouped = _by_run(jobs.list())
    if run_id is None:
        if not grouped:
            raise UserError(f"no runs on the cluster at {jobs.address}", hint="rlhf-launch submit CONFIG")
        newest = max(grouped, key=lambda r: max(i.start_time or 0 for i in grouped[r]))
        return sync_run(newest, grouped[newest], jobs)
    matches = [r for r in grouped if r == run_id] or [r for r in grouped if r.startswith(run_id)]
    if len(matches) != 1:
        hint = ", ".join(matches[:5]) if matches else "rlhf-launch runs --address URL lists the cluster's runs"
        raise UserError(f"{run_id!r} matches {len(matches)} runs on the cluster at {jobs.address}", hint=hint)
    return sync_run(matches[0], grouped[matches[0]], jobs)


def refresh(run: Run, jobs: Jobs) -> Run:
    """A local record brought up to date: its current attempt, newer ones, the supervisor."""
    run = lifecycle.observe(run, jobs)
    if not run.stopped_by_user and lifecycle.stopped_on_cluster(jobs, run):
        run = lifecycle.mark_stopped(run.run_id)  # stopped from another machine
    if run.supervisor_job:
        with runs.locked(run.run_id):
            merged = fold_supervisor(runs.load(run.run_id), jobs)
            runs.save(merged)
        return merged
    return run
