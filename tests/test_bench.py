"""bench/run.py keeps working (its pure part, quickly); the figures themselves are not tested."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_bench_preflight_part_prints_machine_readable_lines():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--only", "preflight", "--reps", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    names = {parts[0] for parts in lines}
    assert {"preflight_1_nodes_us", "preflight_1024_nodes_us", "preflight_1024_vs_64_per_node_growth"} <= names
    for parts in lines:
        assert len(parts) == 3
        float(parts[1])


def _bench():
    import importlib.util

    loaded = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def test_the_stand_in_run_the_bench_submits_passes_the_node_checks(tmp_path):
    """The bench's cluster (4 local nodes of 8 logical GPUs, 8 CPUs) lives on one small machine:
    its submit must be a run the node checks accept there, or nothing after it is measured."""
    from rlhf_launch import doctor
    from rlhf_launch.cluster.doctor import probe_code
    from rlhf_launch.cluster.snapshot import Node
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.doctor import spec

    bench = _bench()
    launch = prepare(load_config(ROOT / "configs" / "tiny-1node.yaml", bench._standin(tmp_path / "ckpt", STANDIN_STEPS="1000")))
    facts = probe_code()["facts"](spec.build(launch, nonce="n", version="t"))  # this machine, as each node sees it
    facts["memory"] = {"total": 24.0, "available": 22.0}  # the nodes: 24 GiB
    nodes = [Node(f"node{i}" + "0" * 27, f"127.0.0.{i + 2}", i == 0, 8.0, 8.0, 8.0, 8.0) for i in range(4)]
    answer = {n.node_id: {"ip": n.ip, **facts} for n in nodes}
    report = doctor.examine(launch, lambda _request: answer, nodes_free=doctor.free_nodes(nodes))
    assert not report.failed(), [f.text() for f in report.failed()]


def test_a_failed_step_says_why_even_when_the_command_says_it_on_stdout():
    bench = _bench()
    argv = [sys.executable, "-c", "print('error: placement: needs 8 GPUs'); raise SystemExit(2)"]
    try:
        bench.timed(argv, bench.clean_env())
    except bench.BenchError as exc:
        said = str(exc)
    assert "exited 2" in said and "error: placement: needs 8 GPUs" in said
    try:
        bench.run_json([sys.executable, "-c", "print('not json')"], bench.clean_env())
    except bench.BenchError as exc:
        said = str(exc)
    assert "not json" in said
    try:
        raise AssertionError  # a bare assert's: no text of its own
    except AssertionError as exc:
        assert bench.failure("submit", exc).startswith("bench: submit failed: AssertionError at test_bench.py:")
    assert bench.failure("runs", KeyError("run_id")) == "bench: runs failed: KeyError: missing key 'run_id'"


def test_a_failed_part_does_not_stop_the_others(capsys):
    bench = _bench()
    failed: list[str] = []

    def broken() -> None:
        raise bench.BenchError("`rlhf-launch submit ...` exited 2: error: host_memory")

    bench.step("submit", failed, broken)
    bench.step("stop", failed, lambda: print("stop_to_gpus_free_s 1 s"))
    out = capsys.readouterr()
    assert failed == ["submit"] and "stop_to_gpus_free_s" in out.out
    assert "bench: submit failed: `rlhf-launch submit ...` exited 2: error: host_memory" in out.err
