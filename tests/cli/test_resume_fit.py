"""`rlhf-launch resume RUN --fit`: re-plan a stopped or failed run onto the live cluster,
print the old and new layout, `--dry-run` submits nothing, a refusal says why (exit 2)."""

from __future__ import annotations

import json

from support.fakes import FakeCluster, FakeJobs, running_run

from rlhf_launch.cli.app import main
from rlhf_launch.cluster.jobs import JobStatus
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.runs import record as runs


class Snap:
    def __init__(self, live):
        self.live = live

    def free_nodes(self):
        return list(self.live)


def failed_run(monkeypatch, live):
    from rlhf_launch.cli import options
    from rlhf_launch.runs import refit

    jobs = FakeJobs()
    run = running_run(jobs)  # tiny-1node: 8 GPUs
    jobs.set(run.current.job_id, JobStatus.FAILED, "node died")
    cluster = FakeCluster(jobs)
    cluster.dashboard = None  # read through the patched snapshot
    monkeypatch.setattr(options, "cluster", lambda *a, **k: cluster)
    monkeypatch.setattr(refit.snapshot, "read", lambda *a, **k: Snap(live))
    return jobs, run


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_prints_the_old_and_new_layout_and_submits_nothing(home, capsys, monkeypatch):
    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 6.0)])
    before = runs.load(run.run_id)
    code, out, err = cli(capsys, "resume", run.run_id, "--fit", "--dry-run")
    assert code == 0, err
    assert "layout now:  actor+ref 2 + critic+reward 2 + vLLM 4x1 (8 GPUs)" in out
    assert "re-planned:" in out and "(6 GPUs)" in out and "vLLM 4x1 -> 2x1 on 6 GPUs" in out
    assert jobs.submitted() == [run.current.job_id]
    after = runs.load(run.run_id)
    assert after.config == before.config and after.revisions == []
    code, out, _ = cli(capsys, "resume", run.run_id, "--fit", "--dry-run", "--json")
    data = json.loads(out)
    assert data["dry_run"] is True and data["new"]["gpus"] == 6 and data["old"]["gpus"] == 8


def test_fit_resumes_on_the_new_layout_with_a_plan_revision(home, capsys, monkeypatch):
    from rlhf_launch.runs import resume

    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 6.0)])
    seen = []

    def resumed(record, overrides, cluster, **kwargs):
        seen.append(record)
        return resume.Resumed(record, record.current, None, [])

    monkeypatch.setattr(resume, "resume", resumed)
    code, out, err = cli(capsys, "resume", run.run_id, "--fit")
    assert code == 0, err
    (record,) = seen
    assert record.config["placement"]["vllm"]["engines"] == 2 and record.gpus_required == 6
    assert "--vllm.num_engines" in record.argv and record.argv[record.argv.index("--vllm.num_engines") + 1] == "2"
    (rev,) = runs.load(run.run_id).revisions
    assert rev["reason"] == "by hand" and rev["new_gpus"] == 6


def test_a_resume_that_does_not_submit_leaves_the_layout_as_it_was(home, capsys, monkeypatch):
    from rlhf_launch.core.findings import error
    from rlhf_launch.runs import resume

    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 6.0)])
    before = runs.load(run.run_id)
    monkeypatch.setattr(resume, "resume", lambda record, *a, **k: resume.Resumed(record, None, None, [error("node", "shm too small")]))
    code, out, err = cli(capsys, "resume", run.run_id, "--fit")
    assert code == 2
    after = runs.load(run.run_id)
    assert after.config == before.config and after.argv == before.argv and after.revisions == []


def test_too_few_gpus_is_refused_saying_why(home, capsys, monkeypatch):
    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 1.0)])
    code, out, err = cli(capsys, "resume", run.run_id, "--fit")
    assert code == 2
    assert "no layout to resume" in out and "1 live node(s) x 1 GPUs" in out
    assert jobs.submitted() == [run.current.job_id]


def test_nodes_beyond_the_live_ones_is_a_user_error(home, capsys, monkeypatch):
    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 6.0)])
    code, out, err = cli(capsys, "resume", run.run_id, "--fit", "--nodes", "2", "--dry-run")
    assert code == 2 and "--nodes 2: the cluster has 1 alive node(s) with free GPUs" in err


def test_dry_run_or_nodes_without_fit_is_a_user_error_not_a_silent_re_plan(home, capsys, monkeypatch):
    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 6.0)])
    for given in (["--dry-run"], ["--nodes", "1"]):
        code, out, err = cli(capsys, "resume", run.run_id, *given)
        assert code == 2 and f"{given[0]} goes with --fit" in err
    assert jobs.submitted() == [run.current.job_id]


def test_runs_and_watch_say_which_node_was_lost_and_how_the_layout_changed(home, monkeypatch):
    from rlhf_launch.cli import report
    from rlhf_launch.runs.overview import row

    jobs, run = failed_run(monkeypatch, [NodeFree("n1", "10.0.0.1", 6.0)])
    rev = {
        "number": 1,
        "at": 0.0,
        "reason": "node lost",
        "lost": "node 10.0.0.4 (id 3f2a1b2c, 2 GPUs) died 12:03:41",
        "old": "actor+ref 2 + critic+reward 2 + vLLM 4x1",
        "new": "actor+ref 2 + critic+reward 2 + vLLM 2x1",
        "old_gpus": 8,
        "new_gpus": 6,
        "old_step_s": 10.0,
        "new_step_s": 13.0,
        "summary": "vLLM 4x1 -> 2x1 on 6 GPUs; step time +30% by estimate",
    }
    record = runs.update(run.run_id, lambda r: r.revisions.append(rev))
    line = report.run_line(record)
    assert "plan revision 1 (node lost" in line and "node 10.0.0.4" in line and "vLLM 4x1 -> 2x1 on 6 GPUs; step time +30%" in line
    assert "vLLM 4x1 -> 2x1" in row(record, True)["revision"]
