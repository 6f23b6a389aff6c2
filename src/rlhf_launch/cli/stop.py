"""`rlhf-launch stop [RUN]`: stop a run; a stopped run is never resumed automatically."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Stop a run's job; a stopped run is not resumed automatically."""
    from rlhf_launch.cli import report
    from rlhf_launch.runs import record as runs
    from rlhf_launch.runs.stop import stop

    record = runs.find(run)
    done = stop(record, options.cluster(address, token_file, configured=record.address).jobs)
    output.echo_json(done.as_json()) if as_json else output.echo(report.stopped_text(done))
