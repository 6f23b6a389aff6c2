"""`checkpoints RUN` without a job on a warm cluster (issue 28): each node's doctor agent,
asked once, keeps watching the ckpt_path and prints its listing to its own stdout; the
launcher reads those lines over the dashboard's log API. A node without a fresh line sends
the launcher back to the probe job."""

from __future__ import annotations

import io
import json
import sys
import time

from rlhf_launch.cluster import ckptwatch, doctor
from rlhf_launch.cluster.probes.doctor import AGENT_PREFIX, CKPT_MARKER

VERSION = "abc123def456"
NODES = [{"node_id": "n1" * 28, "node_ip": "10.0.0.1"}, {"node_id": "n2" * 28, "node_ip": "10.0.0.2"}]
ACTORS = [{"name": f"{AGENT_PREFIX}{VERSION}-{n['node_id']}", "actor_id": f"a{i}"} for i, n in enumerate(NODES)]
LISTING = {
    "path": "/ckpt",
    "exists": True,
    "root": ["_actor"],
    "roles": {"_actor": {"entries": ["global_step4"], "latest": "global_step4"}},
}


def line(path: str, at: float, listing: dict) -> str:
    return f"{CKPT_MARKER} {json.dumps({'path': path, 'at': at, 'listing': listing})}"


def test_every_alive_node_answers_from_its_agents_log():
    logs = {
        "a0": ":actor_name:Agent\n" + line("/ckpt", 95.0, {**LISTING, "roles": {}}) + "\n" + line("/ckpt", 99.0, LISTING) + "\n",
        "a1": line("/other", 99.5, {}) + "\n" + line("/ckpt", 98.0, LISTING) + "\n" + line("/other", 99.9, {}) + "\n",
    }
    found = ckptwatch.from_logs(NODES, ACTORS, logs, "/ckpt", VERSION, now=100.0)
    assert found == {
        NODES[0]["node_id"]: {"ip": "10.0.0.1", "listing": LISTING},
        NODES[1]["node_id"]: {"ip": "10.0.0.2", "listing": LISTING},
    }


def test_a_stale_missing_or_other_version_agent_means_ask_by_a_probe_job():
    fresh = {"a0": line("/ckpt", 99.0, LISTING), "a1": line("/ckpt", 99.0, LISTING)}
    assert ckptwatch.from_logs(NODES, ACTORS, fresh, "/ckpt", VERSION, now=100.0) is not None
    stale = {**fresh, "a1": line("/ckpt", 100.0 - ckptwatch.FRESH - 1, LISTING)}  # a watch hung on a dead mount
    assert ckptwatch.from_logs(NODES, ACTORS, stale, "/ckpt", VERSION, now=100.0) is None
    assert ckptwatch.from_logs(NODES, ACTORS[:1], fresh, "/ckpt", VERSION, now=100.0) is None  # a node without an agent
    assert ckptwatch.from_logs(NODES, ACTORS, fresh, "/ckpt", "0ther0version", now=100.0) is None  # another launcher's agents
    assert ckptwatch.from_logs(NODES, ACTORS, {"a0": fresh["a0"]}, "/ckpt", VERSION, now=100.0) is None  # a log not read


def test_the_agent_watches_a_path_and_prints_each_change_within_a_second(tmp_path, monkeypatch):
    code = doctor.probe_code()  # exactly what the agents run
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    ckpt = tmp_path / "ckpt"
    (ckpt / "_actor" / "global_step2").mkdir(parents=True)
    (ckpt / "_actor" / "latest").write_text("global_step2")
    agent = code["Agent"]()
    assert agent.watch(str(ckpt))["roles"]["_actor"]["latest"] == "global_step2"  # the listing now
    deadline = time.monotonic() + 10
    while ckptwatch.latest_line(out.getvalue(), str(ckpt)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ckptwatch.latest_line(out.getvalue(), str(ckpt))["listing"]["roles"]["_actor"]["latest"] == "global_step2"
    (ckpt / "_actor" / "global_step4").mkdir()
    (ckpt / "_actor" / "latest").write_text("global_step4")
    changed = time.monotonic()
    while time.monotonic() < changed + 10:
        seen = ckptwatch.latest_line(out.getvalue(), str(ckpt))
        if seen and seen["listing"]["roles"]["_actor"]["latest"] == "global_step4":
            break
        time.sleep(0.05)
    assert seen["listing"]["roles"]["_actor"]["latest"] == "global_step4"
    assert time.monotonic() - changed < 3  # one look a second (a loaded machine: some slack)
    assert abs(seen["at"] - time.time()) < 3
    agent._watched.clear()  # the daemon thread stays, looking at nothing


def test_the_probe_job_source_compiles_with_the_agents_code():
    from rlhf_launch.cluster import probe

    text = probe.source("ckptwatch.py", ckptwatch.USES)
    namespace: dict = {"__name__": "not_main"}
    exec(compile(text, "ckptwatch", "exec"), namespace)  # noqa: S102 - the shipped source, as a job runs it
    assert callable(namespace["agents"]) and callable(namespace["listing"]) and callable(namespace["main"])
    assert doctor.agent_version() == ckptwatch.doctor.agent_version()  # the job starts the agents `read` looks for
