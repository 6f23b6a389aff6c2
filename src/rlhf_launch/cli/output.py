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


def follow(chunks: Iterable[str], progress: Callable[[str], str | None] | None = None) -> None:
    """Print log chunks as they come; Ctrl-C stops following, never the job.

    `progress` reads each chunk and returns a progress line (or None): on a terminal it is
    kept as a live last line, elsewhere it is printed as a plain line when it changes."""
    live = sys.stdout.isatty()
    shown = ""
    try:
        for chunk in chunks:
            if live and shown:
                sys.stdout.write("\r\x1b[K")
            echo(chunk, end="")
            line = progress(chunk) if progress else None
            if line and live:
                sys.stdout.write(_clean(line))
                sys.stdout.flush()
                shown = line
            elif line and line != shown:
                echo(f"[rlhf-launch] {line}")
                shown = line
    except KeyboardInterrupt:
        echo("\nstopped following; the job keeps running", err=True)
    finally:
        if live and shown:
            sys.stdout.write("\n")
            sys.stdout.flush()
