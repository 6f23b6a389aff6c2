"""A run that waits (issue 28): `runs` shows no ETA (the last one is stale while nothing
trains) and says what it waits for, from the record and, on a live cluster, Ray's node table."""

from __future__ import annotations

import json
import time

from support.fakes import FakeDashboard, FakeJobs

from rlhf_launch.cli.app import main
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus


def waiting_run(address: str) -> Run:
    run = Run(
        run_id="tiny-20250501-120000-abc123",
        name="tiny",
        created=time.time(),
        address=address,
        openrlhf_version="0.11.2",
        config={},
        config_hash="0",
        config_source="x.yaml",
        overrides=[],
        argv=[],
        runtime_env={},
        ckpt_path="/ckpt",
        attempts=[Attempt(1, "tiny-1", "submit", False, time.time() - 60, AttemptStatus.FAILED, diagnosis={"class": "node_lost"})],
        status=RunStatus.WAITING,
        gpus_required=16,
        auto_resume=3,
        progress={"step": 18, "total_steps": 40, "steps_per_hour": 1200.0, "eta_seconds": 66},
    )
    runs.save(run)
    return run


def test_a_waiting_run_shows_no_eta_and_what_it_waits_for(home, capsys, monkeypatch):
    from rlhf_launch.runs import overview

    jobs = FakeJobs()
    run = waiting_run(jobs.address)

    class Connected:
        def __init__(self, address, token, timeout=0.0):
            self.address, self.jobs, self.dashboard = address, jobs, FakeDashboard()

        def checked(self):
            return self

    rows = [{"node_id": "a" * 56, "node_ip": "127.0.0.1", "state": "ALIVE", "resources_total": {"GPU": 16.0}}]
    monkeypatch.setattr(overview, "Cluster", Connected)
    monkeypatch.setattr("rlhf_launch.cluster.snapshot.node_rows", lambda dashboard: rows)
    assert main(["runs", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["run_id"] == run.run_id)
    assert row["eta_seconds"] is None and row["step"] == 18
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "ETA" not in out and "step 18/40" in out
    assert f"{run.run_id}: waiting to resume 0/3: attempt 1 FAILED (node_lost)" in out
