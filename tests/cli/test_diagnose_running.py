"""`diagnose` of an attempt that is still running (issue 28): it says so, with its progress,
instead of classifying a failure that did not happen (`unknown (not retriable)`); a stalled
one shows the stall the supervisor diagnosed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_ctrl_c import healthy_run

from rlhf_launch.cli import options
from rlhf_launch.cli.app import main
from rlhf_launch.runs import evidence, remote


@pytest.fixture
def running(monkeypatch):
    run = healthy_run()
    run.progress = {"step": 18, "total_steps": 40, "steps_per_hour": 1200.0}
    monkeypatch.setattr(options, "run_and_cluster", lambda *a, **k: (run, SimpleNamespace(jobs=None, dashboard=None, address=run.address)))
    monkeypatch.setattr(remote, "refresh", lambda record, _jobs: record)

    def no_gather(*_args, **_kwargs):
        raise AssertionError("a running attempt has no failure to gather evidence of")

    monkeypatch.setattr(evidence, "gather", no_gather)
    return run


def test_a_running_attempt_is_said_to_run(running, capsys):
    assert main(["diagnose", running.run_id]) == 0
    out = capsys.readouterr().out
    assert "running: no failure to classify (step 18/40, 1,200 steps/h" in out
    assert "unknown" not in out and "not retriable" not in out
    assert main(["diagnose", running.run_id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["running"] is True and "class" not in data


def test_a_stalled_running_attempt_shows_its_stall(running, capsys):
    running.current.diagnosis = {
        "class": "stall",
        "retriable": True,
        "step": 3,
        "evidence": [],
        "hint": "no step since step 3: ...",
        "stall": {"milestone": "step", "message": "no step after step 3 for 25 s (deadline 20 s)"},
    }
    assert main(["diagnose", running.run_id]) == 0
    out = capsys.readouterr().out
    assert "stalled: no step after step 3 for 25 s (deadline 20 s)" in out and "diagnosis: stall (retriable)" in out


def test_a_running_attempt_after_an_auto_resume_names_the_failure_it_came_through(running, capsys):
    import time

    from rlhf_launch.runs.record import Attempt
    from rlhf_launch.runs.status import AttemptStatus

    first = running.attempts[0]
    first.status, first.diagnosis = AttemptStatus.FAILED, {"class": "node_lost", "retriable": True, "step": 7}
    running.attempts.append(Attempt(2, "tiny-2", "auto-resume", True, time.time() - 10, AttemptStatus.RUNNING))
    assert main(["diagnose", running.run_id]) == 0
    out = capsys.readouterr().out
    assert "attempt 2" in out and "running: no failure to classify" in out
    assert "earlier: attempt 1 FAILED: node_lost at step 7 (resumed)" in out
    assert f"rlhf-launch diagnose {running.run_id} --attempt 1" in out


def test_a_run_stopped_by_the_user_is_not_diagnosed_as_a_failure(running, capsys):
    from rlhf_launch.runs.status import AttemptStatus, RunStatus

    running.attempts[0].status, running.status, running.stopped_by_user = AttemptStatus.STOPPED, RunStatus.STOPPED, True
    assert main(["diagnose", running.run_id]) == 0
    out = capsys.readouterr().out
    assert "stopped by `rlhf-launch stop`: nothing failed" in out and "retriable" not in out
    assert main(["diagnose", running.run_id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stopped"] is True and "class" not in data


def test_a_stalled_attempt_the_supervisor_ended_says_what_auto_resume_decided(running, capsys):
    import time

    from rlhf_launch.runs.record import Attempt
    from rlhf_launch.runs.status import AttemptStatus, RunStatus

    stall = {
        "class": "stall",
        "retriable": True,
        "step": 3,
        "evidence": [],
        "hint": "no step since step 3: ...",
        "stall": {"milestone": "step", "message": "no step after step 3 for 25 s (deadline 15 s)"},
    }
    first = running.attempts[0]
    first.status, first.diagnosis = AttemptStatus.FAILED, dict(stall)
    running.attempts.append(Attempt(2, "tiny-2", "auto-resume", True, time.time() - 10, AttemptStatus.FAILED, diagnosis=dict(stall)))
    running.auto_resume, running.status = 1, RunStatus.GAVE_UP
    assert main(["diagnose", running.run_id]) == 0
    out = capsys.readouterr().out
    assert "stalled: no step after step 3" in out
    assert "auto-resume: would stop: stall twice in a row at step 3: it will repeat" in out
