"""`rlhf-launch logs [RUN]`: print or follow the logs of a run's current attempt."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    follow: bool = options.FOLLOW,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
) -> None:
    """Print (or follow) the logs of a run's current attempt."""
    from rlhf_launch.runs import logs
    from rlhf_launch.runs import record as runs

    record = runs.find(run)
    jobs = options.cluster(address, token_file, configured=record.address).jobs
    if follow:
        output.follow(logs.follow(record, jobs))
    else:
        output.echo(logs.current(record, jobs), end="")
