"""`rlhf-launch watch [RUN]`: attach to a run's supervisor, or supervise it in the foreground."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    poll: float = typer.Option(5.0, "--poll", min=0.1, help="seconds between status checks"),
    token_file: str | None = options.TOKEN_FILE,
) -> None:
    """Supervise a run in the foreground: auto-resume on failure. Re-attaches if one already runs."""
    from rlhf_launch.runs import record as runs
    from rlhf_launch.runs import supervisor
    from rlhf_launch.runs.status import RunStatus

    record = runs.find(run)
    if supervisor.watcher_alive(record.run_id):
        output.echo(f"{record.run_id} is watched by pid {record.supervisor_pid}; following {supervisor.log_path(record.run_id)}")
        output.follow(supervisor.follow_log(record.run_id))
        return
    final = supervisor.watch(record.run_id, poll=poll, token_file=token_file, say=output.echo)
    output.exit_with(output.OK if final in (RunStatus.SUCCEEDED, RunStatus.STOPPED) else output.FAILED)
