"""`rlhf-launch watch [RUN]`: follow a run's supervisor from any machine; start a new one
if the run should be supervised and none is running."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    follow: bool = typer.Option(
        True,
        "--follow/--no-follow",
        "-f",
        help="follow the supervisor until the run ends (the default); --no-follow: say who supervises and return",
    ),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
) -> None:
    """Follow a run's cluster-side supervisor (auto-resume); start one if none runs."""
    from rlhf_launch.cli import report
    from rlhf_launch.runs import remote, supervisor
    from rlhf_launch.runs.status import RunStatus

    record, cluster = options.run_and_cluster(run, address, token_file)
    jobs = cluster.jobs
    record = remote.refresh(record, jobs)
    live = supervisor.live_supervisor(record, jobs)
    if live is None:
        if record.final or not record.status.is_live():
            output.echo(report.run_line(record))
            output.exit_with(output.OK if record.status in (RunStatus.SUCCEEDED, RunStatus.STOPPED) else output.FAILED)
        job_id = supervisor.start(record, jobs)
        output.echo(f"no supervisor was running for {record.run_id}: started {job_id}")
    else:
        job_id = live.job_id
        output.echo(f"{record.run_id} is supervised by job {job_id} on {cluster.address}")
    if not follow:
        return
    output.follow(report.supervisor_lines(jobs.follow(job_id)))
    record = remote.refresh(record, jobs)
    output.echo(report.run_line(record))
    output.exit_with(output.OK if record.status in (RunStatus.SUCCEEDED, RunStatus.STOPPED) else output.FAILED)
