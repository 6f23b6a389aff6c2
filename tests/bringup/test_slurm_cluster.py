"""The generated sbatch script on a real Slurm (slurm-wlm: slurmctld + 3 slurmds on this
machine): a real 3-node Ray cluster on 127.0.0.2-4, a stand-in run to SUCCEEDED; scancel
mid-run records it stopped with its checkpoints kept, and a second sbatch resumes it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from support.jobs import attempts_seen, standin
from support.ports import free_port
from support.ray_cluster import env_for_cluster

from conftest import run_cli

pytestmark = pytest.mark.slurm

NODES = 3


def _slurm_missing() -> list[str]:
    from support.slurm_cluster import missing

    return missing()


if _slurm_missing() and not os.environ.get("CI"):
    pytest.skip(f"slurm-wlm is not installed (no {', '.join(_slurm_missing())}): apt-get install slurm-wlm", allow_module_level=True)


def _port_base(span: int = 10 * NODES + 10) -> int:
    """A run of `span` free ports (each node's Ray takes ports base + 10 * its index)."""
    for base in range(21000 + os.getpid() % 200 * 50, 60000, span):
        try:
            for port in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    assert not _slurm_missing(), f"CI is set but slurm-wlm is missing: {_slurm_missing()}"
    from support.slurm_cluster import SlurmCluster

    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes=NODES, kill_wait=30)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class Allocation:
    """One generated script and what its runs left: shared dir, records, Ray temp dir."""

    def __init__(self, slurm, workdir: Path, steps: int, step_seconds: float):
        self.slurm = slurm
        self.workdir = workdir
        self.ckpt = workdir / "ckpt"
        self.shared = self.ckpt / ".rlhf-launch-slurm"
        self.dashboard_port = free_port()
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # short: Ray's unix sockets
        self.script = workdir / "run.sbatch"
        overrides = [*standin(self.ckpt, steps=steps, step_seconds=step_seconds), f"cluster.nodes={NODES}", "cluster.gpus_per_node=8"]
        done = run_cli(
            "slurm",
            "tiny-1node",
            *overrides,
            "-o",
            str(self.script),
            "--no-gpu-request",  # the test nodes have no GPUs for Slurm; Ray gets 8 logical GPUs each
            "--port",
            str(free_port()),
            "--dashboard-port",
            str(self.dashboard_port),
            "--loopback-ports",
            str(_port_base()),
            "--launcher",
            f"{sys.executable} -m rlhf_launch",
            "--log",
            str(workdir / "job-%j.out"),
            "--wait-timeout",
            "240",
            "--stop-timeout",
            "40",
            "--signal-lead",
            "70",
            f"--ray-arg=--temp-dir={self.temp_dir}",
            "--ray-arg=--num-cpus=8",
            f"--ray-arg=--object-store-memory={80 * 1024 * 1024}",
            env=env_for_cluster(),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        self.env = {**env_for_cluster(), "SLURM_CONF": str(slurm.conf)}

    def sbatch(self) -> str:
        done = self.slurm.run("sbatch", "--parsable", str(self.script), env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def log(self, job_id: str) -> str:
        path = self.workdir / f"job-{job_id}.out"
        return path.read_text(errors="replace") if path.exists() else "(no log)"

    def run_id(self) -> str:
        return (self.shared / "run_id").read_text().strip()

    def record(self) -> dict:
        return json.loads((self.shared / "home" / "runs" / f"{self.run_id()}.json").read_text())

    def token(self) -> str:
        return (self.shared / "auth_token").read_text().strip()

    def alive_nodes(self) -> list[str]:
        try:
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.dashboard_port}/api/v0/nodes?limit=100", headers={"Authorization": f"Bearer {self.token()}"}
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                data = json.loads(response.read())
        except (OSError, ValueError):
            return []
        return sorted(n["node_ip"] for n in data["data"]["result"]["result"] if n["state"] == "ALIVE")

    def wait(self, check, timeout: float, what: str, job_id: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            if self.slurm.job_state(job_id) not in ("PENDING", "RUNNING", "CONFIGURING", ""):
                break
            time.sleep(1)
        raise AssertionError(f"{what}: not within {timeout}s; job {job_id} {self.slurm.job_state(job_id)}\n{self.log(job_id)[-6000:]}")

    def leftovers(self) -> list[int]:
        """Processes of this allocation's Ray (they name its temp dir) still alive."""
        mark = str(self.temp_dir).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if mark in (entry / "cmdline").read_bytes() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def cleanup(self) -> None:
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


@pytest.fixture
def allocation(slurm, tmp_path):
    made: list[Allocation] = []

    def make(steps: int, step_seconds: float) -> Allocation:
        made.append(Allocation(slurm, tmp_path, steps, step_seconds))
        return made[-1]

    yield make
    for alloc in made:
        for line in slurm.run("squeue", "-h", "-o", "%i").stdout.split():
            slurm.run("scancel", line)
        alloc.cleanup()


def test_sbatch_brings_up_three_ray_nodes_and_runs_to_success(slurm, allocation):
    alloc = allocation(steps=4, step_seconds=0.5)
    job = alloc.sbatch()
    nodes = alloc.wait(lambda: alloc.alive_nodes() if len(alloc.alive_nodes()) == NODES else None, 300, "3 Ray nodes", job)
    assert nodes == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]  # one Ray node on each Slurm node, at its own address
    state = slurm.wait_job_end(job, 300)
    text = alloc.log(job)
    assert state == "COMPLETED", text[-6000:]
    record = alloc.record()
    assert record["status"] == "SUCCEEDED", text[-4000:]
    assert [a["reason"] for a in record["attempts"]] == ["submit"]
    assert (alloc.shared / "auth_token").stat().st_mode & 0o777 == 0o600
    seen = attempts_seen(alloc.ckpt)
    assert len(seen) == 1 and seen[0]["nodes"] >= 1
    assert alloc.leftovers() == [], "the script's Ray nodes outlived the allocation"
    # a clean job's log is clean: every node step ends with exit 0, none is cancelled, and
    # nothing tells the user to copy a token or join a node by hand
    for noise in ("CANCELLED", "Exited with exit code", "copy it to each worker", "on each worker node run", "Traceback"):
        assert noise not in text, f"{noise!r} in the log of a clean job:\n{text[-6000:]}"
    # the checkpoints and the export are the team's to read (no job-wide umask 077)
    written = [p for p in alloc.ckpt.rglob("*") if ".rlhf-launch-slurm" not in p.parts]
    assert written and all(p.stat().st_mode & 0o040 for p in written), [oct(p.stat().st_mode) for p in written][:5]


@pytest.mark.slow  # about 2.5 minutes: scancel, then a second sbatch that resumes (CI's 15-minute budget)
def test_scancel_mid_run_is_recorded_and_a_second_sbatch_resumes_it(slurm, allocation):
    alloc = allocation(steps=10, step_seconds=1.0)
    first = alloc.sbatch()

    def saved() -> bool:
        latest = alloc.ckpt / "_actor" / "latest"
        return latest.exists() and int(latest.read_text().strip().replace("global_step", "") or 0) >= 2

    alloc.wait(saved, 300, "a checkpoint of step 2", first)
    assert slurm.run("scancel", first).returncode == 0
    state = slurm.wait_job_end(first, 120)
    text = alloc.log(first)
    assert state == "CANCELLED", text[-4000:]
    record = alloc.record()
    assert record["status"] == "STOPPED", text[-4000:]
    # every attempt ended in the record, right after scancel (none left RUNNING)
    assert [a["status"] for a in record["attempts"]] == ["STOPPED"], record["attempts"]
    assert "interrupted" in (alloc.shared / "interrupted.log").read_text()
    steps_kept = sorted(p.name for p in (alloc.ckpt / "_actor").iterdir() if p.name.startswith("global_step"))
    assert steps_kept, "the checkpoints are gone"
    alloc.wait(lambda: not alloc.leftovers(), 60, "the first allocation's Ray gone", first)

    second = alloc.sbatch()  # the same script again
    state = slurm.wait_job_end(second, 400)
    text = alloc.log(second)
    assert state == "COMPLETED", text[-6000:]
    record = alloc.record()
    assert record["status"] == "SUCCEEDED", text[-4000:]
    assert record["run_id"] == alloc.run_id()
    resumed = record["attempts"][-1]
    assert resumed["reason"] == "resume" and resumed["resumed_from_step"] >= 2
    seen = attempts_seen(alloc.ckpt)
    assert seen[0]["start_step"] == 0 and seen[-1]["start_step"] >= 2
    assert alloc.leftovers() == []
