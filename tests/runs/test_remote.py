"""What `runs`, `watch` and `logs` say about a run its cluster-side supervisor decides
(runs/remote.py), against a fake job API: a failed attempt's run is FAILED only when the
supervisor says so, never because its decision could not be read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support.fakes import running_run

from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.errors import ClusterTimeout
from rlhf_launch.runs import jobmeta, remote, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.status import RunStatus


class LogDashboard:
    """The supervisor's driver log, as Ray's log API serves it."""

    def __init__(self) -> None:
        self.log = ""
        self.fail_with: ClusterTimeout | None = None

    def get(self, path: str, timeout: float | None = None) -> Any:
        if self.fail_with is not None:
            raise self.fail_with
        assert path.startswith("/api/v0/logs/file")
        return self.log


def supervised(jobs):
    run = running_run(jobs)
    sup = jobmeta.supervisor_job_id(run.run_id, 1)
    jobs.submit("python3 -m rlhf_launch supervise", {}, sup, {"rlhf_launch_run": run.run_id, "rlhf_launch_role": "supervisor"})
    jobs.set(sup, JobStatus.RUNNING)
    jobs.jobs[sup] = replace(jobs.jobs[sup], driver_node_id="node1")
    jobs.dashboard = LogDashboard()
    runs.update(run.run_id, lambda r: setattr(r, "supervisor_job", sup))
    return runs.load(run.run_id), sup


def said(status: RunStatus, attempt: int) -> str:
    return supervisor.state_line({"status": status.value, "attempt": attempt}) + "\n"


def test_a_failed_attempt_under_a_live_supervisor_is_waiting_until_it_decides(home, jobs):
    run, _ = supervised(jobs)
    jobs.dashboard.log = said(RunStatus.RUNNING, 1)  # it has not looked since the failure
    jobs.set(run.current.job_id, JobStatus.FAILED)
    assert remote.refresh(run, jobs).status is RunStatus.WAITING
    jobs.dashboard.log += said(RunStatus.GAVE_UP, 1)
    assert remote.refresh(runs.load(run.run_id), jobs).status is RunStatus.GAVE_UP


def test_an_unread_decision_of_a_finished_supervisor_starts_nothing(home, jobs):
    """The supervisor gave up and ended; its log cannot be read this time: the run is what its
    attempt says (FAILED: not live, so `watch` starts no new supervisor on an unknown), and
    the next look reads GAVE_UP."""
    run, sup = supervised(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED)
    jobs.set(sup, JobStatus.SUCCEEDED)
    jobs.dashboard.log = said(RunStatus.GAVE_UP, 1)
    jobs.dashboard.fail_with = ClusterTimeout("the dashboard did not answer in 10s")
    seen = remote.refresh(run, jobs).status
    assert seen is RunStatus.FAILED and not seen.is_live()
    jobs.dashboard.fail_with = None
    assert remote.refresh(runs.load(run.run_id), jobs).status is RunStatus.GAVE_UP


def test_waiting_ends_when_the_supervisor_dies_undecided(home, jobs):
    run, sup = supervised(jobs)
    jobs.dashboard.log = said(RunStatus.RUNNING, 1)
    jobs.set(run.current.job_id, JobStatus.FAILED)
    assert remote.refresh(run, jobs).status is RunStatus.WAITING
    jobs.set(sup, JobStatus.FAILED)  # it crashed before it decided
    assert remote.refresh(runs.load(run.run_id), jobs).status is RunStatus.FAILED


def test_a_supervisor_the_cluster_does_not_answer_for_changes_nothing(home, jobs):
    run, sup = supervised(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED)
    waiting = remote.refresh(run, jobs)
    assert waiting.status is RunStatus.WAITING
    real_info = jobs.info

    def info(job_id):
        if job_id == sup:
            raise ClusterTimeout("the dashboard did not answer in 10s")
        return real_info(job_id)

    jobs.info = info
    assert remote.fold_supervisor(waiting, jobs).status is RunStatus.WAITING


def test_a_supervisor_that_ended_without_a_decision_leaves_the_run_failed(home, jobs):
    run, sup = supervised(jobs)
    jobs.set(run.current.job_id, JobStatus.FAILED)
    jobs.set(sup, JobStatus.FAILED)
    jobs.dashboard.log = "Traceback (most recent call last):\n"
    assert remote.refresh(run, jobs).status is RunStatus.FAILED


def test_another_machine_reads_the_supervisors_decision_on_an_attempt_it_stopped(home, jobs):
    """The supervisor stops a stalled attempt's job (Ray: STOPPED) and decides the run FAILED; a
    machine that knows the run only from the cluster must say FAILED too, not STOPPED (no user
    stopped it), as `runs RUN --print-status` does on the machine that submitted it."""
    run, sup = supervised(jobs)
    jobs.set(run.current.job_id, JobStatus.STOPPED)
    jobs.set(sup, JobStatus.SUCCEEDED)
    jobs.dashboard.log = said(RunStatus.FAILED, 1)
    runs.path_of(run.run_id).unlink()  # this machine never saw the run: all it has is the cluster
    seen = remote.find(run.run_id, jobs)
    assert seen.status is RunStatus.FAILED and not seen.stopped_by_user
    # a user's stop still reads STOPPED, whatever the supervisor said last
    jobs.submit(
        "true", {}, f"{run.run_id}-stopped-1", {"rlhf_launch_run": run.run_id, "rlhf_launch_role": "stop", "rlhf_launch_attempt": "1"}
    )
    runs.path_of(run.run_id).unlink()
    assert remote.find(run.run_id, jobs).status is RunStatus.STOPPED
