"""A real multi-node Ray cluster on this machine, started with the launcher's own `up --head`
and `join` (loopback addresses 127.0.0.2, .3, ...), torn down by the processes it started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from support.ports import free_port

OBJECT_STORE = 80 * 1024 * 1024


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        for child in tree.get(current, []):
            out.append(child)
            todo.append(child)
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def env_for_cluster(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("WANDB_API_KEY", None)
    # Ray starts a Python worker per CPU when a job's first driver connects; on 2 cores those
    # idle starts were a fifth of the suite's time. The workers the run's actors need start on demand.
    env["RAY_prestart_worker_first_driver"] = "0"
    env.update(extra or {})
    return env


class LocalCluster:
    def __init__(
        self,
        workdir: Path,
        workers: int = 3,
        gpus: int = 8,
        cpus: int = 8,
        extra_up: list[str] | None = None,
        head_env: dict[str, str] | None = None,
        worker_env: list[dict[str, str]] | None = None,
    ):
        """extra_up: launcher options given to `up` and every `join` (e.g. --ib-hca).
        head_env / worker_env: each node's own environment (worker_env[i] for worker i)."""
        self.head_env = head_env or {}
        self.worker_env = worker_env or []
        self.workdir = workdir
        self.workers = workers
        self.gpus, self.cpus = gpus, cpus
        self.extra_up = extra_up or []
        self.gcs_port = free_port()
        self.dashboard_port = free_port()
        self.token_file = workdir / "auth_token"
        self.address = f"http://127.0.0.1:{self.dashboard_port}"
        self.head_ip = "127.0.0.2"
        self.procs: list[subprocess.Popen] = []
        self.worker_procs: list[subprocess.Popen] = []
        self.agent_ports: list[int] = []
        self.env = env_for_cluster({"RLHF_LAUNCH_HOME": str(workdir / "state")})
        # Ray's own temp dir, one per cluster; short, since Ray puts unix sockets in it
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rl-", dir="/tmp"))

    # ------------------------------------------------------------- start
    def _node_ports(self) -> list[str]:
        """Ports of one node's own processes, and the cluster's temp dir (every node's)."""
        self.agent_ports.append(free_port())  # each node's dashboard agent's HTTP port, the head's first
        return [
            "--temp-dir",
            str(self.temp_dir),
            "--dashboard-agent-listen-port",
            str(self.agent_ports[-1]),
            "--metrics-export-port",
            str(free_port()),
            "--runtime-env-agent-port",
            str(free_port()),
            "--dashboard-agent-grpc-port",
            str(free_port()),
        ]

    def _spawn(self, args: list[str], log: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        out = open(self.workdir / log, "w")
        err = open(self.workdir / log.replace(".log", ".ray.log"), "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlhf_launch", *args],
            stdout=out,
            stderr=err,
            env={**self.env, **(env or {})},
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 180) -> LocalCluster:
        head = [
            "up",
            "--head",
            "--block",
            "--json",
            "--node-ip-address",
            self.head_ip,
            "--port",
            str(self.gcs_port),
            "--dashboard-port",
            str(self.dashboard_port),
            "--num-gpus",
            str(self.gpus),
            "--num-cpus",
            str(self.cpus),
            "--object-store-memory",
            str(OBJECT_STORE),
            "--token-file",
            str(self.token_file),
            *self.extra_up,
            "--",
            "--ray-client-server-port",
            str(free_port()),
            *self._node_ports(),
        ]
        proc = self._spawn(head, "head.log", self.head_env)
        self._wait(lambda: self.head_info() is not None, timeout, "head", proc)
        failed = (self.head_info() or {}).get("error")
        if failed:  # `up --json` said why it could not start the head (an error object, not the head's info)
            raise RuntimeError(f"head: rlhf-launch up failed: {failed}: {self.logs()}")
        for i in range(self.workers):  # one at a time, as people join nodes (and 2 cores cope)
            self.add_worker()
            self.wait_nodes(2 + i, timeout)
        return self

    def add_worker(self, gpus: int | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
        """env: this node's own environment on top of the cluster's (PYTHONPATH, HF_HOME, ...),
        as a real node of another image or another user differs."""
        index = len(self.worker_procs)
        args = [
            "join",
            self.head_ip,
            "--block",
            "--port",
            str(self.gcs_port),
            "--node-ip-address",
            f"127.0.0.{3 + index}",
            "--num-gpus",
            str(gpus if gpus is not None else self.gpus),
            "--num-cpus",
            str(self.cpus),
            "--object-store-memory",
            str(OBJECT_STORE),
            "--token-file",
            str(self.token_file),
            *self.extra_up,
            "--",
            *self._node_ports(),
        ]
        proc = self._spawn(
            args, f"worker{index}.log", (self.worker_env[index] if index < len(self.worker_env) else None) if env is None else env
        )
        self.worker_procs.append(proc)
        return proc

    def _wait(self, check, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{what} exited {proc.returncode}: {self.logs()}")
            time.sleep(0.5)
        raise TimeoutError(f"{what} not ready in {timeout}s: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.workdir.glob("*.log")))

    def head_info(self) -> dict | None:
        path = self.workdir / "head.log"
        text = path.read_text() if path.exists() else ""
        try:
            return json.loads(text) if text.rstrip().endswith("}") else None
        except ValueError:
            return None

    # ------------------------------------------------------------- read
    def token(self) -> str:
        return self.token_file.read_text().strip()

    def jobs(self):
        """The launcher's job client for this cluster."""
        from rlhf_launch.cluster.connection import Cluster

        return Cluster.at(self.address, str(self.token_file)).jobs

    def api(self, path: str, token: str | None = "default") -> tuple[int, object]:
        headers = {}
        value = self.token() if token == "default" else token
        if value:
            headers["Authorization"] = f"Bearer {value}"
        request = urllib.request.Request(self.address + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, None

    def alive_nodes(self) -> list[dict]:
        code, data = self.api("/api/v0/nodes?limit=1000")
        if code != 200:
            return []
        return [n for n in data["data"]["result"]["result"] if n["state"] == "ALIVE"]

    def wait_nodes(self, count: int, timeout: float = 120) -> None:
        self._wait(lambda: len(self.alive_nodes()) == count, timeout, f"{count} alive nodes")

    def placement_groups(self) -> list[dict]:
        code, data = self.api("/api/v0/placement_groups?limit=10000&detail=1")
        return data["data"]["result"]["result"] if code == 200 else []

    def used(self, resource: str) -> float | None:
        code, data = self.api("/api/cluster_status?format=0")
        if code != 200:
            return None
        usage = data["data"]["clusterStatus"]["loadMetricsReport"]["usageByNode"] or {}
        return sum(u.get(resource, [0, 0])[0] for u in usage.values())

    def gpus_used(self) -> float | None:
        return self.used("GPU")

    def wait_free(self, gpus: float, timeout: float = 60) -> None:
        """`gpus` GPUs free, and no CPU held by a task of an earlier test (a bundle needs both)."""

        def free() -> bool:
            used, cpus = self.gpus_used(), self.used("CPU")
            return used is not None and cpus is not None and self.gpus * (1 + self.workers) - used >= gpus and cpus < 0.5

        self._wait(free, timeout, f"{gpus} free GPUs")

    def wait_used(self, gpus: float, timeout: float = 60) -> None:
        self._wait(lambda: (self.gpus_used() or 0) >= gpus, timeout, f"{gpus} GPUs in use")

    # ------------------------------------------------------------- faults
    def raylet_pid(self, worker: int) -> int:
        proc = self.worker_procs[worker]
        for pid in descendants(proc.pid):
            if _comm(pid) == "raylet":
                return pid
        raise LookupError(f"no raylet under worker {worker}")

    def dashboard_pid(self) -> int:
        """The head's dashboard process (it serves the job and state APIs)."""
        head = self.procs[0]
        for pid in descendants(head.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "dashboard/dashboard.py" in cmd:
                return pid
        raise LookupError("no dashboard process under the head")

    # ------------------------------------------------------------- stop
    def stop(self) -> None:
        pids: set[int] = set()
        for proc in self.procs:
            pids.add(proc.pid)
            pids.update(descendants(proc.pid))
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.orphans():  # what outlived its parent (a driver whose actor died) is no descendant
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def orphans(self) -> list[int]:
        """Processes of this cluster however they were started: those that name its temp dir or
        talk to its GCS (Ray gives every driver and worker RAY_ADDRESS or --temp-dir)."""
        marks = (str(self.temp_dir).encode(), f"{self.head_ip}:{self.gcs_port}".encode())
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                seen = (entry / "cmdline").read_bytes() + b"\0" + (entry / "environ").read_bytes()
            except OSError:
                continue
            if any(mark in seen for mark in marks):
                found.append(int(entry.name))
        return found


def processes_of_run(run_id: str) -> list[dict]:
    """Processes on this machine (every test node is here) that carry the run's marker."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and f"RLHF_LAUNCH_RUN={run_id}".encode() in environ:
            job = next((e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"RLHF_LAUNCH_JOB=")), "")
            out.append({"pid": int(entry.name), "cmd": cmd, "job": job})
    return out


def trainers_of_run(run_id: str) -> list[dict]:
    """The stand-in trainer processes (job drivers) of a run."""
    out = []
    for proc in processes_of_run(run_id):
        words = proc["cmd"].split()
        if words and "python" in Path(words[0]).name and "openrlhf.cli.train_ppo_ray" in words:
            out.append(proc)
    return out
