"""The `rlhf-launch` command line: the list of verbs, and how a run of the CLI ends.

Each verb is one module in this folder with a `command` function that owns its Typer
signature; adding a verb is adding a module and a line to VERBS. Nothing here imports ray
(verbs import their edge modules inside `command`), so `--help` and `plan` stay fast.

Exit codes (cli/output.py): 0 done; 1 done but failed (a run failed, a stop left something
behind); 2 a user error, usage errors included, one message and no traceback; 3 a bug: a
short message and the path of a log with the traceback; 130 Ctrl-C. Usage errors are
caught as the exceptions of the click that Typer itself runs on, whichever that is.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from types import ModuleType

import typer

from rlhf_launch import __version__
from rlhf_launch.cli import (
    checkpoints,
    diagnose,
    doctor,
    down,
    import_script,
    init,
    join,
    k8s,
    logs,
    output,
    plan,
    presets,
    resume,
    runs,
    slurm,
    status,
    stop,
    submit,
    supervise,
    up,
    versions,
    watch,
)
from rlhf_launch.errors import LauncherError

# (verb, module) in the order `--help` lists them.
VERBS: list[tuple[str, ModuleType]] = [
    ("plan", plan),
    ("submit", submit),
    ("resume", resume),
    ("logs", logs),
    ("stop", stop),
    ("runs", runs),
    ("doctor", doctor),
    ("checkpoints", checkpoints),
    ("diagnose", diagnose),
    ("watch", watch),
    ("supervise", supervise),
    ("up", up),
    ("join", join),
    ("down", down),
    ("slurm", slurm),
    ("k8s", k8s),
    ("status", status),
    ("presets", presets),
    ("init", init),
    ("import", import_script),
    ("versions", versions),
]

app = typer.Typer(
    name="rlhf-launch",
    help="Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        output.echo(f"rlhf-launch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="show the version"),
) -> None:
    """Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster."""


for _name, _module in VERBS:
    app.command(_name)(_module.command)


def crash_log(exc: BaseException) -> Path:
    """Write the traceback of a bug where the user can find it; return the file."""
    from rlhf_launch.runs.record import state_dir

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in (state_dir() / "logs", Path("/tmp")):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"rlhf-launch-crash-{stamp}-{id(exc):x}.log"
            path.write_text(f"rlhf-launch {__version__}\nargv: {sys.argv}\n\n{text}")
            return path
        except OSError:
            continue
    return Path("/dev/null")


# The click Typer runs on: its own copy (newer typer) or the click package (older typer).
# typer.Exit / typer.Abort are the ones raised in either case.
_click = sys.modules[typer.BadParameter.__module__]
_EXIT = (typer.Exit, getattr(_click, "Exit", typer.Exit))
_ABORT = (typer.Abort, getattr(_click, "Abort", typer.Abort))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return its exit code."""
    try:
        result = app(args=argv, prog_name="rlhf-launch", standalone_mode=False)
    except _EXIT as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except _ABORT:
        output.echo("aborted", err=True)
        return output.INTERRUPTED
    except _click.ClickException as exc:  # usage errors: a usage line and the problem
        exc.show()
        return output.USER
    except LauncherError as exc:
        output.error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        output.echo("interrupted", err=True)
        return output.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug
        path = crash_log(exc)
        output.echo(f"error: rlhf-launch hit a bug ({type(exc).__name__}: {str(exc)[:200]})", err=True)
        output.echo(f"  the traceback is in {path}; please include it when you report this", err=True)
        return output.BUG
    return result if isinstance(result, int) else output.OK


if __name__ == "__main__":
    sys.exit(main())
