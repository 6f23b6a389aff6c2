"""`rlhf-launch logs [RUN]`: print or follow the logs of a run's current attempt."""

from __future__ import annotations

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    follow: bool = options.FOLLOW,
    attempt: int | None = options.ATTEMPT,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
) -> None:
    """Print (or follow) the logs of a run's current attempt (or of --attempt N)."""
    from rlhf_launch.runs import logs, remote

    record, cluster = options.run_and_cluster(run, address, token_file)
    record = remote.refresh(record, cluster.jobs)
    chosen = logs.attempt_of(record, attempt)  # before any log is read: a wrong N is said at once
    if follow:
        from rlhf_launch.cli import report

        output.follow(logs.follow(record, cluster.jobs, chosen.number), report.progress_reader(record))
    else:
        text = logs.current(record, cluster.jobs, chosen.number)
        output.echo(text, end="" if not text or text.endswith("\n") else "\n")  # the diagnosis starts a line of its own
        from rlhf_launch.cli import report

        if attempt is None and record.diagnosis and report.failing_now(record):
            output.echo(report.diagnosis_text(record.diagnosis), err=True)
        elif attempt is not None and chosen.diagnosis and (chosen.status.is_failure() or chosen.diagnosis.get("stall")):
            output.echo(report.diagnosis_text(chosen.diagnosis), err=True)
