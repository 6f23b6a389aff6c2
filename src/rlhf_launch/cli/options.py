"""Options and arguments several verbs share, declared once. Importing this is cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rlhf_launch.cluster.connection import Cluster
    from rlhf_launch.runs.lifecycle import Supervision
    from rlhf_launch.runs.record import Run

CONFIG = typer.Argument(..., help="YAML config file, or the name of a preset (rlhf-launch presets)")
OVERRIDES = typer.Argument(None, help="key=value overrides, e.g. placement.actor.nodes=2", show_default=False)
VERSION = typer.Option(None, "--openrlhf-version", help="target OpenRLHF release (overrides openrlhf.version)")
JSON = typer.Option(False, "--json", help="print one JSON object")
RUN = typer.Argument(None, help="run id or a unique prefix (default: the latest run)")
ADDRESS = typer.Option(
    None, "--address", help="Ray dashboard URL (default: RAY_API_SERVER_ADDRESS, the config's or run's, or http://127.0.0.1:8265)"
)
TOKEN_FILE = typer.Option(
    None, "--token-file", help="Ray auth token file (default: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)"
)
RESERVE = typer.Option(False, "--reserve-check", help="really reserve the placement groups on the cluster, then free them")
RESERVE_TIMEOUT = typer.Option(60.0, "--reserve-timeout", help="seconds to wait for the reservation")
SKIP_CHECK = typer.Option(
    "", "--skip-check", help="node checks not to run, comma-separated (rlhf-launch doctor --help lists them); each skip is a warning"
)
# One meaning per option in every verb (`rlhf-launch --help` says so): -f is --follow (never
# --force), -o is --output (the file a verb writes; never the job's log), --auto-resume's
# default is 0 wherever it is taken.
FOLLOW = typer.Option(False, "--follow", "-f", help="stream the logs (-f is always --follow); Ctrl-C stops following, not the job")
OUTPUT = typer.Option(None, "--output", "-o", help="write it to this file (default: print it); an existing file needs --force")
OUTPUT_FILE = typer.Option(None, "--output-file", hidden=True, help="the old name of --output")
FORCE_WRITE = typer.Option(False, "--force", help="overwrite the --output file if it exists")
AUTO_RESUME = typer.Option(0, "--auto-resume", min=0, help="resume from the latest checkpoint on failure, up to N times (default 0: never)")
ATTEMPT = typer.Option(None, "--attempt", min=1, help="which attempt of the run (default: the current one)")

# `up` and `join`
NUM_GPUS = typer.Option(None, "--num-gpus", help="GPUs of this node (default: what it has)")
NUM_CPUS = typer.Option(None, "--num-cpus")
NODE_IP = typer.Option(None, "--node-ip-address", help="this node's address (default: detected)")
IB_HCA = typer.Option(None, "--ib-hca", help="NCCL_IB_HCA for every process, e.g. mlx5_0")
SOCKET_IFNAME = typer.Option(None, "--socket-ifname", help="NCCL_SOCKET_IFNAME, e.g. ib0")
OBJECT_STORE = typer.Option(None, "--object-store-memory", help="bytes")
NO_AUTH = typer.Option(False, "--no-auth", help="turn Ray token auth off (not recommended)")
BLOCK = typer.Option(False, "--block", help="stay in the foreground (containers); Ctrl-C stops Ray")
RAY_ARGS = typer.Argument(None, help="more `ray start` arguments, after --", show_default=False)


def cluster(address: str | None, token_file: str | None, configured: str | None = None, timeout: float = 10.0) -> Cluster:
    """The `Cluster` a command talks to, from its --address / --token-file."""
    from rlhf_launch.cluster.connection import Cluster

    return Cluster.at(address, token_file, configured=configured, timeout=timeout)


def target_address(address: str | None, configured: str | None) -> str | None:
    """The dashboard a config's job would go to, when something other than the config says
    (--address, RAY_API_SERVER_ADDRESS, an http RAY_ADDRESS); None: the config's own."""
    import os

    if not address and not any(os.environ.get(n, "").startswith("http") for n in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")):
        return None
    from rlhf_launch.cluster.connection import address_from

    return address_from(address, configured)


def run_and_cluster(run_id: str | None, address: str | None, token_file: str | None, timeout: float = 10.0) -> tuple[Run, Cluster]:
    """A run by id (or prefix; None: the latest) and the cluster it is on: this machine's
    record if it has one (its recorded address, unless --address or the environment names
    another), else the run as the cluster at --address knows it. An ambiguous id, or an id
    unknown here while no cluster was named, is said from the records alone: no network call."""
    from rlhf_launch.cluster.connection import Cluster
    from rlhf_launch.errors import ClusterError, UserError
    from rlhf_launch.runs import lookup, remote

    found = lookup.local(run_id)
    if not isinstance(found, lookup.Unknown):
        return found, Cluster.at(address, run_token(found, token_file), configured=found.address, timeout=timeout)
    named = target_address(address, None) is not None
    if found.known and not named:
        raise UserError(
            found.text,
            hint=f"{found.closest_text}; for a run submitted from another machine, pass --address URL of its cluster",
        )
    target = Cluster.at(address, token_file, timeout=timeout)
    try:
        return remote.find(run_id, target.jobs), target
    except ClusterError as exc:  # still a cluster error (exit 4): the run may be there once it answers
        raise type(exc)(
            f"{found.text}, and the cluster at {target.address} could not be asked: {exc.message}",
            (found.closest_text + "; " if found.closest else "") + "pass --address URL of the run's cluster",
        ) from None
    except UserError as exc:
        if not found.known:
            raise
        raise UserError(f"{found.text}; on the cluster: {exc.message}", hint=found.closest_text) from None


def run_token(run: Run, token_file: str | None) -> str | None:
    """The token file a verb on `run` uses: --token-file when given; else the one given at
    submit or resume (cluster/auth.py remembered_token_file); else None (the environment's, or
    Ray's default place)."""
    from rlhf_launch.cluster.auth import remembered_token_file

    if token_file or not run.token_file:
        return token_file
    return remembered_token_file(run.token_file)


def remember_token(run: Run, token_file: str | None) -> Run:
    """The run with `token_file` (its absolute path, never the token) recorded for later verbs."""
    if not token_file:
        return run
    from pathlib import Path

    from rlhf_launch.runs import record as runs

    remembered = str(Path(token_file).expanduser().resolve())
    return runs.update(run.run_id, lambda r: setattr(r, "token_file", remembered))


def supervision(auto_resume: int, backoff: float, poll: float, retry_on: str, no_retry_on: str) -> Supervision:
    """--auto-resume and its retry overrides, checked here (UserError naming the option)."""
    from rlhf_launch.errors import UserError
    from rlhf_launch.runs import retry
    from rlhf_launch.runs.lifecycle import Supervision

    try:
        policy = retry.Policy.parse(auto_resume, retry_on, no_retry_on)
    except ValueError as exc:
        raise UserError(f"--retry-on / --no-retry-on: {exc}", hint="the classes are in README (diagnose)") from None
    return Supervision(auto_resume, backoff, poll, tuple(sorted(policy.retry_on)), tuple(sorted(policy.no_retry_on)))
