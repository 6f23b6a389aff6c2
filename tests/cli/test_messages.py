"""Messages that were wrong (issue 20), run in-process against fakes: run ids decided from the
local records, `runs` saying why it is not live and what a waiting run waits for, a second
`stop`, `down`, the printed `ray job submit` address."""

from __future__ import annotations

import time

import pytest

try:  # the helpers' home after the tests' reorganisation, or before it
    from support.fakes import FakeDashboard, FakeJobs, running_run
except ImportError:
    from support.fakes import FakeDashboard, FakeJobs, running_run

from rlhf_launch.cli.app import main
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on port 9: refused at once


@pytest.fixture(autouse=True)
def no_cluster_env(monkeypatch):
    for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)


def record(run_id: str, address: str = UNREACHABLE, status: RunStatus = RunStatus.RUNNING, gpus: int = 16) -> Run:
    run = Run(
        run_id=run_id,
        name=run_id.split("-")[0],
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
        attempts=[Attempt(1, f"{run_id}-1", "submit", False, time.time() - 60, AttemptStatus.FAILED)],
        status=status,
        gpus_required=gpus,
    )
    runs.save(run)
    return run


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to build a connection to a cluster fails the test."""
    from rlhf_launch.cluster.connection import Cluster

    def refuse(*args, **kwargs):
        raise AssertionError("a network call was made")

    monkeypatch.setattr(Cluster, "at", classmethod(refuse))


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ run ids, decided locally


@pytest.mark.parametrize("verb", ["logs", "stop", "diagnose"])
def test_an_unknown_run_id_is_said_locally_with_the_closest(verb, home, capsys, no_network):
    record("tiny-20250501-120000-abc123")
    record("llama-20250501-120000-def456")
    code, _, err = run_cli(capsys, verb, "tiny-20250501-12000-abc123")
    assert code == 2
    assert "no run 'tiny-20250501-12000-abc123' among the 2 runs recorded on this machine" in err
    assert "the closest: tiny-20250501-120000-abc123" in err
    assert "--address" in err and "dashboard" not in err


@pytest.mark.parametrize("verb", ["logs", "stop"])
def test_an_ambiguous_run_id_lists_the_matches_without_asking_a_cluster(verb, home, capsys, no_network):
    record("tiny-20250501-120000-abc123")
    record("tiny-20250501-130000-def456")
    code, _, err = run_cli(capsys, verb, "tiny-2025")
    assert code == 2
    assert "'tiny-2025' matches 2 runs recorded on this machine: tiny-20250501-120000-abc123, tiny-20250501-130000-def456" in err


def test_an_id_unknown_here_is_asked_of_the_named_cluster_and_both_are_said(home, capsys):
    record("tiny-20250501-120000-abc123")
    code, _, err = run_cli(capsys, "logs", "nope", "--address", UNREACHABLE)
    assert code == 4  # a cluster error: the run may be there once the cluster answers
    assert "no run 'nope' among the 1 runs recorded on this machine" in err
    assert f"the cluster at {UNREACHABLE} could not be asked" in err


def test_a_known_run_is_reached_at_its_recorded_address(home, capsys):
    run = record("tiny-20250501-120000-abc123", address="http://127.0.0.1:19")
    code, _, err = run_cli(capsys, "logs", run.run_id)
    assert code == 4 and "http://127.0.0.1:19" in err and "8265" not in err  # 4: the cluster, not the user


# ------------------------------------------------------------------ runs


def test_runs_says_once_why_it_is_not_live(home, capsys):
    record("tiny-20250501-120000-abc123")
    record("tiny-20250501-130000-def456")
    code, out, _ = run_cli(capsys, "runs")
    assert code == 0
    assert out.count("(not live)") >= 2
    reasons = [line for line in out.splitlines() if line.startswith("(not live): the cluster at")]
    assert len(reasons) == 1
    assert UNREACHABLE in reasons[0] and "did not answer (cannot reach" in reasons[0]


def test_runs_says_what_a_waiting_run_waits_for_and_which_node_died(home, capsys, monkeypatch):
    from rlhf_launch.runs import overview

    jobs = FakeJobs()
    run = record("tiny-20250501-120000-abc123", address=jobs.address, status=RunStatus.WAITING)
    died = time.time() - 5

    class Connected:
        def __init__(self, address, token, timeout=0.0):
            self.address, self.jobs, self.dashboard = address, jobs, FakeDashboard()

        def checked(self):
            if self.address != jobs.address:
                from rlhf_launch.errors import ClusterUnreachable

                raise ClusterUnreachable(f"cannot reach the Ray dashboard at {self.address}")
            return self

    rows = [
        {"node_id": "a" * 56, "node_ip": "127.0.0.1", "state": "ALIVE", "resources_total": {"GPU": 8.0}},
        {
            "node_id": "3f2a1b2c" + "0" * 48,
            "node_ip": "127.0.0.4",
            "state": "DEAD",
            "state_message": "Unexpected termination: health check failed",
            "resources_total": {"GPU": 8.0},
            "end_time_ms": int(died * 1000),
        },
    ]
    monkeypatch.setattr(overview, "Cluster", Connected)
    monkeypatch.setattr("rlhf_launch.cluster.snapshot.node_rows", lambda dashboard: rows)
    code, out, _ = run_cli(capsys, "runs")
    assert code == 0
    from rlhf_launch.util.when import moment

    assert (
        f"{run.run_id}: waiting for 16 GPUs (alive nodes have 8): node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died {moment(died)}: "
        "Unexpected termination: health check failed"
    ) in out


# ------------------------------------------------------------------ stop


def test_a_second_stop_says_the_run_was_already_stopped_and_when(home):
    from rlhf_launch.cli import report
    from rlhf_launch.runs import stop
    from rlhf_launch.util.when import moment

    jobs = FakeJobs()
    run = running_run(jobs)
    asked = time.time()
    first = stop.stop(run, jobs, FakeDashboard(), lambda r, j: [], bound=5)
    assert first.gone and not first.already
    assert first.as_json()["stopped_at"] is not None and first.stopped_at >= asked - 1  # when it was stopped, in --json too
    assert report.stopped_text(first).startswith(f"stopped {run.run_id} in ")
    marker = jobs.jobs[f"{run.run_id}-stopped-1"]
    second = stop.stop(runs.load(run.run_id), jobs, FakeDashboard(), lambda r, j: [], bound=5)
    assert second.gone and second.already and second.stopped_at == marker.start_time
    text = report.stopped_text(second)
    assert text.startswith(f"{run.run_id} was already stopped at {moment(marker.start_time)}; checked again in ")
    assert second.as_json()["already_stopped"] is True


# ------------------------------------------------------------------ down


def test_down_help_says_it_stops_every_ray_node_of_the_machine(capsys):
    code, out, _ = run_cli(capsys, "down", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "every Ray process here" in text and "several Ray nodes" in text


def test_down_says_when_nothing_was_running(capsys, monkeypatch):
    from rlhf_launch.cluster import node

    monkeypatch.setattr(node, "local_nodes", list)
    monkeypatch.setattr(node, "stop", lambda force=False: node.Started(0, "Did not find any active Ray processes.\n"))
    code, out, _ = run_cli(capsys, "down")
    assert code == 0 and out.strip() == "nothing to stop: no Ray process runs on this machine"


def test_down_names_every_node_it_stopped(capsys, monkeypatch):
    from rlhf_launch.cluster import node

    here = [node.LocalNode("127.0.0.1", "127.0.0.1:6379"), node.LocalNode("127.0.0.2", "127.0.0.1:6379")]
    monkeypatch.setattr(node, "local_nodes", lambda: here)
    monkeypatch.setattr(node, "stop", lambda force=False: node.Started(0, "Stopped all 14 Ray processes.\n"))
    code, out, _ = run_cli(capsys, "down")
    assert code == 0
    assert out.startswith("stopped Ray on this machine (14 Ray processes): 2 Ray nodes: 127.0.0.1, 127.0.0.2")
    assert "stops every Ray node this machine runs" in out


def test_a_raylet_is_recognised_from_its_argv():
    from rlhf_launch.cluster import node

    argv = ["/x/ray/core/src/ray/raylet/raylet", "--node_ip_address=127.0.0.4", "--gcs-address=127.0.0.1:6379", "--foo"]
    assert node.raylet_node(argv) == node.LocalNode("127.0.0.4", "127.0.0.1:6379")
    assert node.raylet_node(["/usr/bin/python3", "--node_ip_address=1"]) is None
    assert node.stop_summary("Stopped only 3 out of 5 Ray processes within") == node.StopSummary(5, 3)


# ------------------------------------------------------------------ the equivalent ray job submit


def test_the_printed_ray_job_submit_names_the_address_given(capsys):
    code, out, _ = run_cli(capsys, "plan", "tiny-1node", "--address", "http://head-node:8265")
    assert code == 0
    assert "ray job submit --address http://head-node:8265 " in out and "127.0.0.1:8265" not in out


def test_status_lists_the_dead_nodes():
    from rlhf_launch.cli import report

    data = {
        "address": "http://h:8265",
        "ray_version": "2.60.0",
        "local_ray_version": "2.60.0",
        "ray_version_match": True,
        "nodes": [],
        "alive_nodes": 3,
        "gpus": 24,
        "gpus_free": 24,
        "dead_nodes": [
            {"node_id": "3f2a1b2c" + "0" * 48, "ip": "127.0.0.4", "is_head": False, "gpus": 8.0, "died_at": None, "reason": "gone"}
        ],
    }
    text = report.status_text(data)
    assert "dead nodes (1, the most recent first):\n  node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died: gone" in text
