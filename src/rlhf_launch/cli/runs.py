"""`rlhf-launch runs [RUN]`: every run this machine recorded or the cluster knows, with status,
attempt, progress and the diagnosis of a failure, read live from Ray; with RUN, that run alone
(`--json`: one object; `--print-status`: its status word, for scripts)."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = typer.Argument(None, help="one run: its id or a unique prefix (default: every run)"),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
    print_status: bool = typer.Option(
        False, "--print-status", help="with RUN: print its status alone (SUCCEEDED, STOPPED, ...), for scripts"
    ),
) -> None:
    """List runs (this machine's records and the cluster's), with status read live from Ray."""
    from rlhf_launch.errors import UserError
    from rlhf_launch.runs import lookup
    from rlhf_launch.runs.overview import overview

    if print_status and run is None:
        raise UserError("--print-status needs a RUN", hint="rlhf-launch runs RUN --print-status")
    chosen = None
    if run is not None:
        found = lookup.local(run)
        if isinstance(found, lookup.Unknown):
            raise UserError(found.text, hint=found.closest_text or None)
        chosen = found.run_id
    seen = overview(address, token_file)
    if chosen is not None:
        row = next((r for r in seen.rows if r.get("run_id") == chosen), None)
        if row is None:
            raise UserError(f"run {chosen} is recorded here but could not be read", hint="rlhf-launch runs lists what is wrong")
        if print_status:
            output.echo(str(row["status"]))
        elif as_json:
            output.echo_json(row)
        else:
            from rlhf_launch.cli import report

            output.echo(report.runs_text(type(seen)([row], [], seen.unreachable)))
        return
    if as_json:
        output.echo_json(seen.as_json())
        return
    from rlhf_launch.cli import report  # the text only: it imports the core (pydantic)

    output.echo(report.runs_text(seen))
