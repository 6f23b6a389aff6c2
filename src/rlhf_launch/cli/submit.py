"""`rlhf-launch submit CONFIG`: check the config and the live cluster, record the run, submit."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    config: str = options.CONFIG,
    overrides: list[str] | None = options.OVERRIDES,
    openrlhf_version: str | None = options.VERSION,
    dry_run: bool = typer.Option(False, "--dry-run", help="show what would be submitted; contact no cluster, submit nothing"),
    as_json: bool = options.JSON,
    address: str | None = options.ADDRESS,
    token_file: str | None = options.TOKEN_FILE,
    reserve_check: bool = options.RESERVE,
    reserve_timeout: float = options.RESERVE_TIMEOUT,
    follow: bool = options.FOLLOW,
    auto_resume: int = options.AUTO_RESUME,
    backoff: float = typer.Option(10.0, "--backoff", min=0, help="seconds before the first automatic resume (doubles each time)"),
    poll: float = typer.Option(5.0, "--poll", min=0.1, help="seconds between the supervisor's status checks"),
    retry_on: str = typer.Option("", "--retry-on", help="failure classes to retry even if the policy would not, e.g. gpu_oom"),
    no_retry_on: str = typer.Option("", "--no-retry-on", help="failure classes never to retry, e.g. nccl,node_lost"),
    allow_fresh: bool = typer.Option(False, "--allow-fresh", help="allow --auto-resume without checkpoints (each resume starts at step 0)"),
    skip_check: str = options.SKIP_CHECK,
    no_grow: bool = typer.Option(
        False, "--no-grow", help="after a re-plan onto fewer GPUs, stay there when the lost node returns (sets supervise.grow=false)"
    ),
    move_aside: bool = typer.Option(
        False,
        "--move-checkpoints-aside",
        help="start fresh over checkpoints at ckpt_path: move them into ckpt_path/.rlhf-launch-aside/ (never deleted)",
    ),
) -> None:
    """Check a config, the live cluster and every node, record the run, and submit the trainer as a Ray job."""
    from rlhf_launch import doctor
    from rlhf_launch.cli import report
    from rlhf_launch.core import presets
    from rlhf_launch.core.launch import from_config
    from rlhf_launch.runs import logs
    from rlhf_launch.runs.submit import check_policy, submit

    skip = doctor.parse_skip(skip_check)
    overrides = [*(overrides or []), *(["supervise.grow=false"] if no_grow else [])]
    launch = from_config(config, overrides or [], openrlhf_version)
    if dry_run:
        try:
            output.show_launch(launch.at(options.target_address(address, launch.cfg.cluster.address)), as_json, submitted=False)
        finally:  # said whether the plan passed or not (an error exits 2)
            output.echo("dry run: nothing was submitted, no cluster was contacted", err=True)
        return
    policy = options.supervision(auto_resume, backoff, poll, retry_on, no_retry_on)
    check_policy(launch, policy, allow_fresh=allow_fresh)
    cluster = options.cluster(address, token_file, configured=launch.cfg.cluster.address)
    launch = launch.at(cluster.address)
    done = submit(
        launch,
        cluster,
        source=str(presets.config_path(config)),
        overrides=overrides or [],
        reserve=reserve_check,
        reserve_timeout=reserve_timeout,
        policy=policy,
        skip_checks=skip,
        move_aside=move_aside,
    )
    output.echo_json(done.as_json()) if as_json else output.echo(report.submitted_text(done))
    if done.run is None:
        output.exit_with(output.USER)
    options.remember_token(done.run, token_file)  # later verbs on this run find the token without being told again
    if follow:
        output.follow(logs.follow(done.run, cluster.jobs), report.progress_reader(done.run))
