"""`logs --follow`, `submit --follow`, `watch`: whole lines only (a chunk that ends mid-line
is held, never erased by the live line), a live line that fits the terminal, progress lines
that never split a log line, and a Ctrl-C that ends quietly and closes the stream."""

from __future__ import annotations

import asyncio
import io
import sys
import warnings

import pytest

from rlhf_launch.cli import output
from rlhf_launch.cluster import jobs as jobs_module


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(raw: str) -> list[str]:
    """What a terminal shows: `\\r\\x1b[K` erases the row, `\\r` returns to its start."""
    rows, row = [], ""
    i = 0
    while i < len(raw):
        if raw.startswith("\r\x1b[K", i):
            row, i = "", i + 4
        elif raw[i] == "\r":
            row, i = "", i + 1
        elif raw[i] == "\n":
            rows.append(row)
            row, i = "", i + 1
        else:
            row, i = row + raw[i], i + 1
    return rows + ([row] if row else [])


def progress_after(n: int):
    seen = [0]

    def read(_chunk: str) -> str | None:
        seen[0] += 1
        return f"step {seen[0]}/8, 12 steps/h" if seen[0] >= n else None

    return read


def test_a_chunk_that_ends_mid_line_is_not_wiped_by_the_live_line(monkeypatch):
    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "200")
    chunks = ["(PolicyModelActor pid=1) loading shard 1 of 3\n(PolicyModelActor pid=1) load", "ing shard 2 of 3\n", "done\n"]
    output.follow(iter(chunks), progress_after(1))
    rows = screen(out.getvalue())
    assert "(PolicyModelActor pid=1) loading shard 2 of 3" in rows
    assert rows[-1] == "step 3/8, 12 steps/h"  # the last progress stays as the final line


def test_the_live_line_fits_the_terminal(monkeypatch):
    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "30")
    output.follow(iter(["a line\n", "another\n"]), lambda _c: "step 3/8, " + "x" * 100)
    live = [part for part in out.getvalue().split("\r\x1b[K") if part.startswith("step")]
    assert live and all(len(part.rstrip("\n").split("\n")[-1]) < 30 for part in live)


def test_a_tqdm_redraw_is_shown_in_its_newest_state_once_its_line_ends(monkeypatch, capsys):
    bar = "\rEpisode [1/1]:  12%|█▎        | 1/8 [00:05<00:35]\rEpisode [1/1]:  25%|██▌       | 2/8 [00:10<00:30]"
    output.follow(iter(["start\n", bar, "\nnext\n"]))
    text = capsys.readouterr().out
    assert text.splitlines() == ["start", "Episode [1/1]:  25%|██▌       | 2/8 [00:10<00:30]", "next"]


def test_without_a_terminal_progress_lines_fall_between_whole_lines(capsys):
    output.follow(iter(["one\ntw", "o\nthree\n"]), lambda _c: "step 1/8")
    assert capsys.readouterr().out.splitlines() == ["one", "[rlhf-launch] step 1/8", "two", "three"]


def test_ctrl_c_ends_quietly_and_closes_the_stream(capsys):
    closed = []

    def chunks():
        try:
            yield "one\n"
            yield "tw"
            raise KeyboardInterrupt
        finally:
            closed.append(True)

    import typer

    with pytest.raises(typer.Exit) as stopped:
        output.follow(chunks())
    assert stopped.value.exit_code == output.INTERRUPTED
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["one", "tw"]  # what came is printed, held part included
    assert captured.err.strip() == "stopped following; the job keeps running"
    assert closed == [True]


class TailingSdk:
    """Ray's JobSubmissionClient.tail_job_logs: an async generator over a websocket."""

    def __init__(self, chunks: list[str], then_wait: bool):
        self.chunks, self.then_wait, self.closed = chunks, then_wait, []

    async def tail_job_logs(self, job_id: str):
        try:
            for chunk in self.chunks:
                yield chunk
            if self.then_wait:
                await asyncio.sleep(3600)  # the job keeps running: the socket stays open
        finally:
            self.closed.append(job_id)


@pytest.mark.parametrize("then_wait", [False, True])
def test_the_log_stream_is_read_on_its_own_loop_and_closes_cleanly(monkeypatch, then_wait):
    sdk = TailingSdk(["a\n", "b\n"], then_wait)
    jobs = jobs_module.Jobs.__new__(jobs_module.Jobs)
    monkeypatch.setattr(jobs_module.Jobs, "_sdk", lambda self: sdk)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited", "Task was destroyed"
        stream = jobs.follow("job-1")
        got = [next(stream), next(stream)]
        if then_wait:
            stream.close()  # what a Ctrl-C in output.follow does
        else:
            assert list(stream) == []
    assert got == ["a\n", "b\n"]
    assert sdk.closed == ["job-1"]  # the async generator's own cleanup ran


def test_an_error_of_the_stream_reaches_the_reader(monkeypatch):
    class Broken:
        async def tail_job_logs(self, job_id):
            yield "a\n"
            raise ConnectionResetError("websocket closed")

    jobs = jobs_module.Jobs.__new__(jobs_module.Jobs)
    monkeypatch.setattr(jobs_module.Jobs, "_sdk", lambda self: Broken())
    stream = jobs.follow("job-1")
    assert next(stream) == "a\n"
    with pytest.raises(ConnectionResetError):
        next(stream)


def test_watch_collapses_the_raylet_s_routine_lines_and_keeps_the_decisive_ones():
    from rlhf_launch.cli import report

    # Ray's own raylet messages (worker_pool.cc's worker start-up warning, the object spiller;
    # node_manager.cc's memory monitor), forwarded into the supervisor's log, coloured
    noise = [
        f"\x1b[33m(raylet)\x1b[0m WARNING: {n} PYTHON worker processes have been started on node: 3f2a1b2c with address: "
        "10.0.0.2. This could be a result of using a large number of actors, or due to tasks blocked in ray.get() calls."
        for n in range(4, 47)
    ]
    decisive = (
        "\x1b[33m(raylet, ip=10.0.0.3)\x1b[0m [2023-05-01 16:19:23,477 E 281 281] (raylet) node_manager.cc:3040: "
        "1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node"
    )
    log = "\n".join(["supervising r1", *noise[:30], decisive, *noise[30:], "attempt 1 RUNNING"]) + "\n"
    shown = "".join(report.supervisor_lines([log[:500], log[500:]])).splitlines()
    raylet = [line for line in shown if "raylet" in line]
    assert len(shown) == 5 and len(raylet) == 3, shown  # 44 raylet lines: two summaries and the decisive one
    assert shown[0] == "supervising r1" and shown[-1] == "attempt 1 RUNNING"
    assert shown[1].startswith("[rlhf-launch] (raylet) WARNING: 4 PYTHON") and "and 29 more raylet lines" in shown[1]
    assert shown[2].startswith("(raylet, ip=10.0.0.3) ") and "killed due to memory pressure" in shown[2]
    assert "and 12 more raylet lines" in shown[3]
    assert not any("\x1b" in line for line in shown)
