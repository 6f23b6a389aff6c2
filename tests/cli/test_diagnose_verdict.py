"""`diagnose RUN` says what auto-resume decides after the attempt it reads (issue 32): the same
function the supervisor decides with (runs/history.py `counted_failures` and runs/retry.py
`decide`), over the run's own history and policy, so a failure that repeats at the same step
reads "would stop" in `diagnose` exactly as the supervisor stops on it."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from test_ctrl_c import healthy_run

from rlhf_launch.cli import options
from rlhf_launch.cli.app import main
from rlhf_launch.runs import evidence, history, remote, supervisor
from rlhf_launch.runs.evidence import Evidence
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

STEP = "✨ Global step {step}: {{'policy_loss': 0.1}}\n"
NCCL = "[rank3]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out.\n"


def failed_run(auto_resume: int, earlier_step: int | None) -> Run:
    """Attempt 1 failed with a retriable NCCL timeout at `earlier_step` (none when None); the
    last attempt failed and is to be diagnosed."""
    run = healthy_run()
    run.auto_resume, run.status = auto_resume, RunStatus.FAILED
    first = run.attempts[0]
    first.status = AttemptStatus.FAILED
    if earlier_step is None:
        return run
    first.diagnosis = {"class": "nccl", "retriable": True, "step": earlier_step, "evidence": [], "hint": "h"}
    run.attempts.append(Attempt(2, "tiny-2", "auto-resume", True, time.time() - 30, AttemptStatus.FAILED, resumed_from_step=4))
    return run


@pytest.fixture
def diagnose_with(monkeypatch):
    def setup(run: Run, log: str):
        monkeypatch.setattr(
            options, "run_and_cluster", lambda *a, **k: (run, SimpleNamespace(jobs=None, dashboard=None, address=run.address))
        )
        monkeypatch.setattr(remote, "refresh", lambda record, _jobs: record)
        monkeypatch.setattr(evidence, "gather", lambda _jobs, _dash, job_id: Evidence(job_id, log=log))

    return setup


def test_a_failure_that_repeats_at_the_same_step_reads_would_stop(diagnose_with, capsys):
    run = failed_run(auto_resume=3, earlier_step=5)
    diagnose_with(run, STEP.format(step=5) + NCCL)
    assert main(["diagnose", run.run_id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["class"] == "nccl" and data["retriable"] is True and data["step"] == 5
    assert data["auto_resume"]["retry"] is False and "twice in a row at step 5" in data["auto_resume"]["reason"]
    # the supervisor, handed the same diagnosis, counts the same failures
    run.attempts[-1].diagnosis = {k: data[k] for k in ("class", "retriable", "step")}
    sup = supervisor.Supervisor(run.run_id, None, dashboard=None, sweeper=lambda r, j: [], say=lambda _: None)
    assert sup._failures(run) == history.counted_failures(run, run.attempts[-1].number, data)


def test_the_same_failure_after_progress_reads_would_resume(diagnose_with, capsys):
    run = failed_run(auto_resume=3, earlier_step=5)
    diagnose_with(run, STEP.format(step=9) + NCCL)
    assert main(["diagnose", run.run_id]) == 0
    out = capsys.readouterr().out
    assert "auto-resume: would resume" in out and "resume 2 of 3" in out


def test_a_run_without_auto_resume_is_answered_as_if_it_had_one(diagnose_with, capsys):
    run = failed_run(auto_resume=0, earlier_step=None)
    diagnose_with(run, STEP.format(step=9) + NCCL)
    assert main(["diagnose", run.run_id, "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)["auto_resume"]
    assert verdict["retry"] is True and verdict["hypothetical"] is True and "--auto-resume N" in verdict["reason"]


def test_the_verdict_stands_on_the_diagnosis_the_supervisor_stored(diagnose_with, capsys):
    """The supervisor decided on what it could read then (the dashboard did not answer: `unknown`,
    retriable, at the step it tracked); `diagnose` reads more now, but says what was decided."""
    run = failed_run(auto_resume=3, earlier_step=None)
    run.attempts[0].diagnosis = {"class": "unknown", "retriable": True, "step": 12, "evidence": [], "hint": "h"}
    diagnose_with(run, "(raylet) node died\n")
    assert main(["diagnose", run.run_id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["auto_resume"]["retry"] is True and "resume 1 of 3" in data["auto_resume"]["reason"]
