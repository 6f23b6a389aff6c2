"""Everything the CLI prints goes through here, so the W&B key is redacted everywhere; and
the exit codes every verb uses."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from rlhf_launch.core.secrets import redact, wandb_key
from rlhf_launch.errors import LauncherError

if TYPE_CHECKING:
    from rlhf_launch.cluster.live import Live
    from rlhf_launch.core.launch import Launch

OK = 0  # done, and the outcome is what was asked for
FAILED = 1  # done, but the outcome is a failure: the run failed, a stop left something behind
USER = 2  # a user error: usage, config, file, cluster unreachable, auth (one message and a hint)
BUG = 3  # an unexpected exception: a short message and the path of a log with the traceback
INTERRUPTED = 130  # Ctrl-C


def _clean(text: str) -> str:
    return redact(text, [wandb_key()])


def echo(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(_clean(text) + end)
    stream.flush()


def echo_json(data: Any) -> None:
    echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def error(exc: LauncherError) -> None:
    echo(f"error: {exc.message}", err=True)
    if exc.hint:
        echo(f"  hint: {exc.hint}", err=True)


def exit_with(code: int) -> NoReturn:
    raise typer.Exit(code)


def show_launch(launch: Launch, as_json: bool, live: Live | None = None) -> None:
    """Print a launch (and the live checks, if any); exit 2 when either has an error."""
    from rlhf_launch.cli import report

    ok = launch.ok and (live is None or live.ok)
    if as_json:
        data = launch.as_json()
        if live is not None:
            data["live"] = live.as_json()
            data["ok"] = ok
        echo_json(data)
    else:
        echo(report.plan_text(launch))
        if live is not None:
            echo("")
            echo(report.live_text(live))
    if not ok:
        exit_with(USER)


def _newest(pending: str) -> str:
    """A line still being redrawn (tqdm writes `\r` updates): only its newest state."""
    if "\r" not in pending:
        return pending
    parts = [part for part in pending.split("\r") if part]
    return parts[-1] if parts else ""


def _fit(line: str, width: int) -> str:
    """One screen row: a live line that wrapped could not be erased by `\r\x1b[K`."""
    line = line.replace("\n", " ").replace("\r", " ")
    room = max(10, width - 1)
    return line if len(line) <= room else line[: room - 1] + "…"


def follow(chunks: Iterable[str], progress: Callable[[str], str | None] | None = None) -> None:
    """Print log chunks as they come, whole lines only; Ctrl-C stops following, never the job.

    A chunk may end mid-line (Ray's log tail sends fixed-size chunks): the rest of the line
    is held until its newline comes, so nothing printed is ever erased. `progress` reads
    each chunk and returns a progress line (or None): on a terminal it is kept as a live
    last line, cut to the terminal's width (or, before there is one, the line being
    redrawn); elsewhere it is printed as a plain line when it changes. After a Ctrl-C it
    exits 130 (INTERRUPTED), whatever the run's state: the caller prints no outcome."""
    import shutil

    live = sys.stdout.isatty()
    pending = ""  # the end of the log after its last newline
    status = ""  # the progress line
    shown = ""  # what the live last line shows now
    interrupted = False
    try:
        for chunk in chunks:
            text = pending + chunk
            cut = text.rfind("\n") + 1
            complete, pending = text[:cut], _newest(text[cut:])
            line = progress(chunk) if progress else None
            if live:
                status = line or status
                wanted = _fit(_clean(status or pending), shutil.get_terminal_size((100, 24)).columns)
                if complete or wanted != shown:
                    if shown:
                        sys.stdout.write("\r\x1b[K")
                    if complete:
                        echo(complete, end="")
                    if wanted:
                        sys.stdout.write(wanted)
                        sys.stdout.flush()
                    shown = wanted
            else:
                if complete:
                    echo(complete, end="")
                if line and line != status:
                    echo(f"[rlhf-launch] {line}")
                    status = line
    except KeyboardInterrupt:
        interrupted = True
    finally:
        close = getattr(chunks, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - the stream is being abandoned
                pass
        if shown:
            sys.stdout.write("\r\x1b[K")
        if pending:
            echo(pending)
        if live and status:
            echo(_fit(status, shutil.get_terminal_size((100, 24)).columns))
        if interrupted:
            echo("stopped following; the job keeps running", err=True)
    if interrupted:
        exit_with(INTERRUPTED)  # Ctrl-C is 130 for every verb that follows (README: exit codes)
