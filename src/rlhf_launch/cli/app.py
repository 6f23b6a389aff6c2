"""The `rlhf-launch` command line: the list of verbs, and how a run of the CLI ends.

Each verb is one module in this folder with a `command` function that owns its Typer
signature; adding a verb is adding a module, a line to VERBS and its examples
(cli/examples.py). Verb modules are imported only when their verb runs (or shows its
help): `--help` lists every verb from VERBS without importing any, and `plan` imports
`plan` alone. Nothing here imports ray (verbs import their edge modules inside `command`),
so `--help` and `plan` stay fast.

Exit codes (cli/output.py): 0 done; 1 done but failed (a run failed, a stop left something
behind); 2 a user error, usage errors included, one message and no traceback; 3 a bug: a
short message and the path of a log with the traceback; 4 the cluster (unreachable, timed
out, auth refused: errors.ClusterError); 130 Ctrl-C. Usage errors are caught as the
exceptions of the click that Typer itself runs on, whichever that is. With --json, an error
also prints {"error": {...}} on stdout (output.error_json), the exit code unchanged.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

from rlhf_launch import __version__
from rlhf_launch.cli import examples, output
from rlhf_launch.errors import LauncherError


class Verb(NamedTuple):
    name: str
    module: str  # the module under rlhf_launch.cli with its `command`
    help: str  # the one line `rlhf-launch --help` shows


# In the order `--help` lists them.
VERBS: list[Verb] = [
    Verb("plan", "plan", "Validate a config; show the layout, findings and command."),
    Verb("fit", "fit", "Rank the layouts a cluster accepts by estimated step time."),
    Verb("submit", "submit", "Check a config, the cluster and every node; submit the run."),
    Verb("resume", "resume", "Resubmit a run from its latest checkpoint."),
    Verb("logs", "logs", "Print (or follow) the logs of a run's current attempt."),
    Verb("stop", "stop", "Stop a run: its supervisor, every attempt, every process."),
    Verb("runs", "runs", "List runs (this machine's and the cluster's) with status."),
    Verb("doctor", "doctor", "Check every alive node is ready for a run."),
    Verb("checkpoints", "checkpoints", "Show a run's checkpoints, as every node sees them."),
    Verb("diagnose", "diagnose", "Classify why a run's attempt failed or stalled."),
    Verb("watch", "watch", "Follow a run's cluster-side supervisor (auto-resume)."),
    Verb("supervise", "supervise", "Supervise a run in the foreground (the supervisor job)."),
    Verb("up", "up", "Start the Ray head on this node, token auth on."),
    Verb("join", "join", "Start a Ray worker on this node and join it to the head."),
    Verb("down", "down", "Stop every Ray process on this machine (as `ray stop`)."),
    Verb("slurm", "slurm", "Write (and submit) an sbatch script for a run."),
    Verb("k8s", "k8s", "Write KubeRay manifests for a run (RayCluster or RayJob)."),
    Verb("status", "status", "Alive nodes, GPUs, Ray versions and running jobs."),
    Verb("presets", "presets", "List the shipped presets."),
    Verb("init", "init", "Copy a preset out to edit."),
    Verb("import", "import_script", "Read a trainer script; write the equivalent config."),
    Verb("versions", "versions", "List the OpenRLHF releases whose flags are known."),
]
_BY_NAME = {verb.name: verb for verb in VERBS}

# The click Typer runs on: its own copy (newer typer) or the click package (older typer).
# typer.Exit / typer.Abort are the ones raised in either case.
_click = sys.modules[typer.BadParameter.__module__]


def verb_command(name: str) -> Any:
    """The click command of one verb: its module imported now, its examples as epilog."""
    verb = _BY_NAME[name]
    module = importlib.import_module(f"rlhf_launch.cli.{verb.module}")
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    epilog = "\n\n".join(part for part in (examples.epilog(name), output.EXIT_CODES[0].upper() + output.EXIT_CODES[1:] + ".") if part)
    single.command(name, cls=_VerbCommand, epilog=epilog, short_help=verb.help)(module.command)
    return typer.main.get_command(single)


class _VerbCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        for param in params:  # --help included
            _plain_text(param)
        return params


class _Text:
    """Typer's coercion of a plain `str` (or `list[str]`) parameter, without the pydantic
    TypeAdapter newer Typer builds for it (importing pydantic is ~60 ms of `runs`)."""

    @staticmethod
    def _one(value: Any) -> str:
        return os.fsdecode(value) if isinstance(value, bytes) else str(value)

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if isinstance(value, (list, tuple)):
            return [self._one(v) for v in value]
        return self._one(value)


class _Flag:
    """The same for a bool: a flag's True/False as it is, else the words pydantic accepts."""

    WORDS = {"1": True, "true": True, "t": True, "yes": True, "y": True, "on": True}
    WORDS |= {"0": False, "false": False, "f": False, "no": False, "n": False, "off": False, "": False}

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word not in self.WORDS:
            raise _click.BadParameter(f"{value!r} is not a valid boolean", ctx=ctx, param=param)
        return self.WORDS[word]


def _plain_text(param: Any) -> None:
    """Give a str / list[str] / bool parameter the plain coercion, where this Typer builds
    its coercion lazily (`_runtime_param`, newer typer); anything else keeps Typer's own."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", False) is not None:
        return
    info = getattr(descriptor, "parameter_info", None)
    if getattr(descriptor, "file_annotation", None) is not None or getattr(info, "parser", None) is not None:
        return
    if getattr(descriptor, "is_path", True) or getattr(descriptor, "choices", None) is not None:
        return
    if descriptor.annotation is bool:
        param._runtime_param = _Flag()
    elif descriptor.annotation is str or descriptor.annotation == list[str]:
        param._runtime_param = _Text()


class _Verbs(TyperGroup):
    """The verbs, each loaded when it is named; `--help` lists them from VERBS."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [verb.name for verb in VERBS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in _BY_NAME:
            self.commands[cmd_name] = verb_command(cmd_name)
        return self.commands.get(cmd_name)

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        for param in params:
            _plain_text(param)
        return params

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(verb.name, verb.help) for verb in VERBS])

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _click.UsageError as exc:  # suggest among every verb, not only the loaded ones
            import difflib  # only for a mistyped verb (plan stays fast)

            matches = difflib.get_close_matches(args[0], list(_BY_NAME)) if args else []
            if matches and "Did you mean" not in exc.message:
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise


HELP = (
    "Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster.\n\n"
    "An option means the same in every verb: -o/--output FILE writes a file (import, slurm, k8s), "
    "refused if it exists unless --force; -f is always --follow (logs, watch, submit, resume), never "
    '--force; --json prints one JSON object, an error included ({"error": {...}}).\n\n'
    + output.EXIT_CODES[0].upper()
    + output.EXIT_CODES[1:]
    + "."
)

app = typer.Typer(
    name="rlhf-launch",
    help=HELP,
    cls=_Verbs,
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
    # no docstring: the group's help is HELP (a docstring here would replace it)
    return None


def crash_log(exc: BaseException) -> Path:
    """Write the traceback of a bug where the user can find it; return the file."""
    import traceback  # only for a bug

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


_EXIT = (typer.Exit, getattr(_click, "Exit", typer.Exit))
_ABORT = (typer.Abort, getattr(_click, "Abort", typer.Abort))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return its exit code."""
    # The launcher loads no pydantic plugins: looking for them reads the metadata of every
    # installed package (~60 ms of `plan` with ray installed). Set while the CLI runs (a user's
    # own setting wins); processes the verb starts meanwhile (`ray start`) inherit it.
    plugins = os.environ.get(_NO_PLUGINS)
    os.environ.setdefault(_NO_PLUGINS, "__all__")
    try:
        return _run(argv)
    finally:
        if plugins is None:
            os.environ.pop(_NO_PLUGINS, None)


_NO_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


def _wants_json(argv: list[str] | None) -> bool:
    """--json among the options (before a `--`)."""
    args = sys.argv[1:] if argv is None else argv
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _run(argv: list[str] | None) -> int:
    as_json = _wants_json(argv)
    try:
        result = app(args=argv, prog_name="rlhf-launch", standalone_mode=False)
    except _EXIT as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except _ABORT:
        output.echo("aborted", err=True)
        return output.INTERRUPTED
    except _click.ClickException as exc:  # usage errors: a usage line and the problem
        _show_usage_error(exc)
        if as_json:
            output.error_json(exc.format_message(), "rlhf-launch VERB --help shows the options", output.USER, "UsageError")
        return output.USER
    except LauncherError as exc:
        output.error(exc)
        if as_json:
            output.error_json(exc.message, exc.hint, exc.exit_code, type(exc).__name__)
        return exc.exit_code
    except KeyboardInterrupt:
        output.echo("interrupted", err=True)
        return output.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug
        path = crash_log(exc)
        text = f"rlhf-launch hit a bug ({type(exc).__name__}: {str(exc)[:200]})"
        output.echo(f"error: {text}", err=True)
        output.echo(f"  the traceback is in {path}; please include it when you report this", err=True)
        if as_json:
            output.error_json(text, "please include the log when you report this", output.BUG, "Bug", log=str(path))
        return output.BUG
    return result if isinstance(result, int) else output.OK


def _show_usage_error(exc: Any) -> None:
    """click's usage message, its text redacted like every other message (an override's
    value may be in it)."""
    import io

    buffer = io.StringIO()
    exc.show(file=buffer)
    output.echo(buffer.getvalue(), err=True, end="")


if __name__ == "__main__":
    sys.exit(main())
