"""Proof that a trainer is gone (runs/gone.py) and `stop` (runs/stop.py), against a fake job
API and a fake state API: unknown is never gone."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from support.fakes import FakeDashboard, running_run

from rlhf_launch.cluster import state
from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.errors import ClusterTimeout
from rlhf_launch.runs import gone, jobmeta, lifecycle, stop
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.status import RunStatus

DRIVER = "0a000000"


def ended(jobs, job_id, status=JobStatus.FAILED):
    jobs.set(job_id, status)
    jobs.jobs[job_id] = replace(jobs.jobs[job_id], driver_job_id=DRIVER)


def no_processes(runs_, job_ids):
    return []


def test_a_terminal_job_with_nothing_left_is_gone(home, jobs):
    run = running_run(jobs)
    ended(jobs, run.current.job_id)
    dashboard = FakeDashboard()
    dashboard.actors = [{"name": "x", "job_id": DRIVER, "state": "DEAD"}]
    dashboard.groups = [{"placement_group_id": "pg1", "creator_job_id": DRIVER, "state": "REMOVED"}]
    assert gone.wait_gone(jobs, dashboard, [run.current.job_id], no_processes, 1) == []


def test_the_nodes_sweeper_agents_belong_to_no_run(home, jobs):
    """A supervisor starts each node's sweeper agent (detached, so it serves later sweeps):
    it is no trainer actor and keeps no job from being gone; any other live actor does."""
    run = running_run(jobs)
    ended(jobs, run.current.job_id)
    dashboard = FakeDashboard()
    dashboard.actors = [{"name": f"{state.AGENT_PREFIX}0123abcd-node1", "class_name": "Agent", "job_id": DRIVER, "state": "ALIVE"}]
    assert gone.wait_gone(jobs, dashboard, [run.current.job_id], no_processes, 0.2, interval=0.05) == []
    dashboard.actors.append({"name": "sweeper-lookalike", "class_name": "Agent", "job_id": DRIVER, "state": "ALIVE"})
    assert gone.wait_gone(jobs, dashboard, [run.current.job_id], no_processes, 0.2, interval=0.05) != []


def test_the_sweep_started_ahead_serves_the_first_round_only():
    from concurrent.futures import Future

    ahead: Future = Future()
    ahead.set_result([{"pid": 1, "job": "r-1"}])
    calls = []
    sweep = stop._ahead(ahead, {"r-1", "r-supervisor-1"}, lambda r, j: calls.append(list(j)) or [], time.monotonic() + 5)
    assert sweep(["r"], ["r-1"]) == [{"pid": 1, "job": "r-1"}] and calls == []
    assert sweep(["r"], ["r-1"]) == [] and calls == [["r-1"]]  # later rounds sweep afresh
    fresh = stop._ahead(ahead, {"r-1"}, lambda r, j: calls.append(list(j)) or [], time.monotonic() + 5)
    assert fresh(["r"], ["r-1", "r-2"]) == [] and calls[-1] == ["r-1", "r-2"]  # a job it did not cover


def test_a_sweep_started_ahead_that_outlives_the_bound_is_unknown():
    from concurrent.futures import Future

    never: Future = Future()
    sweep = stop._ahead(never, {"r-1"}, no_processes, time.monotonic() + 0.2)
    started = time.monotonic()
    with pytest.raises(ClusterTimeout):
        sweep(["r"], ["r-1"])
    assert time.monotonic() - started < 2


def test_no_fresh_sweep_starts_past_the_bound():
    from concurrent.futures import Future

    calls = []
    sweep = stop._ahead(Future(), set(), lambda r, j: calls.append(list(j)) or [], time.monotonic() + 0.5)
    with pytest.raises(ClusterTimeout, match="no time left"):
        sweep(["r"], ["r-2"])
    assert calls == []


def test_a_stop_ray_never_takes_is_not_called_gone(home, jobs):
    """Ray's stop does not take (or every status read times out) for the whole bound: `stop`
    still proves, and says what is left, rather than reporting a gone trainer."""
    run = running_run(jobs)
    jobs.stop = lambda job_id: False  # type: ignore[method-assign]
    process = [{"pid": 4242, "node": "10.0.0.3", "cmd": "python3 -m openrlhf.cli.train_ppo_ray", "job": run.current.job_id}]
    started = time.monotonic()
    done = stop.stop(run, jobs, FakeDashboard(), lambda r, j: process, bound=1)
    assert time.monotonic() - started < 5
    assert not done.gone
    said = " ".join(done.as_json()["left"])
    assert "job still RUNNING" in said and "process 4242 on 10.0.0.3" in said


def test_what_is_left_keeps_a_job_from_being_gone(home, jobs):
    run = running_run(jobs)
    job_id = run.current.job_id
    ended(jobs, job_id, JobStatus.STOPPED)
    cases = {
        "entrypoint": lambda d: d.actors.append({"name": f"_ray_internal_job_actor_{job_id}", "state": "PENDING_CREATION"}),
        "actor": lambda d: d.actors.append({"name": "", "class_name": "PolicyModelActor", "job_id": DRIVER, "state": "ALIVE", "pid": 7}),
        "group": lambda d: d.groups.append({"placement_group_id": "pg9", "creator_job_id": DRIVER, "state": "CREATED"}),
    }
    for name, add in cases.items():
        dashboard = FakeDashboard()
        add(dashboard)
        left = gone.wait_gone(jobs, dashboard, [job_id], no_processes, 0.2, interval=0.05)
        assert [lo.job_id for lo in left] == [job_id], name
        assert left[0].describe(), name
    process = [{"pid": 4242, "node": "10.0.0.3", "cmd": "python3 -m openrlhf.cli.train_ppo_ray", "job": job_id}]
    left = gone.wait_gone(jobs, FakeDashboard(), [job_id], lambda r, j: process, 0.2, interval=0.05)
    assert "process 4242 on 10.0.0.3" in " ".join(left[0].describe())


def test_a_live_job_is_not_gone(home, jobs):
    run = running_run(jobs)
    left = gone.wait_gone(jobs, FakeDashboard(), [run.current.job_id], no_processes, 0.2, interval=0.05)
    assert "job still RUNNING" in left[0].describe()[0]


def test_unknown_is_never_gone(home, jobs):
    run = running_run(jobs)
    ended(jobs, run.current.job_id)
    dashboard = FakeDashboard()
    dashboard.fail_with = ClusterTimeout("the state API did not answer")
    left = gone.wait_gone(jobs, dashboard, [run.current.job_id], no_processes, 0.2, interval=0.05)
    assert left and left[0].unknown
    failing_sweep = lambda r, j: (_ for _ in ()).throw(ClusterTimeout("node 10.0.0.4 did not answer"))  # noqa: E731
    left = gone.wait_gone(jobs, FakeDashboard(), [run.current.job_id], failing_sweep, 0.2, interval=0.05)
    assert left and "could not sweep" in left[0].unknown


def test_a_job_the_cluster_no_longer_has_is_gone(home, jobs):
    run = running_run(jobs)
    del jobs.jobs[run.current.job_id]
    assert gone.wait_gone(jobs, FakeDashboard(), [run.current.job_id], no_processes, 1) == []


def test_stop_marks_the_run_on_the_cluster_and_catches_a_late_attempt(home, jobs):
    """An attempt the supervisor submitted just before it was stopped still gets stopped."""
    run = running_run(jobs)
    late = jobmeta.attempt_job_id(run.run_id, 2)
    real_status = jobs.status
    calls = {"n": 0}

    def status(job_id):
        calls["n"] += 1
        if calls["n"] == 1 and late not in jobs.jobs:  # the supervisor's last POST lands as the stop begins
            jobs.submit(
                "python3 -m openrlhf.cli.train_ppo_ray",
                {},
                late,
                {
                    "rlhf_launch_run": run.run_id,
                    "rlhf_launch_role": "trainer",
                    "rlhf_launch_attempt": "2",
                    "rlhf_launch_reason": "auto-resume",
                },
            )
        return real_status(job_id)

    jobs.status = status
    done = stop.stop(run, jobs, FakeDashboard(), no_processes, bound=5)
    assert done.gone and jobs.jobs[late].status is JobStatus.STOPPED
    assert jobs.jobs[run.current.job_id].status is JobStatus.STOPPED
    record = runs.load(run.run_id)
    assert record.stopped_by_user and record.status is RunStatus.STOPPED
    assert jobmeta.stop_marker_id(run.run_id, 2) in jobs.jobs  # marked at the latest attempt
    assert lifecycle.stopped_on_cluster(jobs, record)


def test_an_automatic_resubmission_of_a_run_stopped_elsewhere_is_refused(home, jobs):
    run = running_run(jobs)
    lifecycle.stop_on_cluster(jobs, run)  # a user stopped it from another machine
    jobs.set(run.current.job_id, JobStatus.FAILED)
    launch_argv = lifecycle.resume_entrypoint(run)
    import pytest

    with pytest.raises(lifecycle.StoppedByUser):
        lifecycle.submit_attempt(jobs, run.run_id, "auto-resume", entrypoint=launch_argv, runtime_env={}, load_checkpoint=True)
    assert jobmeta.attempt_job_id(run.run_id, 2) not in jobs.jobs
