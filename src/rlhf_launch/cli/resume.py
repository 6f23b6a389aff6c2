"""`rlhf-launch resume [RUN]`: resubmit a run from its latest checkpoint, same arguments."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    overrides: list[str] | None = options.OVERRIDES,
    force: bool = typer.Option(
        False, "--force", help="allow overrides that change layout or batch sizes, a run that SUCCEEDED, a ckpt_path another run took over"
    ),
    allow_fresh: bool = typer.Option(False, "--allow-fresh", help="resume even with no checkpoint yet (from step 0)"),
    follow: bool = options.FOLLOW,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
    skip_check: str = options.SKIP_CHECK,
    fit: bool = typer.Option(
        False, "--fit", help="re-plan the run onto the live cluster's GPUs first (as the supervisor does after a lost node)"
    ),
    nodes: int | None = typer.Option(None, "--nodes", min=1, help="with --fit: use this many of the live nodes"),
    dry_run: bool = typer.Option(False, "--dry-run", help="with --fit: show the old and new layout, submit nothing"),
) -> None:
    """Resubmit a run from its latest checkpoint, with the same arguments (after the same node checks as submit)."""
    from rlhf_launch import doctor
    from rlhf_launch.cli import report
    from rlhf_launch.errors import UserError
    from rlhf_launch.runs import logs
    from rlhf_launch.runs import record as runs
    from rlhf_launch.runs.resume import resume

    skip = doctor.parse_skip(skip_check)
    if (nodes is not None or dry_run) and not fit:  # said before anything is asked of a cluster
        given = "--nodes" if nodes is not None else "--dry-run"
        raise UserError(f"{given} goes with --fit (a re-plan onto the live cluster)", hint=f"rlhf-launch resume RUN --fit {given}")
    record = runs.find(run)
    cluster = options.cluster(address, options.run_token(record, token_file), configured=record.address)
    record = options.remember_token(record, token_file)  # the token given now is the one later verbs use
    before = record
    if fit:
        from rlhf_launch.runs import refit

        if overrides:
            raise UserError("--fit chooses the layout itself: pass no key=value overrides with it", hint="rlhf-launch fit CONFIG")
        planned = refit.plan(record, cluster, nodes)
        if not as_json:
            output.echo(refit.text(planned))
        if not planned.ok or dry_run:
            if as_json:
                output.echo_json({**planned.as_json(), "dry_run": dry_run})
            if not planned.ok:
                output.exit_with(output.USER)
            return
        record = refit.adopt(planned, cluster.jobs, output.echo)
    try:
        done = resume(record, overrides or [], cluster, force=force, allow_fresh=allow_fresh, moved=address is not None, skip_checks=skip)
    except BaseException:
        if fit:
            refit.undo(before)
        raise
    if fit and not done.ok:
        refit.undo(before)
    output.echo_json(done.as_json()) if as_json else output.echo(report.resumed_text(done))
    if not done.ok:
        output.exit_with(output.USER)
    if follow:
        output.follow(logs.follow(done.run, cluster.jobs), report.progress_reader(done.run))
