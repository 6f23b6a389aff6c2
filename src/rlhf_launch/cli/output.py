"""Everything the CLI prints goes through here, so the W&B key is redacted everywhere (and in
messages, stderr and errors, anything shaped like a secret: core/secrets.redact_line); the exit
codes every verb uses; the one way a verb writes a file (`write_file`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from rlhf_launch.core.secrets import redact, redact_line, wandb_key
from rlhf_launch.errors import LauncherError, UserError

if TYPE_CHECKING:
    from rlhf_launch.cluster.live import Live
    from rlhf_launch.core.launch import Launch

OK = 0  # done, and the outcome is what was asked for
FAILED = 1  # done, but the outcome is a failure: the run failed, a stop left something behind
USER = 2  # a user error: usage, config, file, argument (one message and a hint): fix it, then rerun
BUG = 3  # an unexpected exception: a short message and the path of a log with the traceback
CLUSTER = 4  # the cluster: unreachable, timed out, auth refused, an error answer (errors.ClusterError)
INTERRUPTED = 130  # Ctrl-C

# What `--help` and README say about them (cli/app.py shows it).
EXIT_CODES = (
    "exit codes: 0 done; 1 done, but a check or the run failed; 2 a user error (fix the config or "
    "arguments); 3 a bug (the message names a log); 4 the cluster is unreachable, timed out or refused "
    "(auth, an error answer): retry when it is up, or check --address / the token; 130 Ctrl-C"
)


def _clean(text: str) -> str:
    return redact(text, [wandb_key()])


def message(text: str) -> str:
    """A message fit to show: the W&B key of the environment and anything shaped like a
    secret redacted (an override's `WANDB_API_KEY=...` included). Every message on stderr
    and every error goes through it; stdout's data (a plan, logs) gets `_clean`."""
    return redact_line(text)


def echo(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write((message(text) if err else _clean(text)) + end)
    stream.flush()


def echo_json(data: Any) -> None:
    echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def error(exc: LauncherError) -> None:
    echo(f"error: {exc.message}", err=True)
    if exc.hint:
        echo(f"  hint: {exc.hint}", err=True)


def error_json(text: str, hint: str | None, exit_code: int, kind: str, **more: Any) -> None:
    """A verb run with --json that ends in an error still prints one JSON object on stdout:
    {"error": {"message", "hint", "exit_code", "type", ...}} (the message also goes to stderr)."""
    data: dict[str, Any] = {"message": message(text), "hint": message(hint) if hint else None, "exit_code": exit_code, "type": kind}
    data.update({key: value for key, value in more.items() if value is not None})
    sys.stdout.write(json.dumps({"error": data}, indent=2, default=str) + "\n")
    sys.stdout.flush()


def write_file(path: str | Path, text: str, *, force: bool, what: str = "file", mode: int | None = None) -> Path:
    """The one way a verb writes a file the user named (or the default name): refused when it
    exists unless `force` (a UserError naming the file and the fix), parents made, `mode` set."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{what} {target} is a directory", hint="pass a file path with -o/--output")
    if target.exists() and not force:
        raise UserError(
            f"{what} {target} already exists; not overwritten", hint="pass --force to overwrite it, or another -o/--output path"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        if mode is not None:
            target.chmod(mode)
    except OSError as exc:
        raise UserError(f"cannot write {what} {target}: {exc.strerror or exc}", hint="pass another -o/--output path") from None
    return target


def exit_with(code: int) -> NoReturn:
    raise typer.Exit(code)


def show_launch(launch: Launch, as_json: bool, live: Live | None = None, submitted: bool | None = None) -> None:
    """Print a launch (and the live checks, if any); exit 2 when either has an error.
    `submitted`: whether anything was (a dry run says False in its JSON)."""
    from rlhf_launch.cli import report

    ok = launch.ok and (live is None or live.ok)
    if as_json:
        data = launch.as_json()
        if live is not None:
            data["live"] = live.as_json()
            data["ok"] = ok
        if submitted is not None:
            data["submitted"] = submitted
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
