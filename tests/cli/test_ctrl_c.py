"""Ctrl-C while following (issue 28): `watch` and `logs --follow` both exit 130, whatever the
run's state, and say the job keeps running (README: exit codes)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from rlhf_launch.cli import options
from rlhf_launch.cli.app import main
from rlhf_launch.runs import logs, remote, supervisor
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus


def healthy_run() -> Run:
    return Run(
        run_id="tiny-20250501-120000-abc123",
        name="tiny",
        created=time.time(),
        address="http://127.0.0.1:9",
        openrlhf_version="0.11.2",
        config={},
        config_hash="0",
        config_source="x.yaml",
        overrides=[],
        argv=[],
        runtime_env={},
        ckpt_path="/ckpt",
        attempts=[Attempt(1, "tiny-1", "submit", False, time.time() - 60, AttemptStatus.RUNNING)],
        status=RunStatus.RUNNING,
        gpus_required=8,
    )


def interrupted_stream(*_args, **_kwargs):
    yield "(PPOTrainer pid=1) ✨ Global step 1: {'reward': 0.1}\n"
    raise KeyboardInterrupt


@pytest.fixture
def fake_cluster(monkeypatch):
    run = healthy_run()
    jobs = SimpleNamespace(follow=interrupted_stream)
    monkeypatch.setattr(options, "run_and_cluster", lambda *a, **k: (run, SimpleNamespace(jobs=jobs, address=run.address)))
    monkeypatch.setattr(remote, "refresh", lambda record, _jobs: record)
    monkeypatch.setattr(supervisor, "live_supervisor", lambda record, _jobs: SimpleNamespace(job_id="tiny-supervisor-1"))
    monkeypatch.setattr(logs, "follow", interrupted_stream)
    return run


@pytest.mark.parametrize("argv", [["watch", "tiny"], ["logs", "tiny", "--follow"]])
def test_ctrl_c_while_following_exits_130(argv, fake_cluster, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 130, (out, err)
    assert "stopped following; the job keeps running" in err
    assert "Global step 1" in out
