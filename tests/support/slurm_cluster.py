"""A real Slurm on this machine: Debian's slurm-wlm, one `slurmctld` and one `slurmd` per
node (n1..nN, all on loopback), each with its own spool, pid and log files under a temp dir,
no munge (auth/none, cred/none). Torn down by the pids it started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from support.ports import free_port

DAEMONS = ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "srun")


def missing() -> list[str]:
    return [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]


def _which(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmCluster:
    def __init__(self, workdir: Path, nodes: int = 3, cpus: int = 8, kill_wait: int = 30):
        self.workdir = workdir
        self.nodes = nodes
        self.names = [f"n{i + 1}" for i in range(nodes)]
        self.conf = workdir / "slurm.conf"
        self.procs: list[subprocess.Popen] = []
        ctld_port = free_port()
        ports = [free_port() for _ in self.names]
        for sub in ("ctld", *self.names):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        node_lines = "\n".join(
            f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname={name} Port={port} CPUs={cpus} State=UNKNOWN"
            for name, port in zip(self.names, ports, strict=True)
        )
        self.conf.write_text(
            f"""ClusterName=rltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
StateSaveLocation={workdir / "ctld"}
SlurmctldPidFile={workdir / "ctld" / "slurmctld.pid"}
SlurmctldLogFile={workdir / "ctld" / "slurmctld.log"}
SlurmdSpoolDir={workdir}/%n
SlurmdPidFile={workdir}/%n/slurmd.pid
SlurmdLogFile={workdir}/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
KillWait={kill_wait}
MinJobAge=300
InactiveLimit=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
{node_lines}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""
        )
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen:
        out = open(self.workdir / log, "w")
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 60) -> SlurmCluster:
        self._spawn([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
        self._wait(lambda: self.run("scontrol", "ping").returncode == 0, timeout, "slurmctld")
        for name in self.names:
            self._spawn([_which("slurmd"), "-D", "-N", name, "-f", str(self.conf)], f"slurmd-{name}.out")
        self._wait(self._nodes_idle, timeout, "slurmd nodes idle")
        return self

    def _nodes_idle(self) -> bool:
        done = self.run("sinfo", "-h", "-N", "-o", "%N %T")
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        return len(states) == self.nodes and all(s.startswith("idle") for s in states.values())

    def _wait(self, check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}: {self.logs()}")
            time.sleep(0.5)
        raise TimeoutError(f"{what} not ready in {timeout}s: {self.logs()}")

    def run(self, *args: str, timeout: float = 30, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        full = {**(env or self.env), "SLURM_CONF": str(self.conf)}
        return subprocess.run([_which(args[0]), *args[1:]], env=full, capture_output=True, text=True, timeout=timeout)

    def logs(self) -> str:
        parts = []
        for path in sorted(self.workdir.glob("*.out")) + sorted(self.workdir.glob("*/*.log")):
            parts.append(f"--- {path.relative_to(self.workdir)}\n{path.read_text(errors='replace')[-2500:]}")
        return "\n".join(parts)

    def job_state(self, job_id: str) -> str:
        done = self.run("scontrol", "show", "job", job_id)
        for word in done.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def wait_job_end(self, job_id: str, timeout: float = 300) -> str:
        ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
        self._wait(lambda: self.job_state(job_id) in ended, timeout, f"job {job_id} to end")
        return self.job_state(job_id)

    def stop(self) -> None:
        from support.ray_cluster import descendants

        pids: set[int] = set()
        for proc in self.procs:
            pids.add(proc.pid)
            pids.update(descendants(proc.pid))
        for proc in reversed(self.procs):  # slurmds first: they end their job steps
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
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
