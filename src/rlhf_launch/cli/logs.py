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
    from rlhf_launch.runs import logs, remote

    record, cluster = options.run_and_cluster(run, address, token_file)
    record = remote.refresh(record, cluster.jobs)
    if follow:
        from rlhf_launch.cli import report

        output.follow(logs.follow(record, cluster.jobs), report.progress_reader(record))
    else:
        output.echo(logs.current(record, cluster.jobs), end="")
        if record.diagnosis:
            from rlhf_launch.cli import report

            output.echo(report.diagnosis_text(record.diagnosis), err=True)
