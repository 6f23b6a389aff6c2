"""The `rlhf-launch` command line: parse arguments, call a command module, print. No logic.

Nothing here imports ray: `--help` and `plan` stay fast; commands that talk to a cluster
import their edge modules inside the command function.
"""

from __future__ import annotations

import sys
from typing import List, Optional

import click
import typer

from rlhf_launch import __version__, output
from rlhf_launch.errors import UserError

app = typer.Typer(
    name="rlhf-launch",
    help="Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

CONFIG = typer.Argument(..., help="YAML config file, or the name of a preset (rlhf-launch presets)")
OVERRIDES = typer.Argument(None, help="key=value overrides, e.g. placement.actor.nodes=2", show_default=False)
VERSION = typer.Option(None, "--openrlhf-version", help="target OpenRLHF release (overrides openrlhf.version)")
JSON = typer.Option(False, "--json", help="print one JSON object")


def _version(value: bool) -> None:
    if value:
        output.echo(f"rlhf-launch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="show the version"),
) -> None:
    """Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster."""


def _show_launch(launch, as_json: bool) -> None:
    from rlhf_launch import report

    if as_json:
        output.echo_json(launch.as_json())
    else:
        output.echo(report.plan_text(launch))
    if not launch.ok:
        raise typer.Exit(2)


@app.command()
def plan(
    config: str = CONFIG,
    overrides: Optional[List[str]] = OVERRIDES,
    openrlhf_version: Optional[str] = VERSION,
    as_json: bool = JSON,
) -> None:
    """Validate a config and show the layout, findings and the exact trainer command."""
    from rlhf_launch.commands import plan as cmd

    _show_launch(cmd.run(config, overrides or [], openrlhf_version), as_json)


@app.command()
def submit(
    config: str = CONFIG,
    overrides: Optional[List[str]] = OVERRIDES,
    openrlhf_version: Optional[str] = VERSION,
    dry_run: bool = typer.Option(False, "--dry-run", help="show what would be submitted; contact no cluster"),
    as_json: bool = JSON,
) -> None:
    """Check a config (and the live cluster) and submit the trainer as a Ray job."""
    from rlhf_launch.commands import plan as cmd

    launch = cmd.run(config, overrides or [], openrlhf_version)
    if dry_run:
        _show_launch(launch, as_json)
        return
    raise UserError("submitting to a cluster is not available in this build", hint="use --dry-run")


@app.command()
def presets(as_json: bool = JSON) -> None:
    """List the shipped presets."""
    from rlhf_launch import presets as shipped

    rows = [shipped.describe(name) for name in shipped.names()]
    if as_json:
        output.echo_json(rows)
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        output.echo(f"{r['name']:<{width}}  {r['nodes']}x{r['gpus_per_node']} GPUs  {r['summary']}")


@app.command()
def init(
    preset: str = typer.Argument(..., help="preset name (rlhf-launch presets)"),
    path: Optional[str] = typer.Argument(None, help="where to write it (default ./PRESET.yaml)"),
) -> None:
    """Copy a preset out to edit."""
    from pathlib import Path

    from rlhf_launch import presets as shipped

    target = shipped.copy_out(preset, Path(path) if path else None)
    output.echo(f"wrote {target}; check it with: rlhf-launch plan {target}")


@app.command()
def versions(as_json: bool = JSON) -> None:
    """List the OpenRLHF releases whose trainer flags rlhf-launch knows."""
    from rlhf_launch.openrlhf import flagset

    known = list(flagset.supported_versions())
    if as_json:
        output.echo_json({"versions": known, "default": flagset.newest_version()})
        return
    for v in known:
        fs = flagset.load(v)
        mark = " (default)" if v == flagset.newest_version() else ""
        output.echo(f"{v:<13} {'dotted' if fs.dotted else 'flat':<6}  {len(fs.flags)} flags  ray {fs.ray_pin}{mark}")


def main(argv: Optional[List[str]] = None) -> int:
    try:
        result = app(args=argv, prog_name="rlhf-launch", standalone_mode=False)
    except UserError as exc:
        output.user_error(exc)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        output.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        output.echo("interrupted", err=True)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
