"""`runs` reads records through the listing index (runs/record.py `summaries`): the same runs
as the records say, a record another process wrote seen at once, only changed records
parsed again, and an index that is unreadable rebuilt."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus


def _run(run_id: str, created: float, status: RunStatus = RunStatus.SUCCEEDED) -> Run:
    attempt = Attempt(1, f"{run_id}-1", "submit", False, created, AttemptStatus.SUCCEEDED, created + 1)
    return Run(run_id, "idx", created, "http://127.0.0.1:9", "0.11.2", {"train": {"x": 1}}, "h", "cfg.yaml", ["a=1"],
               ["--x", "1"], {"env_vars": {}}, "/ckpt", [attempt], status)  # fmt: skip


def _settle() -> None:
    """Every record older than the index's settling time, as records long written are."""
    old = time.time() - 3 * runs.SETTLED_NS / 1e9
    for path in runs.runs_dir().glob("*.json"):
        os.utime(path, (old, old))


def _light(run: Run) -> dict:
    data = run.as_json()
    for key in runs.HEAVY:
        data.pop(key)
    return data


def test_summaries_are_the_records_without_their_configs(home):
    for i in range(5):
        runs.save(_run(f"idx-{i}", float(10 - i)))
    (runs.runs_dir() / "broken.json").write_text("{not json")
    for _ in range(2):  # building the index, then reading it
        _settle()
        seen, full = runs.summaries(), runs.listing()
        assert [_light(r) for r in seen.runs] == [_light(r) for r in full.runs]
        assert [r.run_id for r in seen.runs] == [f"idx-{i}" for i in (4, 3, 2, 1, 0)]  # oldest first
        assert [b.path for b in seen.unreadable] == [b.path for b in full.unreadable] == [str(runs.runs_dir() / "broken.json")]
        assert all(r.config == {} and r.argv == [] for r in seen.runs)
    assert (runs.runs_dir() / runs.INDEX).exists()


def test_only_changed_records_are_parsed_again(home, monkeypatch):
    for i in range(4):
        runs.save(_run(f"idx-{i}", float(i)))
    _settle()
    runs.summaries()
    parsed: list[str] = []
    real = runs._parse
    monkeypatch.setattr(runs, "_parse", lambda path: parsed.append(path.name) or real(path))
    runs.summaries()
    assert parsed == []
    runs.update("idx-2", lambda r: setattr(r, "status", RunStatus.FAILED))
    parsed.clear()
    assert {r.run_id: r.status for r in runs.summaries().runs}["idx-2"] is RunStatus.FAILED
    assert parsed == ["idx-2.json"]


def test_a_record_another_process_rewrites_is_seen_at_once(home):
    runs.save(_run("idx-0", 1.0, RunStatus.RUNNING))
    _settle()
    assert runs.summaries().runs[0].status is RunStatus.RUNNING  # indexed
    code = (
        "from rlhf_launch.runs import record as runs\n"
        "from rlhf_launch.runs.status import RunStatus\n"
        "runs.update('idx-0', lambda r: setattr(r, 'status', RunStatus.WAITING))\n"  # as long as RUNNING
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy(), timeout=60)
    assert runs.summaries().runs[0].status is RunStatus.WAITING
    runs.update("idx-0", lambda r: setattr(r, "status", RunStatus.RUNNING))  # within the same moment, same size
    assert runs.summaries().runs[0].status is RunStatus.RUNNING


def test_an_unreadable_index_is_rebuilt(home):
    runs.save(_run("idx-0", 1.0))
    _settle()
    runs.summaries()
    (runs.runs_dir() / runs.INDEX).write_text("[1, 2")
    assert [r.run_id for r in runs.summaries().runs] == ["idx-0"]
    (runs.runs_dir() / runs.INDEX).write_text('{"version": 1, "records": {"idx-0.json": [[0, 0, 0, 0], {"run_id": "forged"}]}}')
    assert [r.run_id for r in runs.summaries().runs] == ["idx-0"]  # the key does not match the file


def test_a_summary_is_never_saved(home):
    runs.save(_run("idx-0", 1.0))
    summary = runs.summaries().runs[0]
    with pytest.raises(TypeError):
        runs.save(summary)
    assert runs.load("idx-0").config == {"train": {"x": 1}}
