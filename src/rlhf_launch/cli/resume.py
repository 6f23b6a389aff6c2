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
) -> None:
    """Resubmit a run from its latest checkpoint, with the same arguments (after the same node checks as submit)."""
    from rlhf_launch import doctor
    from rlhf_launch.cli import report
    from rlhf_launch.runs import logs
    from rlhf_launch.runs import record as runs
    from rlhf_launch.runs.resume import resume

    skip = doctor.parse_skip(skip_check)
    record = runs.find(run)
    cluster = options.cluster(address, token_file, configured=record.address)
    done = resume(record, overrides or [], cluster, force=force, allow_fresh=allow_fresh, moved=address is not None, skip_checks=skip)
    output.echo_json(done.as_json()) if as_json else output.echo(report.resumed_text(done))
    if not done.ok:
        output.exit_with(output.USER)
    if follow:
        output.follow(logs.follow(done.run, cluster.jobs), report.progress_reader(done.run))
