"""`rlhf-launch checkpoints [RUN]`: a run's OpenRLHF checkpoints, as every node sees them."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    run: str | None = options.RUN,
    ckpt_path: str | None = typer.Option(None, "--ckpt-path", help="a checkpoint directory instead of a run's"),
    local: bool = typer.Option(False, "--local", help="read on this machine only"),
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Show a run's OpenRLHF checkpoints; on a cluster, check every node sees the same."""
    from rlhf_launch.cli import report
    from rlhf_launch.errors import ClusterError
    from rlhf_launch.runs import checkpoints
    from rlhf_launch.runs import record as runs

    record = None if ckpt_path else runs.find(run)
    path = ckpt_path or (record.ckpt_path if record else "")
    jobs, note = None, ""
    target = None if local else address or (record.address if record else None)
    if target is not None:
        try:
            jobs = options.cluster(target, options.run_token(record, token_file) if record else token_file, timeout=5).checked().jobs
        except ClusterError as exc:
            note = f"cluster not reachable ({exc.message}); read on this machine instead"
    state, findings = checkpoints.discover(jobs, path)
    data = state.as_json()
    data["run_id"] = record.run_id if record else None
    data["checked_on"] = "every alive node" if jobs else "this machine"
    data["note"] = note
    data["findings"] = [f.as_dict() for f in findings]
    output.echo_json(data) if as_json else output.echo(report.checkpoints_text(data))
    if any(f.level == "error" for f in findings) or state.status == "broken":
        output.exit_with(output.USER)
