"""The run lifecycle against a fake job API: unknown is never taken for dead."""

from __future__ import annotations

import pytest
from support.fakes import FakeCluster, running_run

from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.errors import AuthRejected, ClusterTimeout, ClusterUnreachable
from rlhf_launch.runs import lifecycle
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.status import AttemptStatus, RunStatus


@pytest.mark.parametrize(
    "failure",
    [
        ClusterTimeout("the dashboard did not answer within 10s"),
        ClusterUnreachable("connection refused"),
        AuthRejected("token rejected"),
    ],
)
def test_a_cluster_that_does_not_answer_changes_nothing(home, jobs, failure):
    run = running_run(jobs)
    jobs.fail_with = failure
    with pytest.raises(type(failure)):
        lifecycle.observe(run, jobs)
    after = runs.load(run.run_id)
    assert after.current.status is AttemptStatus.RUNNING and after.status is RunStatus.RUNNING
    assert after.current.ended is None


def test_only_a_cluster_that_answers_no_such_job_makes_an_attempt_lost(home, jobs):
    run = running_run(jobs)
    del jobs.jobs[run.current.job_id]  # the cluster was restarted: its job table is gone
    after = lifecycle.observe(run, jobs)
    assert after.current.status is AttemptStatus.LOST and after.status is RunStatus.LOST
    assert after.current.ended is not None


def test_an_attempt_that_changed_meanwhile_is_not_overwritten(home, jobs):
    run = running_run(jobs)
    stale = runs.load(run.run_id)
    # another process saw the attempt end while this one was reading Ray
    runs.update(run.run_id, lambda r: setattr(r.attempts[-1], "status", AttemptStatus.FAILED))
    jobs.set(run.current.job_id, JobStatus.RUNNING)
    lifecycle.observe(stale, jobs)
    assert runs.load(run.run_id).current.status is AttemptStatus.FAILED


def test_a_failure_the_supervisor_has_yet_to_decide_is_written_as_waiting_never_as_failed(home, jobs):
    run = running_run(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED)
    seen_by_supervisor = lifecycle.observe(runs.load(run.run_id), jobs, deciding=True)
    assert seen_by_supervisor.current.status is AttemptStatus.FAILED and seen_by_supervisor.status is RunStatus.WAITING
    assert runs.load(run.run_id).status is RunStatus.WAITING  # what every other reader of the record sees meanwhile
    other = running_run(jobs)
    jobs.set(other.current.job_id, JobStatus.FAILED)
    assert lifecycle.observe(runs.load(other.run_id), jobs).status is RunStatus.FAILED  # an observer that decides nothing


def test_a_stopped_run_stays_stopped_and_follows_the_job_to_its_end(home, jobs):
    run = running_run(jobs)
    lifecycle.mark_stopped(run.run_id)
    jobs.set(run.current.job_id, JobStatus.STOPPED)
    after = lifecycle.observe(runs.load(run.run_id), jobs)
    assert after.status is RunStatus.STOPPED and after.current.status is AttemptStatus.STOPPED


def test_resume_is_refused_while_the_cluster_cannot_say_the_trainer_ended(home, jobs):
    from rlhf_launch.runs import resume as resume_module

    run = running_run(jobs)
    jobs.fail_with = ClusterTimeout("the dashboard did not answer within 10s")
    with pytest.raises(ClusterTimeout):
        resume_module.resume(runs.load(run.run_id), [], FakeCluster(jobs), force=False, allow_fresh=True)
    assert jobs.submitted() == [run.current.job_id]  # nothing resubmitted


def test_the_status_mapping():
    assert [AttemptStatus.of_job(s) for s in JobStatus] == [AttemptStatus(s.value) for s in JobStatus]
    assert all(s.is_terminal() for s in (JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED))
    assert not JobStatus.PENDING.is_terminal() and not JobStatus.RUNNING.is_terminal()
    live = {s for s in AttemptStatus if s.is_live()}
    assert live == {AttemptStatus.SUBMITTING, AttemptStatus.PENDING, AttemptStatus.RUNNING}
    assert RunStatus.of_attempt(AttemptStatus.RUNNING, stopped_by_user=True) is RunStatus.RUNNING  # until it ends
    assert RunStatus.of_attempt(AttemptStatus.FAILED, stopped_by_user=True) is RunStatus.STOPPED
    assert RunStatus.of_attempt(AttemptStatus.SUPERSEDED) is RunStatus.WAITING
    assert RunStatus.of_attempt(AttemptStatus.SUBMIT_FAILED) is RunStatus.FAILED
    assert {s for s in RunStatus if s.is_final()} == {RunStatus.SUCCEEDED, RunStatus.STOPPED, RunStatus.GAVE_UP}
    assert f"{RunStatus.WAITING}" == "WAITING" and str(AttemptStatus.LOST) == "LOST"


def test_an_unreadable_record_is_listed_and_kept(home):
    directory = runs.runs_dir()
    directory.mkdir(parents=True)
    bad = directory / "broken-run.json"
    bad.write_text('{"run_id": "broken-run", "attempts": [')
    listing = runs.listing()
    assert listing.runs == [] and [b.path for b in listing.unreadable] == [str(bad)]
    assert bad.read_text() == '{"run_id": "broken-run", "attempts": ['
