"""`rlhf-launch import SCRIPT [-o OUT.yaml]`: turn a script that runs the trainer into a config.

`--openrlhf-source DIR` reads the script with an OpenRLHF fork's own flags (openrlhf/fork.py) and
writes `openrlhf.source: <absolute DIR>` instead of a release.

Exit 0 when the config reproduces the script; 1 when it was written but something of the
script is left out (a flag the target release removed, an unknown flag: the findings say
which); 2 for a user error (no such file, not UTF-8, no trainer call in it, OUT exists).
"""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    script: str = typer.Argument(..., help="shell script that runs openrlhf.cli.train_ppo_ray (directly or via ray job submit)"),
    out: str | None = options.OUTPUT,
    openrlhf_version: str | None = typer.Option(
        None, "--openrlhf-version", help="release to write the config for (default: the script's); a newer one migrates the flags"
    ),
    script_version: str | None = typer.Option(
        None,
        "--script-version",
        help="release the script was written for (default: of those that accept all its flags, the newest of the oldest one's series)",
    ),
    openrlhf_source: str | None = typer.Option(
        None, "--openrlhf-source", help="an OpenRLHF fork's checkout the trainer runs: read the script with its own flags"
    ),
    variables: list[str] | None = typer.Option(
        None, "--var", help="NAME=VALUE for a variable the script reads but does not set (repeatable)", show_default=False
    ),
    call: int | None = typer.Option(
        None,
        "--call",
        min=1,
        metavar="N",
        help="which trainer call to import when the script runs it more than once (1 = the first it runs)",
        show_default=False,
    ),
    force: bool = options.FORCE_WRITE,
) -> None:
    """Read a script that runs the OpenRLHF trainer and write the equivalent config."""
    from pathlib import Path

    from rlhf_launch.errors import UserError
    from rlhf_launch.importer import ScriptError, config_name, import_script

    path = Path(script)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"script {script} not found") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise UserError(f"cannot read script {script}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"script {script} is not UTF-8 text (byte {exc.start})", hint="convert it, e.g. iconv -t UTF-8") from None
    environ: dict[str, str] = {}
    for item in variables or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise UserError(f"--var {item!r} is not NAME=VALUE")
        environ[name] = value
    fork = None
    if openrlhf_source is not None:
        if openrlhf_version or script_version:
            raise UserError("--openrlhf-source reads the script with the fork's own flags; drop --openrlhf-version and --script-version")
        from rlhf_launch.openrlhf import fork as forks

        fork = forks.read(openrlhf_source, via="--openrlhf-source")
    try:
        imported = import_script(
            text,
            name=config_name(path.stem),
            environ=environ,
            script_version=script_version,
            target_version=openrlhf_version,
            pick=call,
            fork=fork,
        )
    except ScriptError as exc:
        raise UserError(f"{script}: {exc}", hint=_script_hint(str(exc))) from None
    body = imported.yaml(script, imported.call.line if imported.call else None)
    notes = [f"{f.level}: {f.key}: {f.message}" + (f" (hint: {f.hint})" if f.hint else "") for f in imported.findings]
    if out is None:
        output.echo(body, end="")
        for line in notes:
            output.echo(imported.clean(line), err=True)
    else:
        target = output.write_file(out, body, force=force, what="config")
        for line in notes:
            output.echo(imported.clean(line))
        versions = imported.source if imported.source == imported.target else f"{imported.source} -> {imported.target}"
        shown = versions if fork is not None else f"openrlhf {versions}"
        output.echo(f"wrote {target} ({shown}); check it with: rlhf-launch plan {target}")
    if not imported.ok:
        output.exit_with(output.FAILED)


def _script_hint(message: str) -> str:
    if "--call" in message:
        return "pick one of the script's trainer calls with --call N"
    return "the script must run python -m openrlhf.cli.train_ppo_ray once"
