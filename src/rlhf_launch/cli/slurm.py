"""`rlhf-launch slurm CONFIG`: the run as an sbatch script (bringup/slurm.py); `--submit` runs sbatch."""

from __future__ import annotations

import typer

from rlhf_launch.cli import options, output


def command(
    config: str = options.CONFIG,
    overrides: list[str] | None = options.OVERRIDES,
    openrlhf_version: str | None = options.VERSION,
    out: str | None = options.OUTPUT,
    output_file: str | None = options.OUTPUT_FILE,
    force: bool = options.FORCE_WRITE,
    submit: bool = typer.Option(
        False, "--submit", help="write the script (--output, default <config name>.sbatch) and submit it with sbatch; print the job id"
    ),
    partition: str | None = typer.Option(None, "--partition", "-p"),
    account: str | None = typer.Option(None, "--account", "-A"),
    time_limit: str | None = typer.Option(None, "--time", "-t", help="Slurm time limit, e.g. 2-00:00:00"),
    job_name: str | None = typer.Option(None, "--job-name", help="default: rlhf-<config name>"),
    log: str | None = typer.Option(None, "--log", help="sbatch --output pattern, e.g. logs/%x-%j.out"),
    requeue: bool = typer.Option(False, "--requeue", help="let Slurm requeue the job (preemption): it resumes the run"),
    container_image: str | None = typer.Option(None, "--container-image", help="run every node in this image (pyxis/enroot)"),
    container_mounts: str | None = typer.Option(None, "--container-mounts", help="pyxis mounts, SRC:DST[,SRC:DST...]"),
    mem: str | None = typer.Option(
        None,
        "--mem",
        help="memory per node: 'plan' (the plan's figure, said in the script's header) or a Slurm size, e.g. 1500G "
        "(default: --mem=0, the whole node)",
    ),
    gpu_request: bool = typer.Option(True, "--gpu-request/--no-gpu-request", help="ask Slurm for the GPUs (#SBATCH --gpus-per-node)"),
    shared_dir: str | None = typer.Option(
        None, "--shared-dir", help="shared storage for the token, records and run id (default: <ckpt_path>/.rlhf-launch-slurm)"
    ),
    port: int = typer.Option(6379, "--port", help="the head's GCS port"),
    dashboard_port: int = typer.Option(8265, "--dashboard-port"),
    wait_timeout: int = typer.Option(600, "--wait-timeout", min=1, help="seconds to wait for every node and GPU"),
    stop_timeout: int = typer.Option(90, "--stop-timeout", min=1, help="seconds the stop on SIGTERM may take"),
    signal_lead: int = typer.Option(180, "--signal-lead", min=1, help="Slurm signals the script this long before the time limit"),
    auto_resume: int = options.AUTO_RESUME,
    skip_check: str = options.SKIP_CHECK,
    ray_arg: list[str] | None = typer.Option(None, "--ray-arg", help="more `ray start` arguments for every node (repeat)"),
    launcher: str = typer.Option("rlhf-launch", "--launcher", help="the launcher command on the nodes"),
    loopback_ports: int | None = typer.Option(None, "--loopback-ports", hidden=True, help="tests: all nodes on one machine"),
) -> None:
    """Write an sbatch script that brings up Ray on the allocation and runs CONFIG there;
    submitted again (or requeued) it resumes the run from its latest checkpoint.
    """
    import shlex
    import shutil
    import subprocess
    from pathlib import Path

    from rlhf_launch.bringup.slurm import SlurmOptions, render
    from rlhf_launch.core.launch import from_config
    from rlhf_launch.errors import UserError

    launch = from_config(config, overrides or [], openrlhf_version)
    if not launch.ok:
        output.show_launch(launch, as_json=False)
    sbatch = shutil.which("sbatch") if submit else None
    if submit and sbatch is None:
        raise UserError("--submit needs sbatch, and there is none on PATH", hint="run on a Slurm login node, or drop --submit")
    opts = SlurmOptions(
        config=str(Path(config).resolve()) if Path(config).is_file() else config,  # the nodes may start elsewhere
        overrides=tuple(overrides or ()),
        openrlhf_version=openrlhf_version,
        partition=partition,
        account=account,
        time=time_limit,
        job_name=job_name,
        output=log,
        requeue=requeue,
        container_image=container_image,
        container_mounts=container_mounts,
        gpu_request=gpu_request,
        shared_dir=shared_dir,
        port=port,
        dashboard_port=dashboard_port,
        wait_timeout=wait_timeout,
        stop_timeout=stop_timeout,
        signal_lead=signal_lead,
        launcher=tuple(shlex.split(launcher)),
        ray_args=tuple(ray_arg or ()),
        skip_check=skip_check,
        auto_resume=auto_resume,
        loopback_ports=loopback_ports,
        mem=mem,
    )
    text = render(launch, opts)
    for key, value in (("checkpoint.ckpt_path", launch.cfg.checkpoint.ckpt_path), ("--shared-dir", shared_dir)):
        if value and not Path(value).is_absolute():
            output.echo(
                f"warning: {key} {value!r} is relative: every node reads it from the job's working directory (where "
                "sbatch is called); checkpoints and the run's records must be on storage all nodes share: give an absolute path there",
                err=True,
            )
    out = out or output_file
    if out is None and not submit:
        output.echo(text.rstrip("\n"))
        return
    target = output.write_file(out or f"{launch.cfg.name}.sbatch", text, force=force, what="sbatch script", mode=0o755)
    if not submit:
        output.echo(f"wrote {target}: sbatch {shlex.quote(str(target))}", err=True)
        return
    assert sbatch is not None
    done = subprocess.run([sbatch, "--parsable", str(target)], capture_output=True, text=True)
    if done.returncode:
        raise UserError(f"sbatch refused {target}: {(done.stderr or done.stdout).strip()[:500]}")
    output.echo(done.stdout.strip().split(";")[0])
