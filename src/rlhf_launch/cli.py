"""The `rlhf-launch` command line: parse arguments, call a command module, print. No logic.

Nothing here imports ray: `--help` and `plan` stay fast; commands that talk to a cluster
import their edge modules inside the command function.
"""

from __future__ import annotations

import sys
from typing import List, Optional

import click
import typer

from rlhf_launch import __version__, output
from rlhf_launch.errors import UserError

app = typer.Typer(
    name="rlhf-launch",
    help="Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

CONFIG = typer.Argument(..., help="YAML config file, or the name of a preset (rlhf-launch presets)")
OVERRIDES = typer.Argument(None, help="key=value overrides, e.g. placement.actor.nodes=2", show_default=False)
VERSION = typer.Option(None, "--openrlhf-version", help="target OpenRLHF release (overrides openrlhf.version)")
JSON = typer.Option(False, "--json", help="print one JSON object")


def _version(value: bool) -> None:
    if value:
        output.echo(f"rlhf-launch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="show the version"),
) -> None:
    """Plan, check and launch OpenRLHF PPO runs on a Ray GPU cluster."""


ADDRESS = typer.Option(None, "--address", help="Ray dashboard URL (default: RAY_API_SERVER_ADDRESS, the config's, or http://127.0.0.1:8265)")
TOKEN_FILE = typer.Option(None, "--token-file", help="Ray auth token file (default: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)")
RESERVE = typer.Option(False, "--reserve-check", help="really reserve the placement groups on the cluster, then free them")
RESERVE_TIMEOUT = typer.Option(60.0, "--reserve-timeout", help="seconds to wait for the reservation")


def _show_launch(launch, as_json: bool, live=None) -> None:
    from rlhf_launch import report

    ok = launch.ok and (live is None or not any(f.level == "error" for f in live.findings))
    if as_json:
        data = launch.as_json()
        if live is not None:
            data["live"] = live.as_json()
            data["ok"] = ok
        output.echo_json(data)
    else:
        output.echo(report.plan_text(launch))
        if live is not None:
            output.echo("")
            output.echo(report.live_text(live))
    if not ok:
        raise typer.Exit(2)


def _live(launch, address, token_file, reserve, reserve_timeout):
    from rlhf_launch.commands import preflight
    from rlhf_launch.dashboard import resolve_address

    return preflight.run(
        launch,
        resolve_address(address, launch.cfg.cluster.address),
        token_file,
        reserve=reserve,
        reserve_timeout=reserve_timeout,
    )


@app.command()
def plan(
    config: str = CONFIG,
    overrides: Optional[List[str]] = OVERRIDES,
    openrlhf_version: Optional[str] = VERSION,
    as_json: bool = JSON,
    cluster: bool = typer.Option(False, "--cluster", help="also check against the live cluster"),
    address: Optional[str] = ADDRESS,
    token_file: Optional[str] = TOKEN_FILE,
    reserve_check: bool = RESERVE,
    reserve_timeout: float = RESERVE_TIMEOUT,
) -> None:
    """Validate a config and show the layout, findings and the exact trainer command."""
    from rlhf_launch.commands import plan as cmd

    launch = cmd.run(config, overrides or [], openrlhf_version)
    live = None
    if cluster or reserve_check:
        live = _live(launch, address, token_file, reserve_check, reserve_timeout)
    _show_launch(launch, as_json, live)


@app.command()
def submit(
    config: str = CONFIG,
    overrides: Optional[List[str]] = OVERRIDES,
    openrlhf_version: Optional[str] = VERSION,
    dry_run: bool = typer.Option(False, "--dry-run", help="show what would be submitted; contact no cluster"),
    as_json: bool = JSON,
    address: Optional[str] = ADDRESS,
    token_file: Optional[str] = TOKEN_FILE,
    reserve_check: bool = RESERVE,
    reserve_timeout: float = RESERVE_TIMEOUT,
    follow: bool = typer.Option(False, "--follow", help="stream the job's logs after submitting"),
    auto_resume: int = typer.Option(0, "--auto-resume", help="resubmit from the latest checkpoint up to N times on failure"),
    backoff: float = typer.Option(10.0, "--backoff", help="seconds before the first automatic resume (doubles each time)"),
    poll: float = typer.Option(5.0, "--poll", help="seconds between the watcher's status checks"),
) -> None:
    """Check a config and the live cluster, record the run, and submit the trainer as a Ray job."""
    from rlhf_launch import report
    from rlhf_launch.commands import plan as plan_cmd
    from rlhf_launch.commands import submit as cmd

    if dry_run:
        _show_launch(plan_cmd.run(config, overrides or [], openrlhf_version), as_json)
        return
    done = cmd.run(
        config,
        overrides or [],
        openrlhf_version,
        address=address,
        token_file=token_file,
        reserve=reserve_check,
        reserve_timeout=reserve_timeout,
        auto_resume=auto_resume,
        backoff=backoff,
        poll=poll,
    )
    if as_json:
        output.echo_json(done.as_json())
    else:
        output.echo(report.submitted_text(done))
    if not done.ok:
        raise typer.Exit(2)
    if follow:
        _follow(done.run.run_id, address, token_file)


def _follow(run_id, address, token_file) -> None:
    from rlhf_launch.commands import jobs as cmd

    try:
        for chunk in cmd.logs(run_id, follow=True, address=address, token_file=token_file):
            output.echo(chunk, end="")
    except KeyboardInterrupt:
        output.echo("\nstopped following; the job keeps running", err=True)


@app.command()
def resume(
    run: Optional[str] = typer.Argument(None, help="run id (default: the latest run)"),
    overrides: Optional[List[str]] = OVERRIDES,
    force: bool = typer.Option(False, "--force", help="allow overrides that change layout or batch sizes"),
    allow_fresh: bool = typer.Option(False, "--allow-fresh", help="resume even with no checkpoint yet (from step 0)"),
    follow: bool = typer.Option(False, "--follow"),
    address: Optional[str] = ADDRESS,
    token_file: Optional[str] = TOKEN_FILE,
    as_json: bool = JSON,
) -> None:
    """Resubmit a run from its latest checkpoint, with the same arguments."""
    from rlhf_launch import report
    from rlhf_launch.commands import resume as cmd

    done = cmd.run(run, overrides or [], force=force, allow_fresh=allow_fresh, address=address, token_file=token_file)
    output.echo_json(done.as_json()) if as_json else output.echo(report.resumed_text(done))
    if done.attempt is None:
        raise typer.Exit(2)
    if follow:
        _follow(done.run.run_id, address, token_file)


@app.command()
def logs(
    run: Optional[str] = typer.Argument(None, help="run id (default: the latest run)"),
    follow: bool = typer.Option(False, "--follow", "-f", help="stream until the run ends; Ctrl-C stops following only"),
    address: Optional[str] = ADDRESS,
    token_file: Optional[str] = TOKEN_FILE,
) -> None:
    """Print (or follow) the logs of a run's current attempt."""
    from rlhf_launch.commands import jobs as cmd

    if follow:
        _follow(run, address, token_file)
        return
    for chunk in cmd.logs(run, follow=False, address=address, token_file=token_file):
        output.echo(chunk, end="")


@app.command()
def stop(
    run: Optional[str] = typer.Argument(None, help="run id (default: the latest run)"),
    address: Optional[str] = ADDRESS,
    token_file: Optional[str] = TOKEN_FILE,
    as_json: bool = JSON,
) -> None:
    """Stop a run's job; a stopped run is not resumed automatically."""
    from rlhf_launch.commands import jobs as cmd

    done = cmd.stop(run, address=address, token_file=token_file)
    output.echo_json(done) if as_json else output.echo(f"stopped {done['run_id']} (job {done['job_id']}: {done['job_status']})")


@app.command()
def runs(token_file: Optional[str] = TOKEN_FILE, as_json: bool = JSON) -> None:
    """List recorded runs, with status read live from Ray where reachable."""
    from rlhf_launch import report
    from rlhf_launch.commands import jobs as cmd

    rows = cmd.list_runs(token_file=token_file)
    output.echo_json(rows) if as_json else output.echo(report.runs_text(rows))


@app.command()
def checkpoints(
    run: Optional[str] = typer.Argument(None, help="run id (default: the latest run)"),
    ckpt_path: Optional[str] = typer.Option(None, "--ckpt-path", help="a checkpoint directory instead of a run's"),
    local: bool = typer.Option(False, "--local", help="read on this machine only"),
    address: Optional[str] = ADDRESS,
    token_file: Optional[str] = TOKEN_FILE,
    as_json: bool = JSON,
) -> None:
    """Show a run's OpenRLHF checkpoints; on a cluster, check every node sees the same."""
    from rlhf_launch import report
    from rlhf_launch.commands import jobs as cmd

    data = cmd.show_checkpoints(run, ckpt_path, address=address, token_file=token_file, local=local)
    output.echo_json(data) if as_json else output.echo(report.checkpoints_text(data))
    if any(f["level"] == "error" for f in data["findings"]) or data["status"] == "broken":
        raise typer.Exit(2)


@app.command()
def watch(
    run: Optional[str] = typer.Argument(None, help="run id (default: the latest run)"),
    poll: float = typer.Option(5.0, "--poll"),
    token_file: Optional[str] = TOKEN_FILE,
) -> None:
    """Supervise a run in the foreground: auto-resume on failure. Re-attaches if one already runs."""
    import time

    from rlhf_launch import runs as registry
    from rlhf_launch import supervisor

    record = registry.resolve(run)
    if supervisor.watcher_alive(record.run_id):
        output.echo(f"{record.run_id} is watched by pid {record.watcher_pid}; following {supervisor.log_path(record.run_id)}")
        with open(supervisor.log_path(record.run_id)) as log:
            try:
                while True:
                    line = log.readline()
                    if line:
                        output.echo(line, end="")
                    elif not supervisor.watcher_alive(record.run_id):
                        break
                    else:
                        time.sleep(0.5)
            except KeyboardInterrupt:
                pass
        return
    final = supervisor.watch(record.run_id, poll=poll, token_file=token_file, say=output.echo)
    raise typer.Exit(0 if final in ("SUCCEEDED", "STOPPED") else 1)


# Options `up` and `join` share.
NUM_GPUS = typer.Option(None, "--num-gpus", help="GPUs of this node (default: what it has)")
NUM_CPUS = typer.Option(None, "--num-cpus")
NODE_IP = typer.Option(None, "--node-ip-address", help="this node's address (default: detected)")
IB_HCA = typer.Option(None, "--ib-hca", help="NCCL_IB_HCA for every process, e.g. mlx5_0")
SOCKET_IFNAME = typer.Option(None, "--socket-ifname", help="NCCL_SOCKET_IFNAME, e.g. ib0")
OBJECT_STORE = typer.Option(None, "--object-store-memory", help="bytes")
NO_AUTH = typer.Option(False, "--no-auth", help="turn Ray token auth off (not recommended)")
BLOCK = typer.Option(False, "--block", help="stay in the foreground (containers); Ctrl-C stops Ray")
RAY_ARGS = typer.Argument(None, help="more `ray start` arguments, after --", show_default=False)


def _node_options(cls, *, ray_args, no_auth, **given):
    return cls(extra=tuple(ray_args or ()), auth=not no_auth, **given)


@app.command()
def up(
    head: bool = typer.Option(False, "--head", help="start the head node (required)"),
    num_gpus: Optional[int] = NUM_GPUS,
    num_cpus: Optional[int] = NUM_CPUS,
    port: int = typer.Option(6379, "--port", help="GCS port workers join"),
    dashboard_port: int = typer.Option(8265, "--dashboard-port"),
    dashboard_host: str = typer.Option("127.0.0.1", "--dashboard-host", help="address the dashboard and job API bind"),
    node_ip_address: Optional[str] = NODE_IP,
    ib_hca: Optional[str] = IB_HCA,
    socket_ifname: Optional[str] = SOCKET_IFNAME,
    object_store_memory: Optional[int] = OBJECT_STORE,
    no_auth: bool = NO_AUTH,
    token_file: Optional[str] = typer.Option(None, "--token-file", help="token file to use or create (default ~/.ray/auth_token)"),
    block: bool = BLOCK,
    as_json: bool = JSON,
    ray_args: Optional[List[str]] = RAY_ARGS,
) -> None:
    """Start the Ray head on this node: token auth on, dashboard on 127.0.0.1."""
    from rlhf_launch import cluster, report
    from rlhf_launch.commands import up as cmd

    if not head:
        raise UserError("up starts the head node: pass --head", hint="workers use: rlhf-launch join HEAD_IP")
    opts = _node_options(
        cluster.HeadOptions,
        ray_args=ray_args,
        no_auth=no_auth,
        num_gpus=num_gpus,
        num_cpus=num_cpus,
        node_ip_address=node_ip_address,
        object_store_memory=object_store_memory,
        block=block,
        token_file=token_file,
        ib_hca=ib_hca,
        socket_ifname=socket_ifname,
        port=port,
        dashboard_host=dashboard_host,
        dashboard_port=dashboard_port,
    )
    notify = output.echo_json if as_json else (lambda info: output.echo(report.up_text(info)))
    raise typer.Exit(cmd.run(opts, notify))


@app.command()
def join(
    head_ip: str = typer.Argument(..., help="the head node's address"),
    port: int = typer.Option(6379, "--port", help="the head's GCS port"),
    num_gpus: Optional[int] = NUM_GPUS,
    num_cpus: Optional[int] = NUM_CPUS,
    node_ip_address: Optional[str] = NODE_IP,
    ib_hca: Optional[str] = IB_HCA,
    socket_ifname: Optional[str] = SOCKET_IFNAME,
    object_store_memory: Optional[int] = OBJECT_STORE,
    token_file: Optional[str] = typer.Option(None, "--token-file", help="the head's token (default: RAY_AUTH_TOKEN, ~/.ray/auth_token)"),
    no_auth: bool = NO_AUTH,
    block: bool = BLOCK,
    as_json: bool = JSON,
    ray_args: Optional[List[str]] = RAY_ARGS,
) -> None:
    """Start a Ray worker on this node and join it to the head."""
    from rlhf_launch import cluster
    from rlhf_launch.commands import join as cmd

    opts = _node_options(
        cluster.WorkerOptions,
        ray_args=ray_args,
        no_auth=no_auth,
        num_gpus=num_gpus,
        num_cpus=num_cpus,
        node_ip_address=node_ip_address,
        object_store_memory=object_store_memory,
        block=block,
        token_file=token_file,
        ib_hca=ib_hca,
        socket_ifname=socket_ifname,
        head_ip=head_ip,
        port=port,
    )

    def notify(info):
        if as_json:
            output.echo_json(info)
        else:
            output.echo(f"joined the Ray cluster at {info['head']} (token from {info['token_source']})")

    raise typer.Exit(cmd.run(opts, notify))


@app.command()
def down(force: bool = typer.Option(False, "--force", help="SIGKILL instead of a graceful stop")) -> None:
    """Stop Ray on this node."""
    from rlhf_launch.commands import down as cmd

    cmd.run(force)
    output.echo("stopped Ray on this node")


@app.command()
def status(address: Optional[str] = ADDRESS, token_file: Optional[str] = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Alive nodes, GPUs, Ray versions and running jobs of the cluster."""
    from rlhf_launch import report
    from rlhf_launch.commands import status as cmd
    from rlhf_launch.dashboard import resolve_address

    data = cmd.run(resolve_address(address), token_file)
    output.echo_json(data) if as_json else output.echo(report.status_text(data))


@app.command()
def presets(as_json: bool = JSON) -> None:
    """List the shipped presets."""
    from rlhf_launch import presets as shipped

    rows = [shipped.describe(name) for name in shipped.names()]
    if as_json:
        output.echo_json(rows)
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        output.echo(f"{r['name']:<{width}}  {r['nodes']}x{r['gpus_per_node']} GPUs  {r['summary']}")


@app.command()
def init(
    preset: str = typer.Argument(..., help="preset name (rlhf-launch presets)"),
    path: Optional[str] = typer.Argument(None, help="where to write it (default ./PRESET.yaml)"),
) -> None:
    """Copy a preset out to edit."""
    from pathlib import Path

    from rlhf_launch import presets as shipped

    target = shipped.copy_out(preset, Path(path) if path else None)
    output.echo(f"wrote {target}; check it with: rlhf-launch plan {target}")


@app.command()
def versions(as_json: bool = JSON) -> None:
    """List the OpenRLHF releases whose trainer flags rlhf-launch knows."""
    from rlhf_launch.openrlhf import flagset

    known = list(flagset.supported_versions())
    if as_json:
        output.echo_json({"versions": known, "default": flagset.newest_version()})
        return
    for v in known:
        fs = flagset.load(v)
        mark = " (default)" if v == flagset.newest_version() else ""
        output.echo(f"{v:<13} {'dotted' if fs.dotted else 'flat':<6}  {len(fs.flags)} flags  ray {fs.ray_pin}{mark}")


def main(argv: Optional[List[str]] = None) -> int:
    try:
        result = app(args=argv, prog_name="rlhf-launch", standalone_mode=False)
    except UserError as exc:
        output.user_error(exc)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        output.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        output.echo("interrupted", err=True)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
