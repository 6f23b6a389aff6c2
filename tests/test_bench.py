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
