"""Start and stop Ray on this node: `ray start --head` / `ray start --address`, `ray stop`.

Secure by default: token auth on (a token is made if none exists), the dashboard bound to
127.0.0.1, and never a 0.0.0.0 node address. InfiniBand settings go into the environment
of the Ray processes, so every trainer process on the node inherits them. Argument lists
are built by pure functions; only `start`, `stop` and the reachability checks touch the OS.
"""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlhf_launch.errors import AuthRejected, ClusterRefused, ClusterTimeout, ClusterUnreachable, UserError
from rlhf_launch.util.poll import poll_until

START_TIMEOUT = 120.0


def ray_command() -> list[str]:
    """The ray CLI of the Ray this launcher runs with (RLHF_LAUNCH_RAY overrides)."""
    override = os.environ.get("RLHF_LAUNCH_RAY")
    if override:
        return [override]
    return [sys.executable, "-m", "ray.scripts.scripts"]


def _is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_node_ip(ip: str | None) -> None:
    if ip is None:
        return
    try:
        parsed = ipaddress.ip_address(ip)
    except ValueError:
        raise UserError(f"--node-ip-address {ip!r} is not an IP address") from None
    if parsed.is_unspecified:
        raise UserError(
            f"--node-ip-address {ip} is not an address other nodes can reach",
            hint="leave it out to use this node's own address, or give that address (e.g. its InfiniBand/ethernet IP)",
        )


def _where(host: str) -> str:
    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        unspecified = False
    return f"{host} (every interface of this machine)" if unspecified else host


def check_dashboard_exposure(host: str, auth: bool) -> None:
    if not auth and not _is_loopback(host):
        raise UserError(
            f"refusing --dashboard-host {host} with --no-auth: the dashboard would listen on {_where(host)} with no token, "
            "so anyone who can reach its port there can submit jobs, and a job runs any code on every node",
            hint="keep token auth on (drop --no-auth), or bind the dashboard to 127.0.0.1 and use an SSH tunnel",
        )


def nccl_env(ib_hca: str | None, socket_ifname: str | None) -> dict[str, str]:
    env: dict[str, str] = {}
    if ib_hca:
        env["NCCL_IB_HCA"] = ib_hca
        env["NCCL_IB_DISABLE"] = "0"
    if socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = socket_ifname
    return env


@dataclass(frozen=True)
class NodeOptions:
    num_gpus: int | None = None
    num_cpus: int | None = None
    node_ip_address: str | None = None
    object_store_memory: int | None = None
    block: bool = False
    extra: tuple[str, ...] = ()
    auth: bool = True
    token_file: str | None = None
    ib_hca: str | None = None
    socket_ifname: str | None = None
    quiet: bool = False  # Ray's own start-up notes not passed on (its warnings and errors are)

    @property
    def nccl_env(self) -> dict[str, str]:
        return nccl_env(self.ib_hca, self.socket_ifname)


@dataclass(frozen=True)
class HeadOptions(NodeOptions):
    port: int = 6379
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8265


@dataclass(frozen=True)
class WorkerOptions(NodeOptions):
    head_ip: str = ""
    port: int = 6379


def _common(opts: NodeOptions) -> list[str]:
    args = []
    if opts.node_ip_address:
        args += ["--node-ip-address", opts.node_ip_address]
    if opts.num_gpus is not None:
        args += ["--num-gpus", str(opts.num_gpus)]
    if opts.num_cpus is not None:
        args += ["--num-cpus", str(opts.num_cpus)]
    if opts.object_store_memory is not None:
        args += ["--object-store-memory", str(opts.object_store_memory)]
    args.append("--disable-usage-stats")
    if opts.block:
        args.append("--block")
    return args + list(opts.extra)


def head_args(opts: HeadOptions) -> list[str]:
    return [
        "start",
        "--head",
        "--port",
        str(opts.port),
        "--dashboard-host",
        opts.dashboard_host,
        "--dashboard-port",
        str(opts.dashboard_port),
        "--include-dashboard",
        "true",
        *_common(opts),
    ]


def worker_args(opts: WorkerOptions) -> list[str]:
    return ["start", "--address", f"{opts.head_ip}:{opts.port}", *_common(opts)]


def reachable(host: str, port: int, timeout: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


_GCS_CHECK = """
import sys
try:
    from ray._raylet import GcsClient
except Exception:
    sys.exit(3)
try:
    GcsClient(address=sys.argv[1])
except Exception as exc:
    name = type(exc).__name__
    print(name, str(exc).splitlines()[0] if str(exc) else "")
    sys.exit(4 if "Auth" in name or "Unauthenticated" in str(exc) or "InvalidAuthToken" in str(exc) else 5)
"""


def check_head(head_ip: str, port: int, env: dict[str, str], timeout: float = 15.0) -> None:
    """Fail in seconds, with the reason, when the head is unreachable or refuses our token."""
    if not reachable(head_ip, port):
        raise ClusterUnreachable(
            f"cannot reach the Ray head at {head_ip}:{port}",
            hint="check the IP and --port, that the head runs (rlhf-launch up --head), and firewalls",
        )
    try:
        done = subprocess.run(
            [sys.executable, "-c", _GCS_CHECK, f"{head_ip}:{port}"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise ClusterTimeout(f"the Ray head at {head_ip}:{port} accepted a connection but did not answer in {timeout:g}s") from None
    if done.returncode == 4:
        raise AuthRejected(
            f"the Ray head at {head_ip}:{port} rejected this node's auth token",
            hint="copy the head's token file (printed by rlhf-launch up --head) and pass --token-file",
        )
    if done.returncode == 5:
        raise ClusterRefused(f"the Ray head at {head_ip}:{port} did not accept a connection: {done.stdout.strip()}")


@dataclass
class Started:
    returncode: int
    output: str = ""
    process: subprocess.Popen[str] | None = field(default=None, repr=False)


def start(args: list[str], env: dict[str, str], timeout: float = START_TIMEOUT) -> Started:
    """Run `ray start ...` and wait for it (it daemonizes the Ray processes)."""
    try:
        done = subprocess.run(
            [*ray_command(), *args],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        raise UserError(f"`ray start` did not finish in {timeout:g}s", hint=_tail(output)) from None
    return Started(done.returncode, done.stdout + done.stderr)


STARTED_LINE = "Ray runtime started"


_RAY_NOTE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+\s+(INFO|SUCC) ")


def start_blocking(
    args: list[str],
    env: dict[str, str],
    ready: Callable[[], bool] = lambda: True,
    timeout: float = START_TIMEOUT,
    quiet: bool = False,
) -> Started:
    """Run `ray start ... --block` in the foreground, its output passed on to stderr (`quiet`:
    its INFO notes kept back, warnings and errors passed on); return once Ray says it started
    and `ready()` holds (the process keeps running)."""
    # Ctrl-C or SIGTERM to `up`/`join --block` stops the node now: Ray would first drain it for 30 s
    # (a trainer's actors cannot finish in that time), as the Slurm script also sets
    drain = {} if "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S" in os.environ else {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    process = subprocess.Popen(
        [*ray_command(), *args],
        env={**os.environ, **drain, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    started = threading.Event()
    seen: list[str] = []

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            del seen[:-200]
            if not (quiet and _RAY_NOTE.match(line)):
                sys.stderr.write(line)
                sys.stderr.flush()
            if STARTED_LINE in line:
                started.set()

    threading.Thread(target=pump, daemon=True).start()

    def outcome() -> Started | None:
        if process.poll() is not None:
            time.sleep(0.2)  # let the pump drain
            return Started(process.returncode, "".join(seen), process)
        if started.is_set() and ready():
            return Started(0, "", process)
        return None

    result = poll_until(outcome, timeout, 0.3)
    if result is not None:
        return result
    stop_process(process)
    raise UserError(f"Ray did not come up within {timeout:g}s", hint=_tail("".join(seen)) or None)


def wait_blocking(process: subprocess.Popen[str], grace: float = 30.0) -> int:
    """Wait for a `--block` Ray; on SIGINT/SIGTERM stop it (SIGKILL after `grace`) and return:
    0 when it ended within `grace` of the stop asked (a node stopped on request ended as it
    should), else its exit status (Ray ended on its own, or had to be killed).

    The handler only passes the signal on: it runs inside `process.wait()`, whose lock a wait
    in the handler could never take (it would hang for ever)."""
    asked: list[float] = []

    def forward(signum: int, _frame: object) -> None:
        if not asked:
            asked.append(time.monotonic())
            process.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                code = process.wait(timeout=1.0)
                return 0 if asked else code
            except subprocess.TimeoutExpired:
                if asked and time.monotonic() - asked[0] > grace:
                    process.kill()
                    return process.wait() or 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stop_process(process: subprocess.Popen[str], grace: float = 30.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass(frozen=True)
class LocalNode:
    """A Ray node this machine runs: its raylet's address and the GCS (cluster) it joined."""

    ip: str
    gcs: str


def ray_processes(gcs: str, proc: Path = Path("/proc")) -> dict[int, str]:
    """pid -> program of this machine's raylet, GCS server and dashboard (`dashboard URL`) of
    the cluster at `gcs` (ip:port): SIGTERM to them ends that Ray node alone, where `ray stop`
    ends every one."""
    ip, _, port = gcs.rpartition(":")
    found: dict[int, str] = {}
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [a for a in (entry / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
        except OSError:
            continue
        if not argv:
            continue
        program = argv[0].rsplit("/", 1)[-1]
        node = raylet_node(argv)
        if node is not None and node.gcs == gcs and node.ip == ip:  # the head's raylet, not a worker joined from here
            found[int(entry.name)] = "raylet"
        elif program == "gcs_server" and f"--gcs_server_port={port}" in argv and f"--node-ip-address={ip}" in argv:
            found[int(entry.name)] = "gcs_server"
        elif any(a.endswith("/dashboard/dashboard.py") for a in argv) and f"--gcs-address={gcs}" in argv:
            dash = next((a.split("=", 1)[1] for a in argv if a.startswith("--port=")), "?")
            host = next((a.split("=", 1)[1] for a in argv if a.startswith("--host=")), "127.0.0.1")
            found[int(entry.name)] = f"dashboard http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{dash}"
    return found


def raylet_node(argv: list[str]) -> LocalNode | None:
    """The node a process is, from its argv, if it is a raylet."""
    if not argv or not argv[0].endswith("/raylet"):
        return None
    flags = dict(arg[2:].split("=", 1) for arg in argv[1:] if arg.startswith("--") and "=" in arg)
    return LocalNode(flags.get("node_ip_address", "?"), flags.get("gcs-address", flags.get("gcs_address", "?")))


def local_nodes(proc: Path = Path("/proc")) -> list[LocalNode] | None:
    """The Ray nodes this machine runs (one raylet each): what `ray stop` would stop. None:
    unknown (no /proc)."""
    if not proc.is_dir():
        return None
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        node = raylet_node([a for a in argv if a])
        if node is not None:
            found.append(node)
    return sorted(found, key=lambda n: (n.gcs, n.ip))


@dataclass(frozen=True)
class StopSummary:
    """What `ray stop` said it did: Ray processes found and stopped."""

    found: int
    stopped: int


def stop_summary(text: str) -> StopSummary | None:
    """`ray stop`'s last words, read: "Did not find any active Ray processes.", "Stopped all N
    Ray processes.", "Stopped only N out of M Ray processes ..."; None: not recognised."""
    import re

    if "Did not find any active Ray processes" in text:
        return StopSummary(0, 0)
    if m := re.search(r"Stopped all (\d+) Ray processes", text):
        return StopSummary(int(m.group(1)), int(m.group(1)))
    if m := re.search(r"Stopped only (\d+) out of (\d+) Ray processes", text):
        return StopSummary(int(m.group(2)), int(m.group(1)))
    return None


def stop(force: bool = False, timeout: float = 120.0) -> Started:
    args = ["stop", *(["--force"] if force else [])]
    try:
        done = subprocess.run([*ray_command(), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError(f"`ray stop` did not finish in {timeout:g}s", hint="run rlhf-launch down --force") from None
    return Started(done.returncode, done.stdout + done.stderr)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def failure(what: str, started: Started) -> UserError:
    text = started.output
    if "InvalidAuthToken" in text or "AuthenticationError" in text:
        return UserError(f"{what} failed: the head rejected the auth token", hint="pass the head's token with --token-file")
    if "already" in text and "running" in text:
        return UserError(
            f"{what} failed: Ray already runs on this node",
            hint="use that node (rlhf-launch status), stop only it (Ctrl-C its `up`/`join --block`, or kill -TERM its raylet), "
            "or give this one its own --node-ip-address and temp dir; `rlhf-launch down` stops every Ray on this machine",
        )
    said = [line.strip() for line in text.splitlines() if _RAISED.match(line.strip())]
    if "timed out during startup" in text or "Deadline Exceeded" in text:
        return UserError(
            f"{what} failed: the node did not register with the head's GCS in time",
            hint=(said[-1] + "\n" if said else "") + "on a loaded machine start nodes one at a time, then try again; "
            "check that the head's GCS port is reachable from this node",
        )
    return UserError(f"{what} failed (exit {started.returncode})", hint=said[-1] if said else _tail(text) or None)


# Ray's own exception line at the end of a traceback (`Exception: ...`, `ConnectionError: ...`)
_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): \S")
