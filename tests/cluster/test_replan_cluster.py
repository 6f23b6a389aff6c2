"""A node is lost and does not come back: after supervise.node_wait the supervisor re-plans the
run onto the GPUs that are left and it ends SUCCEEDED (a real local Ray cluster, the stand-in
trainer: its placement groups in OpenRLHF's order, a holder actor per node, DeepSpeed's DP
check on load)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from support.jobs import attempts_seen, record, standin, submit, wait_run

pytestmark = pytest.mark.cluster


@pytest.fixture()
def two_workers(tmp_path):
    """A head without GPUs and two workers of 6 GPUs each (127.0.0.3 and .4)."""
    from support.ray_cluster import LocalCluster

    local = LocalCluster(tmp_path / "cluster", workers=0, gpus=0)
    (tmp_path / "cluster").mkdir()
    try:
        local.start()
        for i in range(2):
            local.add_worker(gpus=6)
            local.wait_nodes(2 + i)
        yield local
    finally:
        local.stop()


def kill_node(local, worker: int) -> None:
    """SIGKILL every process of one node (its `join`, raylet, agents, workers)."""
    from support.ray_cluster import descendants

    proc = local.worker_procs[worker]
    for pid in [proc.pid, *descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def node_of_group(local, bundles: int) -> set[str]:
    """The node ids holding the placement group of `bundles` bundles."""
    found = set()
    for pg in local.placement_groups():
        if len(pg.get("bundles", [])) == bundles and pg.get("state") == "CREATED":
            found |= {b.get("node_id") for b in pg["bundles"]}
    return found


def worker_index(local, node_id: str) -> int:
    ip = next(n["node_ip"] for n in local.alive_nodes() if n["node_id"] == node_id)
    return int(ip.rsplit(".", 1)[1]) - 3


def test_a_lost_vllm_node_resumes_with_fewer_engines_after_node_wait(two_workers, tmp_path):
    local = two_workers
    env = {
        "RAY_AUTH_TOKEN_PATH": str(local.token_file),
        "RAY_API_SERVER_ADDRESS": local.address,
        "RLHF_LAUNCH_HOME": str(tmp_path / "state"),
    }
    ckpt = tmp_path / "ckpt"
    out = submit(
        env,
        *standin(ckpt, steps=24, step_seconds=0.5),
        "cluster.nodes=2",
        "cluster.gpus_per_node=6",
        "supervise.node_wait=5",
        "runtime_env.env_vars.STANDIN_WATCH_NODES='1'",
        "runtime_env.env_vars.STANDIN_PLACEMENT_TIMEOUT='600'",
        extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1"),
    )
    run_id = out["run_id"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (ckpt / "_actor" / "latest").exists():
        time.sleep(0.5)
    assert (ckpt / "_actor" / "latest").exists(), local.logs()
    # actor+ref 2, vLLM 4x1, critic+reward 2: the engines' group fills the other worker
    vllm_nodes, actor_nodes = node_of_group(local, 4), node_of_group(local, 2)
    assert len(vllm_nodes) == 1 and not (vllm_nodes & actor_nodes), (vllm_nodes, actor_nodes)
    lost = worker_index(local, vllm_nodes.pop())
    killed_at = time.time()
    kill_node(local, lost)
    row = wait_run(env, run_id, ("SUCCEEDED", "GAVE_UP", "FAILED"), timeout=420)
    jobs = local.jobs()
    log = jobs.logs(f"{run_id}-supervisor-1")
    assert row["status"] == "SUCCEEDED", log[-4000:]
    assert "re-planning onto the nodes left after 5s" in log
    rec = record(env, run_id)
    (rev,) = rec["revisions"]
    assert rev["reason"] == "node lost" and rev["old_gpus"] == 8 and rev["new_gpus"] == 6 and rev["convert"] == []
    assert rev["summary"].startswith("vLLM 4x1 -> 2x1 on 6 GPUs"), rev
    assert f"127.0.0.{3 + lost}" in rev["lost"]
    assert rev["at"] - killed_at >= 5  # not before node_wait
    seen = attempts_seen(ckpt)
    last = seen[-1]
    assert last["gpus"] == 6 and last["nodes"] == 1 and last["actor_dp"] == 2 and not last["universal"]
    argv = last["argv"]
    assert argv[argv.index("--vllm.num_engines") + 1] == "2" and "--ckpt.load_enable" in argv
    # every saved step written once, none lost beyond the last checkpoint
    saves = [json.loads(line) for line in (ckpt / ".standin_saves.jsonl").read_text().splitlines()]
    steps = [s["step"] for s in saves]
    assert sorted(set(steps)) == list(range(2, 25, 2)) and len(steps) == len(set(steps))
    assert last["start_step"] == max(s["step"] for s in saves if s["time"] < rev["at"])
    statuses = [a["status"] for a in rec["attempts"]]
    assert statuses[0] == "FAILED" and statuses[-1] == "SUCCEEDED"
    print(f"BENCH node death -> first step of the re-planned attempt: {last['time'] - killed_at:.1f}s (node_wait 5s included)")


@pytest.fixture()
def two_small_workers(tmp_path):
    """A head without GPUs and two workers of 4 GPUs each; every node has the stand-in image
    on its path (the conversion runs DeepSpeed's module on a node, as on a real image)."""
    from support.jobs import STANDIN
    from support.ray_cluster import LocalCluster

    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(STANDIN)) if p)
    local = LocalCluster(tmp_path / "cluster", workers=0, gpus=0, head_env={"PYTHONPATH": path})
    (tmp_path / "cluster").mkdir()
    try:
        local.start()
        for i in range(2):
            local.add_worker(gpus=4, env={"PYTHONPATH": path})
            local.wait_nodes(2 + i)
        yield local
    finally:
        local.stop()


def test_a_lost_actor_node_converts_the_checkpoint_and_resumes_at_a_new_dp_size(two_small_workers, tmp_path):
    local = two_small_workers
    env = {
        "RAY_AUTH_TOKEN_PATH": str(local.token_file),
        "RAY_API_SERVER_ADDRESS": local.address,
        "RLHF_LAUNCH_HOME": str(tmp_path / "state"),
    }
    ckpt = tmp_path / "ckpt"
    out = submit(
        env,
        *standin(ckpt, steps=24, step_seconds=0.5),
        "cluster.nodes=2",
        "cluster.gpus_per_node=4",
        "checkpoint.max_num=100",  # the trainer's own rotation would remove old tags: keep them to compare
        "supervise.node_wait=5",
        "runtime_env.env_vars.STANDIN_WATCH_NODES='1'",
        "runtime_env.env_vars.STANDIN_PLACEMENT_TIMEOUT='600'",
        extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1"),
    )
    run_id = out["run_id"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (ckpt / "_actor" / "latest").exists():
        time.sleep(0.5)
    assert (ckpt / "_actor" / "latest").exists(), local.logs()
    actor_nodes = node_of_group(local, 2)
    assert len(actor_nodes) == 1, actor_nodes  # actor+ref 2 and critic+reward 2 on one worker, vLLM 4 on the other
    lost = worker_index(local, actor_nodes.pop())
    killed_at = time.time()
    kill_node(local, lost)
    time.sleep(2)
    originals = {str(p.relative_to(ckpt)): p.read_bytes() for p in ckpt.rglob("*") if p.is_file() and "_uni" not in str(p)}
    row = wait_run(env, run_id, ("SUCCEEDED", "GAVE_UP", "FAILED"), timeout=480)
    log = local.jobs().logs(f"{run_id}-supervisor-1")
    assert row["status"] == "SUCCEEDED", log[-4000:]
    rec = record(env, run_id)
    (rev,) = rec["revisions"]
    assert rev["convert"] == ["actor", "critic"] and "actor DP 2 -> 1" in rev["summary"], rev
    tag = f"global_step{rev['from_step']}"
    for role in ("_actor", "_critic"):
        assert (ckpt / role / "latest_universal").read_text() == f"{tag}_uni"
        assert json.loads((ckpt / role / f"{tag}_uni" / "state.json").read_text())["universal"] is True
    for name, data in originals.items():  # the original tags only read
        if "/global_step" in name:
            assert (ckpt / name).read_bytes() == data, name
    assert "converting the latest checkpoint of actor, critic" in log and "conversion: _actor/" in log
    seen = attempts_seen(ckpt)
    resumed = next(a for a in seen if a["universal"])
    assert resumed["actor_dp"] == 1 and resumed["start_step"] == rev["from_step"] and resumed["gpus"] <= 4
    saves = [json.loads(line) for line in (ckpt / ".standin_saves.jsonl").read_text().splitlines()]
    steps = [s["step"] for s in saves]
    assert sorted(set(steps)) == list(range(2, 25, 2)) and len(steps) == len(set(steps))
    print(
        f"BENCH node death -> first step of the re-planned attempt: {resumed['time'] - killed_at:.1f}s "
        f"(node_wait 5s included; re-planned at +{rev['at'] - killed_at:.1f}s)"
    )


@pytest.fixture()
def uneven_workers(tmp_path):
    """A head without GPUs, a worker of 6 GPUs and one of 2."""
    from support.ray_cluster import LocalCluster

    local = LocalCluster(tmp_path / "cluster", workers=0, gpus=0)
    (tmp_path / "cluster").mkdir()
    try:
        local.start()
        for i, gpus in enumerate((6, 2)):
            local.add_worker(gpus=gpus)
            local.wait_nodes(2 + i)
        yield local
    finally:
        local.stop()


def test_too_few_gpus_left_waits_saying_why_and_submits_nothing(uneven_workers, tmp_path):
    local = uneven_workers
    env = {
        "RAY_AUTH_TOKEN_PATH": str(local.token_file),
        "RAY_API_SERVER_ADDRESS": local.address,
        "RLHF_LAUNCH_HOME": str(tmp_path / "state"),
    }
    ckpt = tmp_path / "ckpt"
    out = submit(
        env,
        *standin(ckpt, steps=40, step_seconds=0.5),
        "cluster.nodes=2",
        "cluster.gpus_per_node=6",
        "supervise.node_wait=3",
        "runtime_env.env_vars.STANDIN_WATCH_NODES='1'",
        "runtime_env.env_vars.STANDIN_PLACEMENT_TIMEOUT='600'",
        extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1"),
    )
    run_id = out["run_id"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (ckpt / "_actor" / "latest").exists():
        time.sleep(0.5)
    assert (ckpt / "_actor" / "latest").exists(), local.logs()
    big = next(n["node_id"] for n in local.alive_nodes() if n["node_ip"] == "127.0.0.3")
    assert big in node_of_group(local, 4)  # the engines are on the 6-GPU worker
    kill_node(local, 0)  # 2 GPUs left: no layout of actor, critic and vLLM fits
    jobs = local.jobs()
    log = ""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and "not re-planning" not in log:
        time.sleep(2)
        log = jobs.logs(f"{run_id}-supervisor-1")
    assert f"not re-planning {run_id}: no layout of tiny-1node on the 1 live node(s) x 2 GPUs" in log, log[-4000:]
    assert "waiting for the GPUs to return" in log
    time.sleep(5)  # a few more polls: still nothing submitted
    assert [j.job_id for j in jobs.list() if j.job_id.startswith(f"{run_id}-") and j.job_id[len(run_id) + 1 :].isdigit()] == [f"{run_id}-1"]
    row = wait_run(env, run_id, ("WAITING",), timeout=30)
    assert row["status"] == "WAITING"
    assert record(env, run_id)["revisions"] == []


@pytest.mark.slow  # ~2 min on 2 cores; tests/runs/test_supervisor_replan.py covers growing back in every CI run
def test_the_run_grows_back_when_the_node_rejoins(two_workers, tmp_path):
    local = two_workers
    env = {
        "RAY_AUTH_TOKEN_PATH": str(local.token_file),
        "RAY_API_SERVER_ADDRESS": local.address,
        "RLHF_LAUNCH_HOME": str(tmp_path / "state"),
    }
    ckpt = tmp_path / "ckpt"
    out = submit(
        env,
        *standin(ckpt, steps=90, step_seconds=0.5),
        "cluster.nodes=2",
        "cluster.gpus_per_node=6",
        "supervise.node_wait=3",
        "runtime_env.env_vars.STANDIN_WATCH_NODES='1'",
        "runtime_env.env_vars.STANDIN_PLACEMENT_TIMEOUT='600'",
        extra=("--auto-resume", "2", "--backoff", "0", "--poll", "1"),
    )
    run_id = out["run_id"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (ckpt / "_actor" / "latest").exists():
        time.sleep(0.5)
    vllm_nodes = node_of_group(local, 4)
    assert len(vllm_nodes) == 1
    kill_node(local, worker_index(local, vllm_nodes.pop()))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(attempts_seen(ckpt)) < 2:
        time.sleep(1)
    assert len(attempts_seen(ckpt)) >= 2 and attempts_seen(ckpt)[-1]["gpus"] == 6
    local.add_worker(gpus=6)  # the node (or a replacement) joins again
    row = wait_run(env, run_id, ("SUCCEEDED", "GAVE_UP", "FAILED"), timeout=420)
    log = local.jobs().logs(f"{run_id}-supervisor-1")
    assert row["status"] == "SUCCEEDED", log[-4000:]
    rec = record(env, run_id)
    assert [r["reason"] for r in rec["revisions"]] == ["node lost", "grow"], log[-3000:]
    assert rec["revisions"][-1]["new_gpus"] == 8
    last = attempts_seen(ckpt)[-1]
    assert last["gpus"] == 8 and last["argv"][last["argv"].index("--vllm.num_engines") + 1] == "4"
    assert "growing back to the run's own layout at its next checkpoint save" in log
    saves = [json.loads(line) for line in (ckpt / ".standin_saves.jsonl").read_text().splitlines()]
    steps = [s["step"] for s in saves]
    assert sorted(set(steps)) == list(range(2, 91, 2)) and len(steps) == len(set(steps))
    assert [a["status"] for a in rec["attempts"]][-2:] == ["SUPERSEDED", "SUCCEEDED"]
