"""`rlhf-launch supervise RUN`: the supervisor loop in the foreground. It is what the
cluster-side supervisor job runs (`--in-job`); run it by hand only where no cluster-side
supervisor can run (e.g. an image without rlhf-launch)."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    run: str = typer.Argument(..., help="run id"),
    in_job: bool = typer.Option(False, "--in-job", help="running as the run's supervisor job on the cluster"),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
) -> None:
    """Supervise a run in the foreground: auto-resume on failure (what the supervisor job runs)."""
    from rlhf_launch.cluster import sweep
    from rlhf_launch.runs.gone import Sweeper
    from rlhf_launch.runs.status import RunStatus
    from rlhf_launch.runs.supervisor import Supervisor

    sweeper: Sweeper | None = None
    look = None
    if in_job:  # on the cluster: the dashboard is where Ray says; sweep with tasks, not jobs
        import ray

        # Not Ray's forwarded worker and raylet lines: the supervisor's log is what `watch`
        # shows, and a node's death would print its raylet dump there once per driver event.
        context = ray.init(log_to_driver=False)
        address = address or f"http://{context.dashboard_url}"
        agents = sweep.NodeAgents()
        agents.warm()
        sweeper = agents
        from rlhf_launch.cluster import doctor

        look = doctor.in_driver
    record, cluster = options.run_and_cluster(run, address, token_file)
    jobs = cluster.jobs
    if sweeper is None:
        sweeper = lambda runs, job_ids: sweep.by_probe_job(jobs, runs, job_ids)  # noqa: E731
    final = Supervisor(record.run_id, jobs, cluster.dashboard, sweeper, say=output.echo, doctor_look=look).run()
    # As a job, a deliberate end is a success (the run's status is in the state line); a
    # supervisor job that FAILED in Ray crashed.
    ok = in_job or final in (RunStatus.SUCCEEDED, RunStatus.STOPPED)
    output.exit_with(output.OK if ok else output.FAILED)
