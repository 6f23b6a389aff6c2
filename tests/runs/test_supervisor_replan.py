"""The supervisor re-plans a run onto the nodes left after one was lost (supervise.node_wait):
fewer vLLM engines when the training roles' DP sizes can stay, a universal checkpoint when they
cannot, a refusal (and waiting) when nothing fits; node_wait 0 waits as before."""

from __future__ import annotations

import shlex

from support.fakes import FakeJobs, running_run

from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.runs import jobmeta, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.status import RunStatus

KEY = "0123456789abcdef0123456789abcdef01234567"
NODE_LOST = (
    "\u2728 Global step 10: {'policy_loss': 0.01, 'reward': 0.5}\n"
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "The actor died because its node has died. Node Id: 2b7c\n"
)
POLL = 100.0  # seconds the fake clock moves per poll


class Ticks(Exception):
    pass


class Ready:
    ok = True

    def failed(self):
        return []


def argv_of(jobs: FakeJobs, number: int, run_id: str) -> list[str]:
    return shlex.split(jobs.jobs[jobmeta.attempt_job_id(run_id, number)].entrypoint)


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def lost_node_run(jobs: FakeJobs, node_wait: float = 600.0):
    run = running_run(jobs)  # tiny-1node: actor+ref 2, critic+reward 2, vLLM 4x1 = 8 GPUs

    def change(record):
        record.config.setdefault("supervise", {})["node_wait"] = node_wait

    runs.update(run.run_id, change)
    first = run.current.job_id
    jobs.jobs[first].runtime_env.setdefault("env_vars", {})["WANDB_API_KEY"] = KEY
    jobs.set(first, JobStatus.FAILED, "exit 1", log=NODE_LOST)
    return run


def supervise(jobs, run_id, monkeypatch, *, live, polls, on_tick=lambda n: None, converter=None, latest_step=None):
    monkeypatch.setattr(supervisor.snapshot, "alive_gpus", lambda *a, **k: sum(n.gpus for n in live))
    monkeypatch.setattr(supervisor.gone, "wait_gone", lambda *a, **k: [])
    now = [1000.0]
    count = [0]

    def sleep(_seconds):
        count[0] += 1
        now[0] += POLL
        on_tick(count[0])
        if count[0] >= polls:
            raise Ticks()

    said: list[str] = []
    sup = supervisor.Supervisor(
        run_id,
        jobs,
        dashboard=None,
        sweeper=lambda r, j: [],
        say=said.append,
        sleep=sleep,
        node_checks=lambda launch: Ready(),
        clock=lambda: now[0],
        live_nodes=lambda: list(live),
        converter=converter,
        latest_step=latest_step or (lambda run: 10),
    )
    try:
        final = sup.run()
    except Ticks:
        final = None
    return final, said, count


def succeed(jobs, run_id, number):
    def tick(_n):
        job = jobmeta.attempt_job_id(run_id, number)
        if job in jobs.jobs and jobs.jobs[job].status is not JobStatus.SUCCEEDED:
            jobs.set(job, JobStatus.SUCCEEDED)

    return tick


def test_a_lost_vllm_node_resumes_with_fewer_engines_after_node_wait(home, jobs, monkeypatch):
    run = lost_node_run(jobs, node_wait=600)
    submitted_at: list[int] = []
    done = succeed(jobs, run.run_id, 2)

    def tick(n):
        if jobmeta.attempt_job_id(run.run_id, 2) in jobs.jobs and not submitted_at:
            submitted_at.append(n)
        done(n)

    final, said, _ = supervise(jobs, run.run_id, monkeypatch, live=[NodeFree("n1", "10.0.0.1", 6.0)], polls=60, on_tick=tick)
    assert final is RunStatus.SUCCEEDED
    assert submitted_at and submitted_at[0] >= 600 / POLL  # not before node_wait
    assert any("re-planning onto the nodes left after 600s" in line for line in said)
    argv = argv_of(jobs, 2, run.run_id)
    assert flag(argv, "--vllm.num_engines") == "2" and flag(argv, "--actor.num_gpus_per_node") == "2"
    assert "--ckpt.load_enable" in argv and "--ds.use_universal_ckpt" not in argv
    env = jobs.jobs[jobmeta.attempt_job_id(run.run_id, 2)].runtime_env["env_vars"]
    assert env["WANDB_API_KEY"] == KEY and env["WANDB_RUN_ID"] == supervisor.lifecycle.wandb_run_id(run.run_id)
    record = runs.load(run.run_id)
    assert record.gpus_required == 6
    (rev,) = record.revisions
    assert rev["reason"] == "node lost" and rev["old_gpus"] == 8 and rev["new_gpus"] == 6
    assert rev["summary"].startswith("vLLM 4x1 -> 2x1 on 6 GPUs; step time +")
    assert any(line.startswith("plan revision 1 (node lost") for line in said)
    assert any('"revision"' in line for line in said if line.startswith("RLHF_LAUNCH_STATE"))


def test_node_wait_zero_never_re_plans(home, jobs, monkeypatch):
    run = lost_node_run(jobs, node_wait=0)
    final, said, _ = supervise(jobs, run.run_id, monkeypatch, live=[NodeFree("n1", "10.0.0.1", 6.0)], polls=30)
    assert final is None
    assert jobs.submitted() == [run.current.job_id]
    assert any("waiting for the cluster to have 8 GPUs again" in line for line in said)
    assert not any("re-plan" in line for line in said)
    assert runs.load(run.run_id).revisions == []


def test_too_few_gpus_for_any_layout_waits_saying_why_and_submits_nothing(home, jobs, monkeypatch):
    run = lost_node_run(jobs, node_wait=200)
    final, said, _ = supervise(jobs, run.run_id, monkeypatch, live=[NodeFree("n1", "10.0.0.1", 1.0)], polls=30)
    assert final is None
    assert jobs.submitted() == [run.current.job_id]
    refusals = [line for line in said if line.startswith("not re-planning")]
    assert len(refusals) == 1 and "1 live node(s) x 1 GPUs" in refusals[0] and "waiting for the GPUs to return" in refusals[0]
    record = runs.load(run.run_id)
    assert record.revisions == [] and record.status is RunStatus.WAITING


def test_a_dp_change_converts_the_checkpoint_then_loads_it_universal_until_a_new_save(home, jobs, monkeypatch):
    run = lost_node_run(jobs, node_wait=100)
    calls = []

    def converter(record, roles, bound):
        calls.append((list(roles), bound))
        return {
            "node": "10.0.0.1",
            "roles": {r: {"tag": "global_step10", "universal": "global_step10_uni", "seconds": 1.0} for r in roles},
            "errors": [],
            "progress": ["_actor/global_step10 -> global_step10_uni: done in 1.0s"],
        }

    saved = [10]

    def tick(n):
        second = jobmeta.attempt_job_id(run.run_id, 2)
        third = jobmeta.attempt_job_id(run.run_id, 3)
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.PENDING:
            saved[0] = 20  # attempt 2 saved step 20 at its new DP size, then lost another node
            jobs.set(second, JobStatus.FAILED, "exit 1", log=NODE_LOST.replace("step 10", "step 20"))
        if third in jobs.jobs and jobs.jobs[third].status is JobStatus.PENDING:
            jobs.set(third, JobStatus.SUCCEEDED)

    final, said, _ = supervise(
        jobs,
        run.run_id,
        monkeypatch,
        live=[NodeFree("n1", "10.0.0.1", 3.0)],
        polls=80,
        on_tick=tick,
        converter=converter,
        latest_step=lambda record: saved[0],
    )
    assert final is RunStatus.SUCCEEDED
    assert calls == [(["actor", "critic"], 7200.0)]
    second = argv_of(jobs, 2, run.run_id)
    assert "--ds.use_universal_ckpt" in second and flag(second, "--actor.num_gpus_per_node") == "1"
    third = argv_of(jobs, 3, run.run_id)
    assert "--ds.use_universal_ckpt" not in third and flag(third, "--actor.num_gpus_per_node") == "1"
    record = runs.load(run.run_id)
    (rev,) = record.revisions
    assert rev["convert"] == ["actor", "critic"] and rev["from_step"] == 10
    assert "actor DP 2 -> 1" in rev["summary"]
    assert any("converting the latest checkpoint of actor, critic" in line for line in said)
    assert any("saved step 20 since its checkpoint of step 10 was converted" in line for line in said)


def test_a_failed_conversion_submits_nothing_and_says_why(home, jobs, monkeypatch):
    run = lost_node_run(jobs, node_wait=100)

    def converter(record, roles, bound):
        return {"node": "10.0.0.1", "roles": {}, "errors": ["_actor: ds_to_universal exited 1: No space left on device"]}

    final, said, _ = supervise(jobs, run.run_id, monkeypatch, live=[NodeFree("n1", "10.0.0.1", 3.0)], polls=20, converter=converter)
    assert final is None
    assert jobs.submitted() == [run.current.job_id]
    assert any("conversion failed" in line and "No space left" in line for line in said)
    assert runs.load(run.run_id).revisions == []


def test_another_machine_learns_the_new_layout_from_the_attempt_it_adopts(home, jobs, monkeypatch):
    from rlhf_launch.runs import lifecycle, remote

    run = lost_node_run(jobs, node_wait=100)
    before = runs.load(run.run_id)
    final, _, _ = supervise(
        jobs, run.run_id, monkeypatch, live=[NodeFree("n1", "10.0.0.1", 6.0)], polls=40, on_tick=succeed(jobs, run.run_id, 2)
    )
    assert final is RunStatus.SUCCEEDED
    # this machine's record as it was before the re-plan (the supervisor wrote its own on the cluster)
    for observe in (lambda r: lifecycle.observe(r, jobs), lambda r: remote.sync_run(r.run_id, jobs.list(), jobs)):
        runs.save(before)
        seen = observe(runs.load(run.run_id))
        assert len(seen.revisions) == 1 and seen.gpus_required == 6
        assert seen.config["placement"]["vllm"]["engines"] == 2


def step_lines(first: int, last: int) -> str:
    return "".join(f"\u2728 Global step {i}: {{'policy_loss': 0.01, 'reward': 0.5}}\n" for i in range(first, last + 1))


def test_the_run_grows_back_to_its_own_layout_at_the_next_save_once_the_node_returns(home, jobs, monkeypatch):
    from dataclasses import replace

    run = lost_node_run(jobs, node_wait=100)
    runs.update(run.run_id, lambda r: r.config["checkpoint"].update({"save_steps": 2}))
    monkeypatch.setattr(supervisor.state, "driver_log_tail", lambda _d, job_id, _n, _l: jobs.driver_logs.get(job_id, ""))
    live = [NodeFree("n1", "10.0.0.1", 6.0)]
    saved = [10]
    progress = {"step": 10}

    def tick(n):
        second, third = (jobmeta.attempt_job_id(run.run_id, k) for k in (2, 3))
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.PENDING:
            jobs.jobs[second] = replace(jobs.jobs[second], status=JobStatus.RUNNING, driver_node_id="n1")
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.RUNNING and third not in jobs.jobs:
            progress["step"] += 1
            jobs.driver_logs[second] = step_lines(11, progress["step"])
            if progress["step"] % 2 == 0:
                saved[0] = progress["step"]
            if progress["step"] == 13:
                live.append(NodeFree("n2", "10.0.0.2", 2.0))  # the node is back
        if third in jobs.jobs and jobs.jobs[third].status is JobStatus.PENDING:
            jobs.set(third, JobStatus.SUCCEEDED)

    final, said, _ = supervise(jobs, run.run_id, monkeypatch, live=live, polls=120, on_tick=tick, latest_step=lambda record: saved[0])
    assert final is RunStatus.SUCCEEDED, said[-10:]
    record = runs.load(run.run_id)
    assert [r["reason"] for r in record.revisions] == ["node lost", "grow"]
    grow = record.revisions[-1]
    assert grow["new_gpus"] == 8 and grow["summary"].startswith("vLLM 2x1 -> 4x1 on 8 GPUs") and grow["convert"] == []
    assert record.attempts[1].status.name == "SUPERSEDED" and record.attempts[1].message.startswith("grow back")
    assert record.auto_resumes_used == 1  # growing back is not a failure
    third = argv_of(jobs, 3, run.run_id)
    assert flag(third, "--vllm.num_engines") == "4" and "--ckpt.load_enable" in third
    assert any("growing back to the run's own layout at its next checkpoint save" in line for line in said)
    assert any("saved step 14: stopping it to grow back" in line for line in said)
    assert jobs.jobs[jobmeta.attempt_job_id(run.run_id, 3)].metadata["rlhf_launch_reason"] == "grow"
    # another machine sees attempt 2 only as Ray ended it: superseded by the grow, not a failure
    from rlhf_launch.runs import remote

    elsewhere = runs.load(run.run_id)
    elsewhere.attempts = elsewhere.attempts[:1]
    runs.save(elsewhere)
    jobs.jobs[jobmeta.attempt_job_id(run.run_id, 2)] = replace(jobs.jobs[jobmeta.attempt_job_id(run.run_id, 2)], status=JobStatus.FAILED)
    seen = remote.sync_run(run.run_id, jobs.list(), jobs)
    assert [a.status.name for a in seen.attempts] == ["FAILED", "SUPERSEDED", "SUCCEEDED"]


def test_no_grow_stays_on_the_re_planned_layout(home, jobs, monkeypatch):
    from dataclasses import replace

    run = lost_node_run(jobs, node_wait=100)

    def change(r):
        r.config["checkpoint"]["save_steps"] = 2
        r.config["supervise"]["grow"] = False

    runs.update(run.run_id, change)
    monkeypatch.setattr(supervisor.state, "driver_log_tail", lambda _d, job_id, _n, _l: jobs.driver_logs.get(job_id, ""))
    live = [NodeFree("n1", "10.0.0.1", 6.0)]
    step = [10]

    def tick(n):
        second = jobmeta.attempt_job_id(run.run_id, 2)
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.PENDING:
            jobs.jobs[second] = replace(jobs.jobs[second], status=JobStatus.RUNNING, driver_node_id="n1")
            live.append(NodeFree("n2", "10.0.0.2", 2.0))
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.RUNNING:
            step[0] += 1
            jobs.driver_logs[second] = step_lines(11, step[0])

    final, said, _ = supervise(jobs, run.run_id, monkeypatch, live=live, polls=60, on_tick=tick, latest_step=lambda record: step[0])
    assert final is None
    assert len(trainer_jobs(jobs, run.run_id)) == 2
    assert [r["reason"] for r in runs.load(run.run_id).revisions] == ["node lost"]
    assert not any("grow" in line for line in said)


def trainer_jobs(jobs, run_id):
    return [j for j in jobs.jobs if j.startswith(run_id + "-") and j[len(run_id) + 1 :].isdigit()]


def test_growing_back_after_a_dp_change_converts_again_at_the_new_save(home, jobs, monkeypatch):
    """Review finding: a re-plan that changed the DP size turns the universal load on; growing
    back needs a save at the reduced DP first, and that save pins the reduced DP, so the grow
    must convert again (not resume the original layout on a checkpoint DeepSpeed refuses)."""
    from dataclasses import replace

    run = lost_node_run(jobs, node_wait=100)
    runs.update(run.run_id, lambda r: r.config["checkpoint"].update({"save_steps": 2}))
    monkeypatch.setattr(supervisor.state, "driver_log_tail", lambda _d, job_id, _n, _l: jobs.driver_logs.get(job_id, ""))
    live = [NodeFree("n1", "10.0.0.1", 3.0)]  # too few GPUs to keep the actor's DP size: converted
    saved = [10]
    progress = {"step": 10}
    calls = []

    def converter(record, roles, bound):
        calls.append(list(roles))
        step = saved[0]
        return {
            "node": "10.0.0.1",
            "roles": {r: {"tag": f"global_step{step}", "universal": f"global_step{step}_uni", "seconds": 1.0} for r in roles},
            "errors": [],
            "progress": [],
        }

    def tick(n):
        second, third = (jobmeta.attempt_job_id(run.run_id, k) for k in (2, 3))
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.PENDING:
            jobs.jobs[second] = replace(jobs.jobs[second], status=JobStatus.RUNNING, driver_node_id="n1")
        if second in jobs.jobs and jobs.jobs[second].status is JobStatus.RUNNING and third not in jobs.jobs:
            progress["step"] += 1
            jobs.driver_logs[second] = step_lines(11, progress["step"])
            if progress["step"] % 2 == 0:
                saved[0] = progress["step"]
            if progress["step"] == 13:
                live[:] = [NodeFree("n1", "10.0.0.1", 6.0), NodeFree("n2", "10.0.0.2", 2.0)]  # the node is back
        if third in jobs.jobs and jobs.jobs[third].status is JobStatus.PENDING:
            jobs.set(third, JobStatus.SUCCEEDED)

    final, said, _ = supervise(
        jobs, run.run_id, monkeypatch, live=live, polls=160, on_tick=tick, converter=converter, latest_step=lambda record: saved[0]
    )
    assert final is RunStatus.SUCCEEDED, said[-10:]
    record = runs.load(run.run_id)
    assert [r["reason"] for r in record.revisions] == ["node lost", "grow"]
    assert record.revisions[0]["convert"] == ["actor", "critic"]
    assert record.revisions[-1]["convert"] == ["actor", "critic"], record.revisions[-1]  # DP 1 -> 2: converted again
    assert calls == [["actor", "critic"], ["actor", "critic"]]
    third = argv_of(jobs, 3, run.run_id)
    assert "--ds.use_universal_ckpt" in third
