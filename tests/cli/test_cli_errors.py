"""How a run of the CLI ends: usage errors are exit 2 with a usage message, user errors exit 2
with one message and a hint, bugs exit 3 with a short message and a log of the traceback;
never a raw traceback. The fresh-install test checks this with the newest dependencies."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

USAGE_ERRORS = [
    ["nosuchverb"],
    ["plan", "--bogus"],
    ["plan"],
    ["submit", "tiny-1node", "--auto-resume", "many"],
    ["stop", "--timeout", "soon"],
    ["diagnose", "--attempt", "0"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_usage_errors_exit_2_with_a_usage_message(args):
    done = run_cli(*args, real=True)
    assert done.returncode == 2, done.stderr
    assert "Usage:" in done.stderr and "Traceback" not in done.stderr + done.stdout


def test_a_bug_exits_3_with_a_log_of_the_traceback(tmp_path):
    code = (
        "import sys\n"
        "from rlhf_launch.cli import app, versions\n"
        "def broken(as_json: bool = False):\n"
        "    raise RuntimeError('something the launcher did not expect')\n"
        "versions.command = broken\n"
        "sys.exit(app.main(['versions']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"RLHF_LAUNCH_HOME": str(tmp_path), "PATH": ""}, cwd=ROOT
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "RuntimeError: something the launcher did not expect" in done.stderr
    log = Path(re.search(r"the traceback is in (\S+?);", done.stderr).group(1))
    assert log.is_relative_to(tmp_path) and "Traceback" in log.read_text() and "in broken" in log.read_text()


@pytest.mark.slow
def test_a_fresh_install_with_the_newest_dependencies(tmp_path):
    """pip resolves the ranges to today's newest typer, click, ray, pydantic: usage errors,
    user errors and plan still behave. Slow (40 s of pip): `.ci/run` is this check, a fresh
    venv with the newest releases running the whole suite; run it for an older dev venv."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade"]
    installed = subprocess.run([*pip, str(ROOT)], capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    launcher = str(venv / "bin" / "rlhf-launch")
    for args in USAGE_ERRORS:
        done = subprocess.run([launcher, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Usage:" in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    missing = subprocess.run([launcher, "plan", "no-such-preset"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no preset named" in missing.stderr and "Traceback" not in missing.stderr
    plan = subprocess.run([launcher, "plan", "llama70b-4node"], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0 and "GPUs needed: 32" in plan.stdout, plan.stderr
