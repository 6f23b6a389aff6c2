#!/usr/bin/env python3
"""Speed of the launcher itself, side by side with Ray's own CLI, measured in one run.

Every figure is a median over interleaved repetitions (A, B, A, B, ...), compared with a
reference measured in the same run. Output: one line per figure, `name value unit`.

    python bench/run.py                    # everything (starts a local 4-node Ray cluster)
    python bench/run.py --only cli,preflight --reps 7
    python bench/run.py --only submit,auto_resume --reps 5
    python bench/run.py --only doctor,doctor_cluster

Figures and targets:
  help_vs_ray_help         rlhf-launch --help / ray --help                     <= 0.35
  plan_vs_ray_help         rlhf-launch plan llama70b-8node --json / ray --help <= 0.25
  plan_vs_python           the same plan / python -c pass                      (context)
  submit_vs_ray_submit     rlhf-launch submit (preflight included) /
                           ray job submit --no-wait of the same job            <= 1.0
  preflight_*              preflight on simulated 1, 64, 1024-node snapshots;
                           *_per_node_growth is time per node relative to the
                           smaller size (1.0 = linear)                         <= ~1.5
  auto_resume_latency      trainer job FAILED -> resubmitted attempt RUNNING,
                           by the cluster-side supervisor                     (context)
  ray_submit_to_running    the same job submitted straight to Ray -> RUNNING,
                           interleaved (Ray's start-up: the floor of any resubmission)
  auto_resume_beyond_ray_start  auto_resume_latency - ray_submit_to_running  <= poll + 2 s
  stop_to_gpus_free        `rlhf-launch stop` of a running run -> its GPUs free
                           (median and max of 10)                             < 10 s
  runs_1000_records_s      `rlhf-launch runs --json` with 1,000 records (as submit
                           writes them, no cluster answering)                 <= 0.25 s
  runs_per_record_ms       its time per record beyond 10 records, and
                           runs_1000_vs_100_per_record: that time at 1,000
                           records against 100 (1.0 = flat per record)        <= ~1.5
  diagnose_1gb_s           diagnose on a 1 GB synthetic driver log, failure at
                           the end / *_deep_s: its root cause ~100 MB before   <= 1 s
  doctor_node_look_ms      one node's look (the probe's `facts`, on this machine) (context:
                           every node looks at once, in its own agent)
  doctor_{4,16,64}_nodes_ms  the launcher's part of doctor (spec, judging every check on
                           every node, the report) on 4/16/64 simulated nodes, each
                           answering this machine's facts; *_per_node_growth: time per
                           node against 4 nodes (1.0 = flat per node)           <= ~1.5
  doctor_4_node_cluster_s  `rlhf-launch doctor` on the local 4-node cluster, agents warm,
                           end to end (CLI start, probe job, every node)         <= 5 s
  replan_*                 a node holding only vLLM engines is SIGKILLed and stays gone:
                           death -> the re-planned attempt trains, split into Ray noticing,
                           supervise.node_wait, the launcher's part (decision, proof gone,
                           re-plan, node checks, submission) and Ray's start-up (context)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

PYTHON = sys.executable
BIN = Path(PYTHON).parent


def say(name: str, value: float, unit: str) -> None:
    print(f"{name} {value:.4g} {unit}", flush=True)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY" and not k.startswith("RAY_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env.update(extra or {})
    return env


class BenchError(Exception):
    """A step that could not be measured, and why (never an empty message)."""


def _why(argv: list[str], code: int, stdout: str, stderr: str) -> str:
    said = "\n".join(part.strip()[-2000:] for part in (stderr, stdout) if part.strip())
    return f"`{' '.join(Path(a).name if i == 0 else a for i, a in enumerate(argv[:4]))} ...` exited {code}: " + (
        said or "(it printed nothing)"
    )


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise BenchError(_why(argv, done.returncode, done.stdout, done.stderr))
    return elapsed


def run_json(argv: list[str], env: dict[str, str]) -> Any:
    """A `--json` command's answer; BenchError with what it printed when it fails or prints no JSON."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    try:
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        answer = None
    if answer is None:
        raise BenchError(_why(argv, done.returncode, done.stdout, done.stderr))
    return answer


def interleaved(commands: dict[str, list[str]], reps: int, env: dict[str, str]) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # warm the page cache once
        timed(argv, env)
    for _ in range(reps):
        for name, argv in commands.items():
            samples[name].append(timed(argv, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def compiled() -> None:
    """Byte-compile the package first, as `pip install` does: with PYTHONDONTWRITEBYTECODE set
    (or a read-only checkout) every run would otherwise compile the launcher from source."""
    import compileall

    compileall.compile_dir(str(ROOT / "src" / "rlhf_launch"), quiet=1)


def bench_cli(reps: int) -> None:
    env = clean_env()
    launcher = [str(BIN / "rlhf-launch")]
    medians = interleaved(
        {
            "launcher_help": [*launcher, "--help"],
            "ray_help": [str(BIN / "ray"), "--help"],
            "plan": [*launcher, "plan", "configs/llama70b-8node.yaml", "--json"],
            "python_pass": [PYTHON, "-c", "pass"],
        },
        reps,
        env,
    )
    say("launcher_help_s", medians["launcher_help"], "s")
    say("ray_help_s", medians["ray_help"], "s")
    say("plan_s", medians["plan"], "s")
    say("python_pass_s", medians["python_pass"], "s")
    say("help_vs_ray_help", medians["launcher_help"] / medians["ray_help"], "ratio(target<=0.35)")
    say("plan_vs_ray_help", medians["plan"] / medians["ray_help"], "ratio(target<=0.25)")
    say("plan_vs_python", medians["plan"] / medians["python_pass"], "ratio")
    code = "import sys, runpy; sys.argv=['rlhf-launch','plan','configs/llama70b-8node.yaml','--json']\n"
    code += "from rlhf_launch.cli.app import main\nimport contextlib, io\n"
    code += "with contextlib.redirect_stdout(io.StringIO()): main(sys.argv[1:])\nprint('ray' in sys.modules)"
    imported = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env).stdout.strip()
    say("plan_imports_ray", 1.0 if imported == "True" else 0.0, "bool(target=0)")


def _snapshot(nodes: int):
    from rlhf_launch.cluster.snapshot import Node, Snapshot

    return Snapshot(
        address="http://sim",
        ray_version="2.55.0",
        nodes=tuple(Node(f"node{i:05d}", f"10.{i // 250}.{i % 250}.1", i == 0, 8.0, 8.0, 64.0, 64.0) for i in range(nodes)),
    )


def _scaled_plan(nodes: int):
    """A layout that fills the cluster: actor and critic a quarter each, ref and reward an
    eighth, vLLM (TP 4) the last quarter."""
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.plan import build_plan

    quarter, eighth = max(1, nodes // 4), max(1, nodes // 8)
    cfg = load_config(
        ROOT / "configs" / "llama70b-8node.yaml",
        [
            f"cluster.nodes={nodes}",
            f"placement.actor.nodes={quarter}",
            f"placement.critic.nodes={quarter}",
            f"placement.ref.nodes={eighth}",
            f"placement.reward.nodes={eighth}",
            f"placement.vllm.engines={max(1, nodes * 2 // 4)}",
        ],
    )
    return build_plan(cfg)


def bench_preflight(reps: int) -> None:
    from rlhf_launch.cluster import preflight
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.plan import build_plan

    fixed = build_plan(load_config(ROOT / "configs" / "llama70b-8node.yaml"))
    sizes = (1, 64, 1024)
    snapshots = {n: _snapshot(n) for n in sizes}
    scaled = {n: _scaled_plan(n) for n in (64, 1024)}

    def per_call(plan, snap) -> float:
        loops = max(3, 2000 // len(snap.nodes))
        samples = []
        for _ in range(max(5, reps)):
            start = time.perf_counter()
            for _ in range(loops):
                preflight.check(plan, snap, "2.55.0", "2.55.0")
            samples.append((time.perf_counter() - start) / loops)
        return statistics.median(samples)

    fixed_times = {n: per_call(fixed, snapshots[n]) for n in sizes}
    for n in sizes:
        say(f"preflight_{n}_nodes_us", fixed_times[n] * 1e6, "us")
    say("preflight_64_vs_1_per_node_growth", (fixed_times[64] / 64) / fixed_times[1], "ratio(1=linear)")
    say("preflight_1024_vs_64_per_node_growth", (fixed_times[1024] / 1024) / (fixed_times[64] / 64), "ratio(1=linear)")
    scaled_times = {n: per_call(scaled[n], snapshots[n]) for n in (64, 1024)}
    say("preflight_full_64_nodes_us", scaled_times[64] * 1e6, "us")
    say("preflight_full_1024_nodes_us", scaled_times[1024] * 1e6, "us")
    say("preflight_full_1024_vs_64_per_node_growth", (scaled_times[1024] / 1024) / (scaled_times[64] / 64), "ratio(1=linear)")


def _standin(ckpt: Path, **env: str) -> list[str]:
    """The stand-in trainer's run of the tiny-1node preset, with a model and data it fits: the
    2-layer models and 8 prompts of tests/standin (the bench's nodes share one small machine,
    where the node checks rightly refuse an 8B model's Adam offload in host memory)."""
    standin = ROOT / "tests" / "standin"
    out = [
        f"checkpoint.ckpt_path={ckpt}",
        f"checkpoint.save_path={ckpt}-final",
        "checkpoint.save_steps=1",
        f"models.actor={standin / 'models' / 'tiny-actor'}",
        f"models.reward={standin / 'models' / 'tiny-rm'}",
        f"data.prompt_dataset={standin / 'data' / 'prompts.jsonl'}",
        f"runtime_env.env_vars.PYTHONPATH={standin}",
        "runtime_env.env_vars.STANDIN_OPENRLHF_VERSION='0.11.2'",
    ]
    return out + [f"runtime_env.env_vars.{k}='{v}'" for k, v in env.items()]


class _Cluster:
    def __init__(self, workdir: Path):
        try:  # the test helpers' home after the tests' reorganisation, or before it
            from support.ray_cluster import LocalCluster
        except ImportError:
            from ray_cluster import LocalCluster

        workdir.mkdir(parents=True, exist_ok=True)
        self.local = LocalCluster(workdir, workers=3)

    def __enter__(self):
        self.local.start()
        self.jobs = self.local.jobs()
        return self

    def __exit__(self, *exc):
        self.local.stop()

    def env(self, home: Path) -> dict[str, str]:
        return clean_env(
            {"RAY_AUTH_TOKEN_PATH": str(self.local.token_file), "RAY_API_SERVER_ADDRESS": self.local.address, "RLHF_LAUNCH_HOME": str(home)}
        )

    def settle(self) -> None:
        """Nothing of an earlier sample left: every job stopped and proven gone (processes
        included: a stop while Ray sets up a runtime env may otherwise leave a trainer)."""
        from rlhf_launch.cluster import sweep
        from rlhf_launch.cluster.connection import Cluster
        from rlhf_launch.runs import gone

        live = [j for j in self.jobs.list() if not j.status.is_terminal()]
        for job in live:
            self.jobs.stop(job.job_id)
        if live:
            cluster = Cluster.at(self.local.address, str(self.local.token_file))
            ids = [j.job_id for j in live]
            runs = sorted({j.runtime_env.get("env_vars", {}).get("RLHF_LAUNCH_RUN", "") for j in live} - {""})
            left = gone.wait_gone(self.jobs, cluster.dashboard, ids, lambda r, j: sweep.by_probe_job(self.jobs, r, j), 90, runs=runs)
            if left:
                raise BenchError("bench: could not clear the cluster: " + "; ".join(x for lo in left for x in lo.describe()))
        self.local.wait_free(32, timeout=90)


def bench_submit(cluster: _Cluster, reps: int, work: Path) -> None:
    env = cluster.env(work / "state")
    plan = run_json([str(BIN / "rlhf-launch"), "plan", "tiny-1node", *_standin(work / "ckpt-submit-ray"), "--json"], env)
    made = iter(range(1_000_000))

    def ours() -> list[str]:
        """A fresh ckpt_path each time: the stand-in saves a checkpoint a second, and submit
        rightly refuses a fresh run over a path that holds one (the checkpoint guard)."""
        overrides = _standin(work / f"ckpt-submit-{next(made)}", STANDIN_STEPS="1000", STANDIN_STEP_SECONDS="1")
        return [str(BIN / "rlhf-launch"), "submit", "tiny-1node", *overrides]

    ray_env = {**env, "RAY_AUTH_MODE": "token"}
    theirs = [
        str(BIN / "ray"),
        "job",
        "submit",
        "--address",
        cluster.local.address,
        "--no-wait",
        "--runtime-env-json",
        json.dumps({**plan["runtime_env"], "env_vars": {**plan["runtime_env"].get("env_vars", {}), "RLHF_LAUNCH_RUN": "bench-ray"}}),
        "--",
        plan["entrypoint"],
    ]
    samples = {"ours": [], "ray": []}
    cluster.settle()
    for argv, e in ((ours(), env), (theirs, ray_env)):  # warm-up
        timed(argv, e)
        cluster.settle()
    for _ in range(reps):
        for name, argv, e in (("ours", ours(), env), ("ray", theirs, ray_env)):
            samples[name].append(timed(argv, e))
            cluster.settle()
    ours_s, ray_s = statistics.median(samples["ours"]), statistics.median(samples["ray"])
    say("submit_s", ours_s, "s")
    say("ray_job_submit_s", ray_s, "s")
    say("submit_vs_ray_submit", ours_s / ray_s, "ratio(target<=1.0)")


def _running_at(cluster: _Cluster, job_id: str, timeout: float = 180) -> float | None:
    """When the job was first seen RUNNING (or already ended), polling every 50 ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cluster.jobs.info(job_id).status in ("RUNNING", "SUCCEEDED", "FAILED"):
                return time.time()
        except Exception:
            pass
        time.sleep(0.05)
    return None


def _ray_start(cluster: _Cluster, work: Path, rep: int) -> float:
    """Ray's own part: the same stand-in job submitted straight to Ray -> RUNNING."""
    env = cluster.env(work / "state-floor")
    overrides = _standin(work / f"ckpt-floor{rep}", STANDIN_STEPS="1000")
    plan = run_json([str(BIN / "rlhf-launch"), "plan", "tiny-1node", *overrides, "--json"], env)
    job_id = f"bench-floor-{rep}-{os.getpid()}"
    runtime_env = {**plan["runtime_env"], "env_vars": {**plan["runtime_env"].get("env_vars", {}), "RLHF_LAUNCH_JOB": job_id}}
    submitted = time.time()
    cluster.jobs.submit(plan["entrypoint"], runtime_env, job_id, {})
    running = _running_at(cluster, job_id)
    if running is None:
        raise BenchError(f"bench: {job_id} did not start within 180s")
    return running - submitted


def bench_auto_resume(cluster: _Cluster, reps: int, work: Path, poll: float = 1.0) -> None:
    """The crash comes ~10 s into the run, as in any real run long after its supervisor
    started; interleaved with the same job submitted straight to Ray (Ray's start-up, the
    floor of any resubmission)."""
    latencies, floors = [], []
    for rep in range(reps):
        cluster.settle()
        floors.append(_ray_start(cluster, work, rep))
        cluster.settle()
        env = cluster.env(work / f"state-ar{rep}")
        ckpt = work / f"ckpt-ar{rep}"
        argv = [
            str(BIN / "rlhf-launch"),
            "submit",
            "tiny-1node",
            *_standin(ckpt, STANDIN_STEPS="40", STANDIN_STEP_SECONDS="0.5", STANDIN_CRASH_AT_STEP="20", STANDIN_CRASH_TIMES="1"),
            "--auto-resume",
            "1",
            "--backoff",
            "0",
            "--poll",
            str(poll),
            "--json",
        ]
        out = run_json(argv, env)
        first, second = out["job_id"], f"{out['run_id']}-2"
        running_at = _running_at(cluster, second)
        failed = cluster.jobs.info(first)
        if running_at is None or failed.end_time is None:
            raise BenchError(f"auto-resume did not resubmit within 180s (attempt 1: {failed.status})")
        latencies.append(running_at - failed.end_time)
    say("auto_resume_latency_s", statistics.median(latencies), "s(context)")  # Ray's own start-up included
    say("auto_resume_latency_max_s", max(latencies), "s")
    say("auto_resume_poll_s", poll, "s")
    say("ray_submit_to_running_s", statistics.median(floors), "s(context)")
    say("auto_resume_beyond_ray_start_s", statistics.median(latencies) - statistics.median(floors), f"s(target<={poll + 2:g})")


def bench_stop(cluster: _Cluster, reps: int, work: Path) -> None:
    """`rlhf-launch stop` of a running run until its GPUs are free again, as Ray reports."""
    seconds = []
    for rep in range(reps):
        cluster.settle()
        env = cluster.env(work / "state-stop")
        argv = [str(BIN / "rlhf-launch"), "submit", "tiny-1node", *_standin(work / f"ckpt-stop{rep}", STANDIN_STEPS="1000"), "--json"]
        run_id = run_json(argv, env)["run_id"]
        cluster.local.wait_used(8, timeout=120)
        start = time.monotonic()
        done = subprocess.run([str(BIN / "rlhf-launch"), "stop", run_id, "--json"], capture_output=True, text=True, env=env, cwd=ROOT)
        if done.returncode != 0:
            raise BenchError(_why(done.args, done.returncode, done.stdout, done.stderr))
        cluster.local.wait_free(32, timeout=120)
        seconds.append(time.monotonic() - start)
    say("stop_to_gpus_free_s", statistics.median(seconds), "s(target<10)")
    say("stop_to_gpus_free_max_s", max(seconds), "s(target<10)")


def _records(home: Path, count: int) -> None:
    """`count` finished runs' records as `submit` writes them (the llama70b-8node config, two
    attempts, a diagnosis, progress), written long enough ago for the listing index."""
    from rlhf_launch.core.launch import from_config
    from rlhf_launch.runs import lifecycle, record
    from rlhf_launch.runs.record import Attempt
    from rlhf_launch.runs.status import AttemptStatus, RunStatus

    os.environ["RLHF_LAUNCH_HOME"] = str(home)
    try:
        launch = from_config(str(ROOT / "configs" / "llama70b-8node.yaml"), [], None)
        run = lifecycle.new_run(launch, "http://127.0.0.1:9", "configs/llama70b-8node.yaml", [], run_id="bench-proto")
        record.path_of("bench-proto").unlink()
        run.status = RunStatus.SUCCEEDED
        run.progress = {"step": 40, "total_steps": 40, "steps_per_hour": 120.0, "eta_seconds": 0, "reward": 0.5, "kl": 0.01}
        for i in range(count):
            run.run_id, run.created = f"bench-{i:05d}", float(i)
            run.attempts = [
                Attempt(
                    1, f"{run.run_id}-1", "submit", False, 1.0, AttemptStatus.FAILED, 2.0, "", None, {"cls": "nccl", "retriable": True}
                ),
                Attempt(2, f"{run.run_id}-2", "auto-resume", True, 3.0, AttemptStatus.SUCCEEDED, 4.0, "", 20),
            ]
            record.save(run)
        old = time.time() - 60
        for path in record.runs_dir().glob("*.json"):
            os.utime(path, (old, old))
    finally:
        os.environ.pop("RLHF_LAUNCH_HOME")


def bench_runs(reps: int) -> None:
    """`rlhf-launch runs --json` over 10, 100 and 1,000 finished runs' records (no cluster
    answers: the local listing), interleaved; the time per record beyond the first 10."""
    sizes = (10, 100, 1000)
    with tempfile.TemporaryDirectory() as tmp:
        homes = {n: Path(tmp) / f"home{n}" for n in sizes}
        for n, home in homes.items():
            _records(home, n)
        envs = {n: clean_env({"RLHF_LAUNCH_HOME": str(home), "RAY_API_SERVER_ADDRESS": "http://127.0.0.1:9"}) for n, home in homes.items()}
        argv = [str(BIN / "rlhf-launch"), "runs", "--json"]
        cold = timed(argv, envs[1000])  # the first listing: every record parsed, the index written
        samples: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(max(5, reps)):
            for n in sizes:
                samples[n].append(timed(argv, envs[n]))
        listed = run_json(argv, envs[1000])
        if len(listed) != 1000:
            raise BenchError(f"bench: runs listed {len(listed)} of 1000 records")
    t = {n: statistics.median(samples[n]) for n in sizes}
    per_100, per_1000 = (t[100] - t[10]) / 90, (t[1000] - t[10]) / 990
    say("runs_10_records_s", t[10], "s")
    say("runs_100_records_s", t[100], "s")
    say("runs_1000_records_s", t[1000], "s(target<=0.25)")
    say("runs_1000_records_first_s", cold, "s(context: builds the index)")
    say("runs_per_record_ms", per_1000 * 1e3, "ms")
    say("runs_1000_vs_100_per_record", per_1000 / per_100 if per_100 > 0 else 1.0, "ratio(1=flat)")


def bench_fit(reps: int) -> None:
    """`fit`'s search (in process, no cluster) for the 70B preset on 8, 32, 64 and 256 GPUs of
    nodes of 8: the median of a few searches each, and how many layouts it tried."""
    from rlhf_launch.core import presets
    from rlhf_launch.core.config import load_config
    from rlhf_launch.fit import search

    cfg = load_config(presets.config_path("llama70b-4node"), [])

    def score(launch):
        return launch.estimate.step_s if launch.estimate else float("inf")

    for gpus in (8, 32, 64, 256):
        samples, tried = [], 0
        for _ in range(max(1, min(reps, 3))):
            started = time.perf_counter()
            result = search(cfg, gpus // 8, 8, score)
            samples.append(time.perf_counter() - started)
            tried = result.tried
        say(f"fit_{gpus}_gpus_s", statistics.median(samples), f"s(tried {tried} layouts; target: seconds)")


def _synthetic_log(path: Path, size: int, decisive_back: int) -> None:
    """An OpenRLHF 0.11-like driver log of `size` bytes: steps of Ray-prefixed vLLM, tqdm and
    metrics lines; then either a CUDA OOM at the end, or a node death followed by
    `decisive_back` bytes of idle lines before the survivors' NCCL timeout."""
    step_lines = []
    for k in range(240):
        step_lines += [
            f"(RolloutRayActor pid=48211, ip=10.0.0.2) INFO 09-14 10:{k % 60:02d}:11 [loggers.py:123] Engine 000: Avg prompt "
            f"throughput: {k * 1.5:.1f} tokens/s, Avg generation throughput: {k * 12.25:.1f} tokens/s, Running: {k % 64} reqs",
            f"(PPOTrainer pid=4182) Generate samples:  {k % 100:2d}%|####      | {k}/1024 [00:{k % 60:02d}<01:13,  9.1it/s]\r",
            f"(PolicyModelActor pid=5120, ip=10.0.0.3) Train epoch [1/1]:  {k % 100:2d}%|#####     | {k % 64}/64 [00:13<00:01, "
            "1.83s/it, act_loss=0.795, reward=0.17, kl=0.0012, act_lr=1e-06]",
            "(RolloutRayActor pid=48213, ip=10.0.0.4) INFO 09-14 10:02:11 agent.py:120] sample finished [repeated 7x across cluster]",
        ]
    block = ("\n".join(step_lines) + "\n").encode()
    idle = (
        b"(RolloutRayActor pid=48211, ip=10.0.0.2) INFO 09-14 11:02:11 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 "
        b"tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, GPU KV cache usage: 0.0%\n"
        b"(PolicyModelActor pid=5120, ip=10.0.0.3) make_experience:   0%|          | 0/128 [10:02<?, ?it/s]\n"
    ) * 4000
    nccl = (
        b"(PolicyModelActor pid=5120, ip=10.0.0.3) [rank0]:[E1225 12:58:32.712922209 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
        b"collective operation timeout: WorkNCCL(SeqNum=17284, OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 1800031 milliseconds\n"
        b"Job 'raysubmit_bench' failed\n"
    )
    with path.open("wb") as out:
        written, step = 0, 0
        while written < size - decisive_back:
            step += 1
            metrics = (
                f"(PPOTrainer pid=4182) INFO 09-14 10:02:11 ppo_trainer.py:551] \u2728 Global step {step}: {{'kl': 0.01, 'reward': 0.5}}\n"
            )
            out.write(block + metrics.encode())
            written += len(block) + len(metrics)
        if decisive_back:
            out.write(b"2024-04-11 16:38:16,464 WARNING worker.py:2037 -- The node with node id: 8f205b12 and address: 10.0.0.7 has been ")
            out.write(b"marked dead because the detector has missed too many heartbeats from it.\n")
            for _ in range(decisive_back // len(idle) + 1):
                out.write(idle)
        else:
            out.write(b"(PolicyModelActor pid=5120) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
        out.write(nccl)


def bench_diagnose(reps: int) -> None:
    from rlhf_launch.diagnose import diagnose_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "driver.log"
        for name, back, expected in (("diagnose_1gb_s", 0, "gpu_oom"), ("diagnose_1gb_deep_s", 100 << 20, "node_lost")):
            _synthetic_log(path, 1 << 30, back)
            diagnose_file(path)  # warm the page cache
            samples = []
            for _ in range(max(3, reps)):
                start = time.perf_counter()
                found = diagnose_file(path)
                samples.append(time.perf_counter() - start)
                if str(found.cls) != expected:
                    raise BenchError(f"{name}: diagnosed {found.cls}, expected {expected}")
            path.unlink()
            say(name, statistics.median(samples), "s(target<=1)")


def _doctor_launch(work: Path):
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.launch import prepare

    standin = ROOT / "tests" / "standin"
    return prepare(
        load_config(
            ROOT / "configs" / "tiny-1node.yaml",
            [
                f"models.actor={standin / 'models' / 'tiny-actor'}",
                f"models.reward={standin / 'models' / 'tiny-rm'}",
                f"data.prompt_dataset={standin / 'data' / 'prompts.jsonl'}",
                f"checkpoint.ckpt_path={work / 'ckpt'}",
                f"runtime_env.env_vars.PYTHONPATH={standin}",
            ],
        )
    )


def bench_doctor(reps: int) -> None:
    """doctor's time per node: one node's look, and the launcher's part on 4 to 64 nodes."""
    from rlhf_launch import doctor
    from rlhf_launch.cluster.doctor import probe_code
    from rlhf_launch.doctor import spec

    with tempfile.TemporaryDirectory() as tmp:
        launch = _doctor_launch(Path(tmp))
        facts_of = probe_code()["facts"]
        request = spec.build(launch, nonce="bench", version="bench")
        looks = []
        for _ in range(max(5, reps)):
            start = time.perf_counter()
            facts = facts_of(request)
            looks.append(time.perf_counter() - start)
        say("doctor_node_look_ms", statistics.median(looks) * 1e3, "ms")
        times = {}
        for nodes in (4, 16, 64):
            snap = _snapshot(nodes)
            answer = {n.node_id: {"ip": n.ip, **facts} for n in snap.nodes}
            free = doctor.free_nodes(snap.nodes)
            samples = []
            for _ in range(max(5, reps)):
                start = time.perf_counter()
                doctor.examine(launch, lambda _request, answer=answer: answer, nodes_free=free)
                samples.append(time.perf_counter() - start)
            times[nodes] = statistics.median(samples)
            say(f"doctor_{nodes}_nodes_ms", times[nodes] * 1e3, "ms")
        say("doctor_16_vs_4_per_node_growth", (times[16] / 16) / (times[4] / 4), "ratio(1=flat)")
        say("doctor_64_vs_4_per_node_growth", (times[64] / 64) / (times[4] / 4), "ratio(1=flat)")


def bench_doctor_cluster(cluster: _Cluster, reps: int, work: Path) -> None:
    """`rlhf-launch doctor` on the 4-node cluster, end to end, once its agents are warm."""
    launch_args = [
        f"models.actor={ROOT / 'tests' / 'standin' / 'models' / 'tiny-actor'}",
        f"models.reward={ROOT / 'tests' / 'standin' / 'models' / 'tiny-rm'}",
        f"data.prompt_dataset={ROOT / 'tests' / 'standin' / 'data' / 'prompts.jsonl'}",
        f"checkpoint.ckpt_path={work / 'doctor-ckpt'}",
        f"runtime_env.env_vars.PYTHONPATH={ROOT / 'tests' / 'standin'}",
    ]
    argv = [str(BIN / "rlhf-launch"), "doctor", "tiny-1node", *launch_args, "--json"]
    env = cluster.env(work / "doctor-home")
    timed(argv, env)  # starts the agents
    say("doctor_4_node_cluster_s", statistics.median(timed(argv, env) for _ in range(max(3, reps))), "s")


def failure(part: str, exc: BaseException) -> str:
    """One line saying why a part could not be measured: the exception's own text, or its type
    and where it was raised when it has none (a bare assert, a KeyError of nothing)."""
    text = str(exc).strip() if not isinstance(exc, KeyError) else f"missing key {exc}"
    if not text:
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        text = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}" if frame else type(exc).__name__
    elif not isinstance(exc, BenchError):
        text = f"{type(exc).__name__}: {text}"
    return f"bench: {part} failed: {text}"


def step(part: str, failed: list[str], run: Callable[[], None]) -> None:
    """Run one part; a failure is said (stderr, with why) and the next part still runs."""
    try:
        run()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - each part's failure is reported, the bench goes on
        line = failure(part, exc)
        print(line, file=sys.stderr, flush=True)
        failed.append(part)


def bench_replan(reps: int, work: Path, node_wait: float = 5.0) -> None:
    """A node holding only vLLM engines is SIGKILLed (every process of it) and does not come
    back: from its death to the re-planned attempt's training start, split into Ray noticing
    (the attempt FAILED), supervise.node_wait, the launcher's part (decision, proof the attempt
    is gone, the re-plan, node checks, submission) and Ray's start-up with placement. Each rep
    on a fresh cluster: a head without GPUs and two workers of 6 GPUs."""
    try:
        from support.ray_cluster import LocalCluster, descendants
    except ImportError:
        from ray_cluster import LocalCluster, descendants

    parts: dict[str, list[float]] = {"detect": [], "launcher": [], "ray_start": [], "total": []}
    for rep in range(reps):
        root = work / f"replan{rep}"
        (root / "cluster").mkdir(parents=True)
        local = LocalCluster(root / "cluster", workers=0, gpus=0)
        try:
            local.start()
            for i in range(2):
                local.add_worker(gpus=6)
                local.wait_nodes(2 + i)
            env = clean_env(
                {
                    "RAY_AUTH_TOKEN_PATH": str(local.token_file),
                    "RAY_API_SERVER_ADDRESS": local.address,
                    "RLHF_LAUNCH_HOME": str(root / "state"),
                }
            )
            ckpt = root / "ckpt"
            overrides = _standin(
                ckpt, STANDIN_STEPS="60", STANDIN_STEP_SECONDS="0.5", STANDIN_WATCH_NODES="1", STANDIN_PLACEMENT_TIMEOUT="600"
            )
            overrides += [
                f"models.actor={ROOT / 'tests' / 'standin' / 'models' / 'tiny-actor'}",
                f"models.reward={ROOT / 'tests' / 'standin' / 'models' / 'tiny-rm'}",
                f"data.prompt_dataset={ROOT / 'tests' / 'standin' / 'data' / 'prompts.jsonl'}",
                "cluster.nodes=2",
                "cluster.gpus_per_node=6",
                f"supervise.node_wait={node_wait:g}",
            ]
            argv = [
                str(BIN / "rlhf-launch"),
                "submit",
                "tiny-1node",
                *overrides,
                "--auto-resume",
                "2",
                "--backoff",
                "0",
                "--poll",
                "1",
                "--json",
            ]
            done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
            if done.returncode != 0:
                raise SystemExit(f"bench: replan submit failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
            run_id = json.loads(done.stdout)["run_id"]
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not (ckpt / "_actor" / "latest").exists():
                time.sleep(0.2)
            vllm = {b["node_id"] for pg in local.placement_groups() if len(pg.get("bundles", [])) == 4 for b in pg["bundles"]}
            ip = next(n["node_ip"] for n in local.alive_nodes() if n["node_id"] in vllm)
            proc = local.worker_procs[int(ip.rsplit(".", 1)[1]) - 3]
            died = time.time()
            for pid in [proc.pid, *descendants(proc.pid)]:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            jobs = local.jobs()
            second = f"{run_id}-2"
            deadline = time.monotonic() + 300
            started = None
            while time.monotonic() < deadline and started is None:
                seen = [json.loads(line) for line in (ckpt / ".standin.jsonl").read_text().splitlines()]
                started = seen[-1]["time"] if len(seen) > 1 else None
                time.sleep(0.2)
            if started is None:
                raise SystemExit("bench: the re-planned attempt did not start within 300s")
            failed, resubmitted = jobs.info(f"{run_id}-1"), jobs.info(second)
            detected = failed.end_time or died
            submitted = resubmitted.start_time or started
            parts["detect"].append(detected - died)
            parts["launcher"].append(submitted - detected - node_wait)
            parts["ray_start"].append(started - submitted)
            parts["total"].append(started - died)
        finally:
            local.stop()
    say("replan_node_death_to_training_s", statistics.median(parts["total"]), f"s(context: node_wait {node_wait:g} s included)")
    say("replan_ray_notices_loss_s", statistics.median(parts["detect"]), "s(context)")
    say("replan_launcher_part_s", statistics.median(parts["launcher"]), "s(without node_wait)")
    say("replan_launcher_part_max_s", max(parts["launcher"]), "s")
    say("replan_ray_start_and_placement_s", statistics.median(parts["ray_start"]), "s(context)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=7, help="repetitions per figure (median taken)")
    parser.add_argument(
        "--only",
        default="cli,preflight,doctor,diagnose,runs,fit,doctor_cluster,submit,stop,auto_resume,replan",
        help="comma-separated parts",
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    failed: list[str] = []
    if parts & {"cli", "runs", "submit", "stop", "auto_resume", "doctor_cluster", "replan"}:
        compiled()
    if "cli" in parts:
        step("cli", failed, lambda: bench_cli(args.reps))
    if "preflight" in parts:
        step("preflight", failed, lambda: bench_preflight(args.reps))
    if "doctor" in parts:
        step("doctor", failed, lambda: bench_doctor(args.reps))
    if "diagnose" in parts:
        step("diagnose", failed, lambda: bench_diagnose(args.reps))
    if "runs" in parts:
        step("runs", failed, lambda: bench_runs(args.reps))
    if "fit" in parts:
        step("fit", failed, lambda: bench_fit(args.reps))
    if "replan" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            step("replan", failed, lambda: bench_replan(max(3, args.reps // 2), Path(tmp)))
    if parts & {"submit", "stop", "auto_resume", "doctor_cluster"}:
        with tempfile.TemporaryDirectory() as tmp, _Cluster(Path(tmp) / "cluster") as cluster:
            work = Path(tmp)
            if "doctor_cluster" in parts:
                step("doctor_cluster", failed, lambda: bench_doctor_cluster(cluster, args.reps, work))
            if "submit" in parts:
                step("submit", failed, lambda: bench_submit(cluster, max(5, args.reps), work))
            if "stop" in parts:
                step("stop", failed, lambda: bench_stop(cluster, 10, work))
            if "auto_resume" in parts:
                step("auto_resume", failed, lambda: bench_auto_resume(cluster, max(5, args.reps // 2 + 2), work))
            step("settle", failed, cluster.settle)
    if failed:
        raise SystemExit(f"bench: not measured: {', '.join(failed)} (why: above)")


if __name__ == "__main__":
    main()
