"""The run as an sbatch script: `cluster.nodes` nodes, one task each, the allocation living
exactly as long as the run.

What the script does, on the allocation's first node (the head):

1. The shared directory (`--shared-dir`, default `<ckpt_path>/.rlhf-launch-slurm`, on the
   storage every node sees) holds the Ray token (0600, made by `up --head`), the launcher's
   records (RLHF_LAUNCH_HOME), the run id once the run exists, and per allocation the
   address each node started Ray on.
2. `rlhf-launch up --head --block` in one job step; `rlhf-launch status --wait-nodes 1` waits
   for it (bounded, no fixed sleep); `rlhf-launch join --block` on every other node in one
   step; `status --wait-nodes N --wait-gpus N*G` waits for all of them, and on timeout the
   script names the Slurm nodes whose Ray is not alive.
3. `rlhf-launch doctor`, then `submit` (first allocation) or `resume RUN` (the run id is
   stored: a second sbatch of the script, or a requeue, continues the run from its latest
   checkpoint on the new cluster), then `rlhf-launch watch RUN` in the foreground: the run's
   supervisor, through its automatic resumes, to the run's end.
4. SIGTERM (time limit: `--signal=B:TERM@LEAD` sends it to this shell LEAD seconds early;
   scancel; preemption) runs `rlhf-launch stop RUN`. scancel signals every step at once, so
   the Ray nodes may be gone already: then `stop RUN --cluster-ended WHY` records the run and
   every live attempt STOPPED. The checkpoints are kept and the log says it was interrupted.
5. At the end the Ray nodes are stopped workers first, each by one short step that sends
   SIGTERM to its node's launcher (the pid its step wrote): the launcher stops its Ray and
   exits 0, so the node steps end cleanly (no step cancelled, no "exit code 1").
   Everything runs with the submitter's umask: the token alone is 0600 (`up` makes it so).

Pure: config, plan and options in, script text out; nothing here runs Slurm or Ray.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rlhf_launch.bringup.sizing import Sizing, sizing
from rlhf_launch.core.launch import Launch
from rlhf_launch.doctor.checks import GIB
from rlhf_launch.errors import UserError

SHARED_NAME = ".rlhf-launch-slurm"
STOP_MARGIN = 30  # seconds the lead keeps beyond the stop's own bound: the Ray nodes' stop


@dataclass(frozen=True)
class SlurmOptions:
    config: str  # what the launcher is given on the nodes: a preset name or a YAML path
    overrides: tuple[str, ...] = ()
    openrlhf_version: str | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    job_name: str | None = None
    output: str | None = None  # sbatch --output
    requeue: bool = False
    container_image: str | None = None
    container_mounts: str | None = None
    gpu_request: bool = True  # `#SBATCH --gpus-per-node` (off where GPUs come with --exclusive)
    shared_dir: str | None = None
    port: int = 6379
    dashboard_port: int = 8265
    wait_timeout: int = 600
    stop_timeout: int = 90
    signal_lead: int = 180
    launcher: tuple[str, ...] = ("rlhf-launch",)
    ray_args: tuple[str, ...] = ()
    skip_check: str = ""
    auto_resume: int = 0
    # Tests only: every node on this one machine at 127.0.0.(2+i), its Ray ports from this base.
    loopback_ports: int | None = None
    extra_sbatch: tuple[str, ...] = field(default_factory=tuple)
    # `#SBATCH --mem`: None asks for each node's whole memory (--mem=0); "plan" for the plan's
    # per-node figure; else a Slurm size (e.g. 1500G), passed on as given
    mem: str | None = None


_TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$|^\d+-\d+$")
_MEM = re.compile(r"^\d+[KMGT]?$")


def check(opts: SlurmOptions) -> None:
    """Options Slurm or the script would reject later, refused now (UserError)."""
    if opts.time is not None and not _TIME.match(opts.time):
        raise UserError(f"--time {opts.time!r} is not a Slurm time", hint="e.g. 2-00:00:00, 48:00:00 or 90 (minutes)")
    if opts.signal_lead < opts.stop_timeout + STOP_MARGIN:
        raise UserError(
            f"--signal-lead {opts.signal_lead}s leaves too little time to stop the run ({opts.stop_timeout}s) and the Ray nodes",
            hint=f"use --signal-lead {opts.stop_timeout + STOP_MARGIN} or more, or a smaller --stop-timeout",
        )
    if opts.mem is not None and opts.mem != "plan" and not _MEM.match(opts.mem):
        raise UserError(f"--mem {opts.mem!r} is not a Slurm memory size", hint="e.g. --mem 1500G, or --mem plan for the plan's figure")
    if opts.container_mounts and not opts.container_image:
        raise UserError("--container-mounts needs --container-image")
    for port in (opts.port, opts.dashboard_port):
        if not 0 < port < 65536:
            raise UserError(f"port {port} is out of range")


def shared_dir(launch: Launch, opts: SlurmOptions) -> str:
    return opts.shared_dir or str(Path(launch.cfg.checkpoint.ckpt_path) / SHARED_NAME)


def _array(values: tuple[str, ...] | list[str]) -> str:
    return "(" + " ".join(shlex.quote(v) for v in values) + ")"


def mem_line(size: Sizing, mem: str | None) -> str:
    """`--mem` per node: 0 (the whole node: --exclusive alone gives a job only the memory it
    asks for), the plan's figure, or the user's size."""
    if mem is None:
        return "--mem=0"
    if mem == "plan":
        return f"--mem={size.memory_gib}G"
    return f"--mem={mem}"


def _header(launch: Launch, opts: SlurmOptions) -> list[str]:
    cfg = launch.cfg
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={opts.job_name or 'rlhf-' + cfg.name}",
        f"#SBATCH --nodes={cfg.cluster.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH {mem_line(sizing(launch), opts.mem)}",
    ]
    if opts.gpu_request:
        lines.append(f"#SBATCH --gpus-per-node={cfg.cluster.gpus_per_node}")
    # B: the batch shell alone gets SIGTERM this long before the time limit: time to stop the run
    lines.append(f"#SBATCH --signal=B:TERM@{opts.signal_lead}")
    for flag, value in (("partition", opts.partition), ("account", opts.account), ("time", opts.time), ("output", opts.output)):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    if opts.requeue:
        lines += ["#SBATCH --requeue", "#SBATCH --open-mode=append"]
    lines += [f"#SBATCH {extra}" for extra in opts.extra_sbatch]
    return lines


def _parameters(launch: Launch, opts: SlurmOptions) -> list[str]:
    cfg = launch.cfg
    q = shlex.quote
    config_args = [opts.config, *opts.overrides]
    if opts.openrlhf_version:
        config_args += ["--openrlhf-version", opts.openrlhf_version]
    container: list[str] = []
    if opts.container_image:
        container = [f"--container-image={opts.container_image}"]
    return [
        f"CONFIG_ARGS={_array(config_args)}",
        f"NODES={cfg.cluster.nodes}",
        f"GPUS_PER_NODE={cfg.cluster.gpus_per_node}",
        f"SHARED={q(shared_dir(launch, opts))}",
        f"RAY_PORT={opts.port}",
        f"DASH_PORT={opts.dashboard_port}",
        f"WAIT_TIMEOUT={opts.wait_timeout}",
        f"STOP_TIMEOUT={opts.stop_timeout}",
        f"LAUNCHER={_array(opts.launcher)}",
        f"RAY_ARGS={_array(_ray_args(launch, opts))}",
        f"CONTAINER={_array(container)}",
        f"CONTAINER_MOUNTS={q(opts.container_mounts or '')}",
        f"SKIP_CHECK={q(opts.skip_check)}",
        f"AUTO_RESUME={opts.auto_resume}",
        f"LOOPBACK_PORTS={opts.loopback_ports if opts.loopback_ports is not None else ''!s}",
    ]


def _ray_args(launch: Launch, opts: SlurmOptions) -> tuple[str, ...]:
    """`ray start` arguments of every node: with the plan's --mem, an object store that fits it
    (Ray's default takes 30% of the memory it sees)."""
    if opts.mem != "plan" or any(a.startswith("--object-store-memory") for a in opts.ray_args):
        return opts.ray_args
    return (*opts.ray_args, f"--object-store-memory={sizing(launch).object_store_gib * GIB}")


# The script's body: bash only, its parameters set above it. `set -e` is off on purpose: the
# trap and the clean-up must run whatever failed.
BODY = r"""
set -uo pipefail
# No umask here: Ray's processes, and so the trainer, inherit this shell's, and a team reads its
# checkpoints and exports. Only the shared directory (the token's) is this user's alone.

say() { printf '[rlhf-launch slurm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

SHARED=$(realpath -m -- "$SHARED")
mkdir -p "$SHARED/home" && chmod 700 "$SHARED"
export RLHF_LAUNCH_HOME="$SHARED/home"  # the run's records, where every allocation finds them
TOKEN="$SHARED/auth_token"              # made by `up --head` (mode 0600 whatever the umask)
RUN_FILE="$SHARED/run_id"
JOBDIR="$SHARED/slurm-${SLURM_JOB_ID}-${SLURM_RESTART_COUNT:-0}"
mkdir -p "$JOBDIR/nodes"
ADDRESS="http://127.0.0.1:$DASH_PORT"  # the dashboard, from this (the head) node
# Ray drains a node for 30 s on SIGTERM; the script stops the run itself before it stops a node.
export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="${RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S:-0}"
HEAD_NODE="$SLURMD_NODENAME"
RUN_ID=""
HEAD_PID=""
WORKERS_PID=""
WATCH_PID=""
ENDING=""
if [ ${#CONTAINER[@]} -gt 0 ]; then  # pyxis/enroot: the shared directory at the same path inside
  # one container per allocation and node, made by the first step and reused by the next ones
  CONTAINER+=("--container-name=rlhf-launch-$SLURM_JOB_ID" "--container-mounts=${CONTAINER_MOUNTS:+$CONTAINER_MOUNTS,}$SHARED:$SHARED")
fi

node_index() {  # this node's place in the allocation; 0 is the head
  scontrol show hostnames "$SLURM_JOB_NODELIST" | grep -nxF -- "$SLURMD_NODENAME" | cut -d: -f1 | awk '{print $1 - 1}'
}

node_ip() {  # the address Ray takes on this node: the source address of its default route
  if [ -n "$LOOPBACK_PORTS" ]; then
    echo "127.0.0.$((2 + $(node_index)))"
    return
  fi
  local ip
  ip=$(ip -4 -o route get 8.8.8.8 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  [ -n "$ip" ] || ip=$(hostname -I | awk '{print $1}')
  echo "$ip"
}

ray_node() {  # ray_node head | ray_node join HEAD_IP: this node's Ray, in the foreground
  local ip extra=() base
  echo $$ >"$JOBDIR/nodes/$SLURMD_NODENAME.pid"  # the launcher's, after exec: what stop_step signals
  ip=$(node_ip)
  if [ -n "$LOOPBACK_PORTS" ]; then  # tests: every node on one machine, each its own ports
    base=$((LOOPBACK_PORTS + 10 * $(node_index)))
    extra=(--dashboard-agent-listen-port "$base" --metrics-export-port "$((base + 1))"
      --runtime-env-agent-port "$((base + 2))" --dashboard-agent-grpc-port "$((base + 3))")
    [ "$1" = head ] && extra+=(--ray-client-server-port "$((base + 4))")
    # one node at a time: nodes that start together on one machine race for Ray's socket names
    [ "$1" = join ] && "${LAUNCHER[@]}" status --address "$ADDRESS" --token-file "$TOKEN" --wait-nodes "$(node_index)" >/dev/null
  fi
  printf '%s\n' "$ip" >"$JOBDIR/nodes/$SLURMD_NODENAME"
  if [ "$1" = head ]; then
    exec "${LAUNCHER[@]}" up --head --block --quiet --node-ip-address "$ip" --port "$RAY_PORT" --dashboard-port "$DASH_PORT" \
      --num-gpus "$GPUS_PER_NODE" --token-file "$TOKEN" -- "${RAY_ARGS[@]}" "${extra[@]}"
  fi
  exec "${LAUNCHER[@]}" join "$2" --block --quiet --node-ip-address "$ip" --port "$RAY_PORT" \
    --num-gpus "$GPUS_PER_NODE" --token-file "$TOKEN" -- "${RAY_ARGS[@]}" "${extra[@]}"
}

node_step() {  # node_step SRUN_ARGS... -- ROLE ARGS: ray_node in a job step named rlhf-ray-ROLE (in the container, if any)
  local srun_args=()
  while [ "$1" != -- ]; do srun_args+=("$1"); shift; done
  shift
  local vars
  vars=$(declare -p LAUNCHER RAY_ARGS GPUS_PER_NODE RAY_PORT DASH_PORT TOKEN JOBDIR LOOPBACK_PORTS ADDRESS)
  srun --overlap --ntasks-per-node=1 --kill-on-bad-exit=0 --job-name="rlhf-ray-$1" "${srun_args[@]}" "${CONTAINER[@]}" bash -c \
    "$vars; $(declare -f node_index node_ip ray_node); ray_node $*"
}

if [ ${#CONTAINER[@]} -gt 0 ]; then  # the launcher, on this node (in the container, if any)
  LAUNCH=(srun --overlap --nodes=1 --ntasks=1 -w "$HEAD_NODE" "${CONTAINER[@]}" "${LAUNCHER[@]}")
else
  LAUNCH=("${LAUNCHER[@]}")
fi
L() { "${LAUNCH[@]}" "$@"; }

CLUSTER=(--address "$ADDRESS" --token-file "$TOKEN")

missing_nodes() {  # the Slurm nodes whose Ray is not alive, by name
  local alive host ip
  alive=$(L status "${CLUSTER[@]}" --json 2>/dev/null)
  for host in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
    if [ ! -s "$JOBDIR/nodes/$host" ]; then
      echo "  $host: its Ray node did not start (see this job's log)"
      continue
    fi
    ip=$(cat "$JOBDIR/nodes/$host")
    grep -qF "\"ip\": \"$ip\"" <<<"$alive" || echo "  $host: Ray on $ip is not alive"
  done
}

wait_nodes() {  # wait_nodes N GPUS: bounded; names the missing nodes when it gives up
  if ! L status "${CLUSTER[@]}" --wait-nodes "$1" --wait-gpus "$2" --timeout "$WAIT_TIMEOUT" >/dev/null; then
    say "not every node came up within ${WAIT_TIMEOUT}s; missing:"
    missing_nodes >&2
    return 1
  fi
}

wait_gone() {  # wait_gone PID...: until every one ended, STOP_TIMEOUT at most for all
  [ $# -gt 0 ] || return 0
  # shellcheck disable=SC2016 # expanded by the inner bash
  timeout "$STOP_TIMEOUT" bash -c 'for pid; do tail --pid="$pid" -f /dev/null; done' _ "$@"
}

stop_step() {  # stop_step SRUN_ARGS...: SIGTERM to the launcher of each node's Ray (it stops its Ray and exits 0)
  # fails where a node has no launcher to signal (its step not started yet, or ended) or no step could start
  # (an ending allocation): stop_nodes then signals the node steps themselves; hence its errors unshown
  # shellcheck disable=SC2016 # expanded on the node
  srun --overlap --ntasks-per-node=1 --kill-on-bad-exit=0 --job-name=rlhf-ray-stop "$@" "${CONTAINER[@]}" bash -c \
    'pid=$(cat "$0/nodes/$SLURMD_NODENAME.pid" 2>/dev/null) && kill -TERM "$pid" 2>/dev/null' "$JOBDIR" 2>/dev/null
}

stop_nodes() {  # end the Ray nodes this script started, the workers first, each step ending with exit 0
  local steps pid
  if [ -n "$WORKERS_PID" ] && kill -0 "$WORKERS_PID" 2>/dev/null; then
    stop_step --nodes=$((NODES - 1)) --ntasks=$((NODES - 1)) --exclude="$HEAD_NODE" && wait_gone $WORKERS_PID
  fi
  if [ -n "$HEAD_PID" ] && kill -0 "$HEAD_PID" 2>/dev/null; then
    stop_step --nodes=1 --ntasks=1 -w "$HEAD_NODE" && wait_gone $HEAD_PID
  fi
  local left=""
  for pid in $WORKERS_PID $HEAD_PID; do kill -0 "$pid" 2>/dev/null && left=1; done
  [ -n "$left" ] || return 0
  say "the Ray node steps did not end on their own: SIGTERM to the steps"
  steps=$(squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" 2>/dev/null | awk '$2 ~ /^rlhf-ray-(head|join)$/ {print $1}')
  if [ -n "$steps" ]; then
    # shellcheck disable=SC2086 # one word per step
    scancel --signal=TERM $steps 2>/dev/null
  else  # no step list: srun ends its step itself on SIGTERM (Slurm's own step termination)
    for pid in $WORKERS_PID $HEAD_PID; do kill -TERM "$pid" 2>/dev/null; done
  fi
  wait_gone $WORKERS_PID $HEAD_PID
}

finish() {  # finish CODE: the Ray nodes down, then exit
  stop_nodes
  say "done (exit $1)"
  exit "$1"
}

on_term() {
  [ -n "$ENDING" ] && return
  ENDING=1
  say "SIGTERM: Slurm ends allocation $SLURM_JOB_ID (time limit, scancel or preemption)"
  [ -n "$WATCH_PID" ] && kill -TERM "$WATCH_PID" 2>/dev/null
  if [ -n "$RUN_ID" ]; then
    # the run stopped through Ray (time limit, preemption: Ray still runs); after scancel Slurm
    # signals every step at once and Ray is gone: the record says the allocation ended it
    if ! L stop "$RUN_ID" "${CLUSTER[@]}" --timeout "$STOP_TIMEOUT"; then
      say "the stop through Ray did not complete (after scancel Slurm ends every step, Ray too): the run ends with the allocation"
      L stop "$RUN_ID" --cluster-ended \
        "slurm job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) ended: scancel, time limit or preemption"
    fi
    printf '%s slurm job %s (restart %s): interrupted by SIGTERM; run %s stopped, checkpoints kept\n' \
      "$(date -Is)" "$SLURM_JOB_ID" "${SLURM_RESTART_COUNT:-0}" "$RUN_ID" >>"$SHARED/interrupted.log"
    say "run $RUN_ID interrupted: $(L runs "$RUN_ID" --print-status 2>/dev/null) in its record, its checkpoints kept;" \
      "sbatch this script again to resume it"
  fi
  finish 143
}
trap on_term TERM INT

say "allocation $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}): $SLURM_JOB_NODELIST, head $HEAD_NODE"
HEAD_IP=$(node_ip)
node_step --nodes=1 --ntasks=1 -w "$HEAD_NODE" -- head &
HEAD_PID=$!
wait_nodes 1 0 || finish 1
if [ "$NODES" -gt 1 ]; then
  node_step --nodes=$((NODES - 1)) --ntasks=$((NODES - 1)) --exclude="$HEAD_NODE" -- join "$HEAD_IP" &
  WORKERS_PID=$!
fi
wait_nodes "$NODES" $((NODES * GPUS_PER_NODE)) || finish 1
say "$NODES nodes, $((NODES * GPUS_PER_NODE)) GPUs alive; head $HEAD_IP:$RAY_PORT"

SKIP=()
[ -n "$SKIP_CHECK" ] && SKIP=(--skip-check "$SKIP_CHECK")
L doctor "${CONFIG_ARGS[@]}" "${CLUSTER[@]}" "${SKIP[@]}" || finish 1

if [ -s "$RUN_FILE" ]; then  # a later allocation, or a requeue: continue the run
  RUN_ID=$(cat "$RUN_FILE")
  STATUS=$(L runs "$RUN_ID" "${CLUSTER[@]}" --print-status) || finish 1  # the launcher's word on the run
  if [ "$STATUS" = SUCCEEDED ]; then
    say "run $RUN_ID already SUCCEEDED: nothing to do"
    finish 0
  fi
  say "resuming run $RUN_ID from its latest checkpoint"
  L resume "$RUN_ID" "${CLUSTER[@]}" "${SKIP[@]}" || finish 1
else
  if compgen -G "$RLHF_LAUNCH_HOME/runs/*.json" >/dev/null; then
    say "$RLHF_LAUNCH_HOME holds runs but $RUN_FILE is missing: write the run id there to resume it"
    finish 2
  fi
  L submit "${CONFIG_ARGS[@]}" "${CLUSTER[@]}" "${SKIP[@]}" --auto-resume "$AUTO_RESUME"
  CODE=$?
  if compgen -G "$RLHF_LAUNCH_HOME/runs/*.json" >/dev/null; then  # recorded: the next allocation resumes it
    RUN_ID=$(basename "$(ls "$RLHF_LAUNCH_HOME"/runs/*.json | head -n1)" .json)
    printf '%s\n' "$RUN_ID" >"$RUN_FILE"
    say "run $RUN_ID recorded; its id is kept in $RUN_FILE"
  fi
  [ "$CODE" -eq 0 ] || finish 1
fi

"${LAUNCH[@]}" watch "$RUN_ID" "${CLUSTER[@]}" &  # the process itself: the trap ends it
WATCH_PID=$!
wait "$WATCH_PID"
CODE=$?
WATCH_PID=""
finish "$CODE"
"""


def memory_comment(size: Sizing, mem: str | None) -> list[str]:
    """What the plan needs of each node's memory, for whoever signs the script."""
    lines = [
        "# Host memory the plan needs (core/memory's estimate: offloaded optimizer states, sleeping vLLM weights):",
        f"#   the plan's nodes: {size.per_node() or 'none estimated'}",
        f"#   Ray may put the busiest plan node's roles on any Slurm node, so each needs {size.memory_gib} GiB:",
        f"#   {size.why()}",
    ]
    if mem is None:
        lines.append("#   --mem=0: the whole memory of each node (--exclusive alone gives only the memory asked for);")
        lines.append(f"#   `rlhf-launch slurm --mem plan` asks for --mem={size.memory_gib}G instead")
    elif mem == "plan":
        lines.append(f"#   --mem={size.memory_gib}G: the plan's figure; Ray's object store set to {size.object_store_gib} GiB within it")
    else:
        lines.append(f"#   --mem={mem}: as given (--mem); the plan's figure is {size.memory_gib}G")
    return lines


def render(launch: Launch, opts: SlurmOptions) -> str:
    """The sbatch script for `launch` (its config and plan) with `opts`."""
    check(opts)
    size = sizing(launch)
    parts = [
        *_header(launch, opts),
        "#",
        f"# rlhf-launch slurm: {launch.cfg.name}, {launch.cfg.cluster.nodes} node{'s' if launch.cfg.cluster.nodes != 1 else ''} "
        f"x {launch.cfg.cluster.gpus_per_node} GPUs "
        f"(the plan uses {launch.plan.gpus_required})",
        *memory_comment(size, opts.mem),
        "# Submit it again (or let Slurm requeue it) to resume the run from its latest checkpoint.",
        "",
        *_parameters(launch, opts),
        BODY.rstrip("\n"),
        "",
    ]
    return "\n".join(parts)
