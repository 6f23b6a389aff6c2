"""`rlhf-launch slurm`: the generated sbatch script (bringup/slurm.py), read as text, checked
by bash and shellcheck, and run by bash against stub Slurm commands and a stub launcher that
record what the script asks of them (tests/bringup/test_slurm_cluster.py runs it on a real Slurm)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlhf_launch.bringup.slurm import SlurmOptions, render
from rlhf_launch.core.launch import from_config
from rlhf_launch.errors import UserError

from conftest import run_cli


def launch(*overrides: str):
    return from_config("tiny-1node", ["cluster.nodes=3", *overrides], None)


def script(**options) -> str:
    return render(launch(), SlurmOptions(config="tiny-1node", **options))


def sbatch_lines(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]


def test_bash_and_shellcheck_accept_the_script(tmp_path):
    for text in (script(), script(container_image="nvcr.io#nvidia/pytorch:25.01-py3", container_mounts="/data:/data", requeue=True)):
        path = tmp_path / "run.sbatch"
        path.write_text(text)
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
        checked = subprocess.run([shutil.which("shellcheck") or "shellcheck", "-S", "warning", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout


def test_exclusive_asks_for_the_memory_and_says_what_the_plan_needs():
    big = from_config("llama70b-4node", [], None)
    text = render(big, SlurmOptions("llama70b-4node"))
    lines = sbatch_lines(text)
    assert "--exclusive" in lines and "--mem=0" in lines  # --exclusive alone gets only the memory asked for
    need = max(big.memory.host_per_node.values())
    comment = "\n".join(line for line in text.splitlines() if line.startswith("# "))
    assert f"~{need:.0f} GiB (deepspeed.adam_offload)" in comment and "--mem=0" in comment
    planned = render(big, SlurmOptions("llama70b-4node", mem="plan"))
    (mem,) = [line for line in sbatch_lines(planned) if line.startswith("--mem")]
    assert int(mem.removeprefix("--mem=").removesuffix("G")) >= need * 1.1
    assert "--object-store-memory=" in planned  # Ray's default object store (30%) would eat into the plan's figure
    assert "--mem=1500G" in sbatch_lines(render(big, SlurmOptions("x", mem="1500G")))
    with pytest.raises(UserError, match="--mem"):
        render(big, SlurmOptions("x", mem="lots"))


def test_no_umask_for_the_whole_job():
    assert not re.search(r"^\s*umask\b", script(), re.M)


def test_sbatch_lines_follow_the_config_and_options():
    lines = sbatch_lines(script(partition="gpu", account="proj", time="2-00:00:00", requeue=True, signal_lead=200))
    assert "--nodes=3" in lines and "--ntasks-per-node=1" in lines and "--exclusive" in lines
    assert "--gpus-per-node=8" in lines
    assert "--signal=B:TERM@200" in lines  # the batch shell alone, early enough to stop the run
    assert {"--partition=gpu", "--account=proj", "--time=2-00:00:00", "--requeue"} <= set(lines)
    four = sbatch_lines(render(from_config("tiny-1node", ["cluster.nodes=4", "cluster.gpus_per_node=4"], None), SlurmOptions("x")))
    assert "--nodes=4" in four and "--gpus-per-node=4" in four and not any(line.startswith("--partition") for line in four)
    assert not any(line.startswith("--gpus") for line in sbatch_lines(script(gpu_request=False)))


def test_no_fixed_sleeps():
    for text in (script(), script(loopback_ports=20000)):
        assert not re.search(r"\bsleep\b", text)


def test_options_slurm_would_refuse_are_user_errors():
    with pytest.raises(UserError, match="--time"):
        script(time="two days")
    with pytest.raises(UserError, match="--signal-lead"):
        script(signal_lead=60, stop_timeout=90)
    with pytest.raises(UserError, match="--container-image"):
        script(container_mounts="/a:/a")


# ---------------------------------------------------------------- the script, run by bash

STUB_SLURM = {
    "scontrol": 'if [ "$1 $2" = "show hostnames" ]; then printf "n1\\nn2\\nn3\\n"; fi',
    "squeue": 'echo "squeue $*" >>"$STUB_LOG"; printf "%s.0 rlhf-ray-head\\n%s.1 rlhf-ray-join\\n" "$SLURM_JOB_ID" "$SLURM_JOB_ID"',
    "scancel": 'echo "scancel $*" >>"$STUB_LOG"',
    # srun: record the call; run the step's command once per node it names, as that node
    "srun": """echo "srun $*" >>"$STUB_LOG"
nodes=n1
for a in "$@"; do case "$a" in --exclude=*) nodes="n2 n3";; esac; done
while [ $# -gt 0 ]; do case "$1" in -w) shift 2 ;; -*) shift ;; *) break ;; esac; done
pids=()
for n in $nodes; do SLURMD_NODENAME=$n "$@" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc""",
}

# The launcher: records each call with the state dir it was given; `watch` ends with
# $STUB_WATCH_RC, or waits for a signal when that is "wait"; `status --wait-nodes 3` fails
# when $STUB_NODES_MISSING is set; `submit` records a run as the real one does and writes a
# checkpoint file as the trainer would (with the umask it inherits); `up` makes the token 0600
# as the real one does whatever the umask; `runs RUN --print-status` answers $STUB_STATUS;
# `stop` (through Ray) ends with $STUB_STOP_RC.
STUB_LAUNCHER = """#!/usr/bin/env bash
echo "launcher $* home=$RLHF_LAUNCH_HOME" >>"$STUB_LOG"
case "$1" in
  up|join) [ "$1" = up ] && for a in "$@"; do [ "$prev" = --token-file ] && (umask 077; echo secret >"$a"); prev=$a; done
     # a --block node: runs until its SIGTERM, then stops its Ray and exits 0
     trap 'echo "node $SLURMD_NODENAME stopped" >>"$STUB_LOG"; exit 0' TERM; while :; do sleep 0.1; done ;;
  status) # a node counts once its step started (wrote its pid), as a real one is alive only then
          want=0; for a in "$@"; do [ "$prev" = --wait-nodes ] && want=$a; prev=$a; done
          for _ in $(seq 200); do [ "$(ls "$STUB_DIR"/shared/slurm-*/nodes/*.pid 2>/dev/null | wc -l)" -ge "$want" ] && break; sleep 0.1; done
          if [ -n "${STUB_NODES_MISSING:-}" ] && [[ " $* " == *" --wait-nodes 3 "* ]]; then exit 1; fi
          [[ " $* " == *" --json "* ]] && echo '{"nodes": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}' ;;
  submit) mkdir -p "$RLHF_LAUNCH_HOME/runs"; echo '{"status": "RUNNING"}' >"$RLHF_LAUNCH_HOME/runs/tiny-1node-20260101-000000-abcdef.json"
          mkdir -p "$STUB_DIR/ckpt/_actor" && echo weights >"$STUB_DIR/ckpt/_actor/model.pt" ;;
  runs) echo "${STUB_STATUS:-RUNNING}" ;;
  stop) [[ " $* " == *" --cluster-ended "* ]] || exit "${STUB_STOP_RC:-0}" ;;
  watch) if [ "$STUB_WATCH_RC" = wait ]; then echo watching >"$STUB_DIR/watching"; trap 'exit 143' TERM; while :; do sleep 0.2; done; fi
         exit "$STUB_WATCH_RC" ;;
esac
exit 0
"""


class Harness:
    def __init__(self, root: Path, **options):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(exist_ok=True)
        self.log = root / "calls.log"
        self.shared = root / "shared"
        for name, body in STUB_SLURM.items():
            self._stub(self.bin / name, "#!/usr/bin/env bash\n" + body + "\n")
        self._stub(root / "launcher", STUB_LAUNCHER)
        opts = SlurmOptions(config="tiny-1node", launcher=(str(root / "launcher"),), shared_dir=str(self.shared), **options)
        self.script = root / "run.sbatch"
        self.script.write_text(render(launch(), opts))

    @staticmethod
    def _stub(path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o755)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "HOME": str(self.root),
            "SLURM_JOB_ID": "77",
            "SLURM_JOB_NODELIST": "n[1-3]",
            "SLURMD_NODENAME": "n1",
            "STUB_LOG": str(self.log),
            "STUB_DIR": str(self.root),
            "STUB_WATCH_RC": "0",
            **extra,
        }

    def run(self, **extra: str) -> subprocess.CompletedProcess:
        self.log.write_text("")
        shutil.rmtree(self.shared / "slurm-77-0", ignore_errors=True)  # each allocation its own (Slurm's job id differs)
        command = ["bash", "-c", 'umask 022 && exec bash "$0"', str(self.script)]  # a site's usual umask
        return subprocess.run(command, env=self.env(**extra), capture_output=True, text=True, timeout=60)

    def calls(self, prefix: str = "launcher ") -> list[str]:
        return [line.removeprefix(prefix) for line in self.log.read_text().splitlines() if line.startswith(prefix)]

    def verbs(self) -> list[str]:
        return [call.split()[0] for call in self.calls()]


def foreground(h: Harness) -> list[str]:
    """The launcher commands the batch shell runs itself (the nodes' up/join run in their steps)."""
    return [v for v in h.verbs() if v not in ("up", "join")]


def test_first_allocation_brings_up_the_nodes_waits_checks_submits_and_watches(tmp_path):
    h = Harness(tmp_path)
    done = h.run()
    assert done.returncode == 0, done.stderr
    assert foreground(h) == ["status", "status", "doctor", "submit", "watch"]
    calls = h.calls()
    up = [c for c in calls if c.startswith("up ")]
    joins = [c for c in calls if c.startswith("join ")]
    token = str(h.shared / "auth_token")
    assert len(up) == 1 and f"--token-file {token}" in up[0] and "--block" in up[0] and "--num-gpus 8" in up[0]
    head_ip = up[0].split("--node-ip-address ")[1].split()[0]
    assert len(joins) == 2 and all(j.startswith(f"join {head_ip} ") and f"--token-file {token}" in j for j in joins)
    waits = [c for c in calls if c.startswith("status ")]
    assert "--wait-nodes 1 " in waits[0] and "--wait-nodes 3 --wait-gpus 24 --timeout 600" in waits[1]
    doctor = next(c for c in calls if c.startswith("doctor "))
    assert calls.index(waits[1]) < calls.index(doctor)  # every node alive before the checks
    assert all(f"home={h.shared / 'home'}" in call for call in calls)  # records on the shared storage
    assert (h.shared / "run_id").read_text().strip() == "tiny-1node-20260101-000000-abcdef"
    assert stat.S_IMODE(h.shared.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(token).stat().st_mode) == 0o600  # the token alone is private
    # what the trainer writes keeps the site's umask: a team reads its checkpoints
    assert stat.S_IMODE((tmp_path / "ckpt" / "_actor" / "model.pt").stat().st_mode) & 0o040
    sruns = h.calls("srun ")
    assert any("--job-name=rlhf-ray-head" in s and "-w n1" in s for s in sruns)
    assert any("--job-name=rlhf-ray-join" in s and "--exclude=n1" in s and "--nodes=2" in s for s in sruns)
    assert not any("container" in s for s in sruns)
    # the Ray nodes stopped at the end, workers first, by a step that signals each node's launcher
    # (which stops its Ray and exits 0), not by cancelling their steps
    stops = [s for s in sruns if "--job-name=rlhf-ray-stop" in s]
    assert len(stops) == 2 and "--exclude=n1" in stops[0] and "-w n1" in stops[1], sruns
    assert "scancel" not in h.log.read_text()
    for host in ("n1", "n2", "n3"):
        assert (h.shared / "slurm-77-0" / "nodes" / f"{host}.pid").read_text().strip().isdigit()
    assert all("--quiet" in c for c in up + joins)  # no "copy the token to each worker" inside an allocation


def test_the_run_ends_the_allocation_with_its_outcome(tmp_path):
    h = Harness(tmp_path)
    assert h.run(STUB_WATCH_RC="1").returncode == 1


def test_second_allocation_resumes_the_same_run(tmp_path):
    h = Harness(tmp_path)
    assert h.run().returncode == 0
    done = h.run()
    assert done.returncode == 0, done.stderr
    assert foreground(h) == ["status", "status", "doctor", "runs", "resume", "watch"]  # runs: the launcher says the run is not done
    calls = [c for c in h.calls() if c.split()[0] in ("resume", "watch")]
    assert calls[0].startswith("resume tiny-1node-20260101-000000-abcdef --address http://127.0.0.1:8265 ")
    assert calls[1].startswith("watch tiny-1node-20260101-000000-abcdef ")


def test_a_succeeded_run_is_not_resumed_as_the_launcher_says(tmp_path):
    h = Harness(tmp_path)
    assert h.run().returncode == 0
    record = next((h.shared / "home" / "runs").glob("*.json"))
    record.write_text('{"attempts": [], "status": "RUNNING"}')  # the record's text is the launcher's business
    done = h.run(STUB_STATUS="SUCCEEDED")
    assert done.returncode == 0 and "already SUCCEEDED" in done.stderr
    assert "resume" not in h.verbs() and "watch" not in h.verbs()
    asked = [c for c in h.calls() if c.startswith("runs ")]
    assert asked and asked[0].startswith("runs tiny-1node-20260101-000000-abcdef --address http://127.0.0.1:8265 ")
    assert "--print-status" in asked[0]
    assert "runs/" not in h.script.read_text().split("compgen")[0]  # no record file read before the first submit check
    done = h.run(STUB_STATUS="STOPPED")  # an interrupted run is resumed
    assert "resume" in h.verbs()


def test_missing_nodes_are_named_and_nothing_is_submitted(tmp_path):
    h = Harness(tmp_path)
    done = h.run(STUB_NODES_MISSING="1")
    assert done.returncode == 1
    assert "submit" not in h.verbs() and "doctor" not in h.verbs()
    alive = {"10.0.0.1", "10.0.0.2"}
    named = [line for line in done.stderr.splitlines() if line.startswith("  n")]
    assert named, done.stderr
    for line in named:  # every node whose address the cluster does not list, by its Slurm name
        host = line.split(":")[0].strip()
        ip = (h.shared / "slurm-77-0" / "nodes" / host).read_text().strip()
        assert ip not in alive and host in ("n1", "n2", "n3")


def test_sigterm_stops_the_run_records_it_and_stops_the_nodes(tmp_path):
    h = Harness(tmp_path)
    h.log.write_text("")
    proc = subprocess.Popen(
        ["bash", str(h.script)], env=h.env(STUB_WATCH_RC="wait"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "watching").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # what Slurm sends the batch shell (--signal=B:TERM, scancel)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    stop = [c for c in h.calls() if c.startswith("stop ")]
    assert stop and stop[0].startswith("stop tiny-1node-20260101-000000-abcdef --address http://127.0.0.1:8265 ")
    assert "--timeout 90" in stop[0]
    assert "interrupted" in (h.shared / "interrupted.log").read_text()
    log = h.log.read_text()
    assert log.index("launcher stop") < log.index("srun --overlap --ntasks-per-node=1 --kill-on-bad-exit=0 --job-name=rlhf-ray-stop")
    assert not any("--cluster-ended" in c for c in h.calls())  # Ray answered: stopped through it


def test_scancel_with_ray_gone_records_every_attempt_ended(tmp_path):
    """scancel signals every step with the batch shell: the stop through Ray fails, and the
    script has the launcher record the run ended with its allocation."""
    h = Harness(tmp_path)
    h.log.write_text("")
    env = h.env(STUB_WATCH_RC="wait", STUB_STOP_RC="2", STUB_STATUS="STOPPED")
    proc = subprocess.Popen(["bash", str(h.script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "watching").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    ended = [c for c in h.calls() if c.startswith("stop ") and "--cluster-ended" in c]
    assert ended and ended[0].startswith("stop tiny-1node-20260101-000000-abcdef --cluster-ended slurm job 77 ")
    assert "interrupted: STOPPED in its record" in err


def test_container_flags_go_on_every_step(tmp_path):
    h = Harness(tmp_path, container_image="nvcr.io#nvidia/pytorch:25.01-py3", container_mounts="/data:/data")
    assert h.run().returncode == 0
    sruns = h.calls("srun ")
    assert sruns and all("--container-image=nvcr.io#nvidia/pytorch:25.01-py3" in s for s in sruns)
    assert all(f"--container-mounts=/data:/data,{h.shared}:{h.shared}" in s for s in sruns)
    assert all("--container-name=rlhf-launch-77 " in s for s in sruns)
    assert len(sruns) == 4 + len(foreground(h))  # two node steps, two stop steps, and every launcher command in the image too


# ---------------------------------------------------------------- the verb


def test_cli_prints_or_writes_the_script(tmp_path):
    done = run_cli("slurm", "tiny-1node", "cluster.nodes=2")
    assert done.returncode == 0 and "#SBATCH --nodes=2" in done.stdout
    out = tmp_path / "run.sbatch"
    done = run_cli("slurm", "tiny-1node", "cluster.nodes=2", "-o", str(out), "-p", "gpu")
    assert done.returncode == 0 and "#SBATCH --partition=gpu" in out.read_text()
    assert os.access(out, os.X_OK)


def test_cli_warns_of_a_relative_checkpoint_path(tmp_path):
    done = run_cli("slurm", "tiny-1node", "checkpoint.ckpt_path=ckpt/run")  # relative: each node resolves it alone
    assert done.returncode == 0 and "warning: checkpoint.ckpt_path 'ckpt/run' is relative" in done.stderr
    done = run_cli("slurm", "tiny-1node", f"checkpoint.ckpt_path={tmp_path}/ckpt")
    assert done.returncode == 0 and "relative" not in done.stderr


def test_cli_submit_without_sbatch_is_one_user_error(tmp_path):
    env = {"PATH": str(Path(sys.executable).parent)}
    done = run_cli("slurm", "tiny-1node", "--submit", "-o", str(tmp_path / "x.sbatch"), env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[0] == "error: --submit needs sbatch, and there is none on PATH"
    assert "Traceback" not in done.stderr


def test_cli_submit_runs_sbatch_and_prints_the_job_id(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/usr/bin/env bash\necho "$@" >{tmp_path}/sbatch.args\necho "4242;cluster"\n')
    (bin_dir / "sbatch").chmod(0o755)
    out = tmp_path / "run.sbatch"
    done = run_cli("slurm", "tiny-1node", "--submit", "-o", str(out), env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4242"
    assert (tmp_path / "sbatch.args").read_text().split() == ["--parsable", str(out)]


def test_cli_config_errors_exit_2(tmp_path):
    done = run_cli("slurm", "tiny-1node", "train.train_batch_size=7")
    assert done.returncode == 2


def test_status_wait_nodes_is_bounded_and_says_why():
    from support.ray_cluster import free_port

    started = time.monotonic()
    done = run_cli("status", "--address", f"http://127.0.0.1:{free_port()}", "--wait-nodes", "2", "--timeout", "2", timeout=60)
    assert done.returncode == 1
    assert "no Ray cluster answered in 2s" in done.stderr and "cannot reach" in done.stderr
    assert time.monotonic() - started < 30


def test_a_blocking_node_ends_on_sigterm():
    """`up --block` / `join --block` under SIGTERM (what the script's node steps get) pass it on
    to Ray and end, instead of waiting inside the signal handler for ever."""
    code = (
        "import subprocess, sys\n"
        "from rlhf_launch.cluster import node\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], text=True)\n"
        "print('ready', flush=True)\n"
        "print(node.wait_blocking(child, grace=20), child.returncode, flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def catches_term() -> bool:  # wait_blocking's handler is in place (SigCgt has SIGTERM)
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
        return False

    deadline = time.monotonic() + 20
    while not catches_term() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    # the child (Ray) got the SIGTERM and ended; a node stopped on request reports success (its
    # Slurm step ends with exit 0, not "task 0: Exited with exit code 1")
    assert proc.stdout.read().split() == ["0", str(-signal.SIGTERM)]
    assert time.monotonic() - started < 10
