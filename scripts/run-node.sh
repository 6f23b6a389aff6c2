#!/usr/bin/env bash
# Start one node of an OpenRLHF Ray cluster in the rlhf-launch image.
#
#   scripts/run-node.sh head   [options]
#   scripts/run-node.sh worker HEAD_IP [options]
#
# The container gets what multi-node training needs: every GPU, the host network (NCCL
# and Ray talk node to node), a large /dev/shm, unlimited locked memory and the
# InfiniBand devices when the node has them, and the shared checkpoint directory at the
# same path on every node. Inside, `rlhf-launch up --head` or `join` runs in the
# foreground with token auth on; the head's token lives in ~/.ray on the host (mounted at
# /ray-auth), from where you copy it to the workers. `docker exec rlhf-head rlhf-launch ...`
# finds it through RAY_AUTH_TOKEN_PATH.
set -euo pipefail

usage() {
  cat <<'TXT'
usage: scripts/run-node.sh head [options]
       scripts/run-node.sh worker HEAD_IP [options]

options:
  --image IMAGE          image to run (default: $RLHF_LAUNCH_IMAGE or rlhf-launch:0.11.2)
  --name NAME            container name (default: rlhf-head / rlhf-worker)
  --num-gpus N           GPUs Ray offers on this node (default: all the container sees)
  --port PORT            Ray GCS port (default 6379)
  --dashboard-port PORT  dashboard / job API port on the head (default 8265)
  --shm-size SIZE        /dev/shm size, 10g or more (default 32g)
  --ckpt-dir DIR         shared checkpoint directory, mounted at the same path (default /mnt/shared)
  --token-dir DIR        host directory with the Ray token (default ~/.ray)
  --ib-hca HCA           NCCL_IB_HCA, e.g. mlx5_0,mlx5_1 (implies InfiniBand)
  --socket-ifname IF     NCCL_SOCKET_IFNAME, e.g. ib0 or eth0
  --ib-devices PATH      InfiniBand device directory, or "none" (default: /dev/infiniband if present)
  --sys-admin            add --cap-add=SYS_ADMIN (only for tools that need it, e.g. nsys profiling)
  --dry-run              print the docker command instead of running it
  -h, --help             this help
TXT
}

die() {
  echo "run-node.sh: $*" >&2
  echo "run 'scripts/run-node.sh --help' for usage" >&2
  exit 2
}

[[ $# -ge 1 ]] || { usage >&2; exit 2; }
role="$1"
shift
case "$role" in
  head) head_ip="" ;;
  worker)
    [[ $# -ge 1 && "$1" != -* ]] || die "worker needs the head's IP: scripts/run-node.sh worker HEAD_IP"
    head_ip="$1"
    shift
    ;;
  -h | --help) usage; exit 0 ;;
  *) die "first argument must be 'head' or 'worker', not '$role'" ;;
esac

image="${RLHF_LAUNCH_IMAGE:-rlhf-launch:0.11.2}"
name="rlhf-$role"
num_gpus=""
port=6379
dashboard_port=8265
shm_size="32g"
ckpt_dir="/mnt/shared"
token_dir="${HOME}/.ray"
ib_hca=""
socket_ifname=""
ib_devices="auto"
sys_admin=0
dry_run=0

need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) need_value "$@"; image="$2"; shift 2 ;;
    --name) need_value "$@"; name="$2"; shift 2 ;;
    --num-gpus) need_value "$@"; num_gpus="$2"; shift 2 ;;
    --port) need_value "$@"; port="$2"; shift 2 ;;
    --dashboard-port) need_value "$@"; dashboard_port="$2"; shift 2 ;;
    --shm-size) need_value "$@"; shm_size="$2"; shift 2 ;;
    --ckpt-dir) need_value "$@"; ckpt_dir="$2"; shift 2 ;;
    --token-dir) need_value "$@"; token_dir="$2"; shift 2 ;;
    --ib-hca) need_value "$@"; ib_hca="$2"; shift 2 ;;
    --socket-ifname) need_value "$@"; socket_ifname="$2"; shift 2 ;;
    --ib-devices) need_value "$@"; ib_devices="$2"; shift 2 ;;
    --sys-admin) sys_admin=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1'" ;;
  esac
done

[[ -z "$num_gpus" || "$num_gpus" =~ ^[0-9]+$ ]] || die "--num-gpus must be a number, not '$num_gpus'"
[[ "$port" =~ ^[0-9]+$ ]] || die "--port must be a number, not '$port'"
[[ "$dashboard_port" =~ ^[0-9]+$ ]] || die "--dashboard-port must be a number, not '$dashboard_port'"
[[ "$shm_size" =~ ^[0-9]+[gG]$ ]] || die "--shm-size must be in gigabytes, e.g. 32g (not '$shm_size')"
(( ${shm_size%[gG]} >= 10 )) || die "--shm-size $shm_size is too small for NCCL and vLLM: use 10g or more"
[[ "$ckpt_dir" == /* ]] || die "--ckpt-dir must be an absolute path (the same on every node), not '$ckpt_dir'"
if [[ "$role" == worker && ! -f "$token_dir/auth_token" && $dry_run -eq 0 ]]; then
  die "no Ray token at $token_dir/auth_token: copy it from the head (scp HEAD:~/.ray/auth_token $token_dir/)"
fi

cmd=(docker run --detach --name "$name" --gpus all --network host
  --shm-size "$shm_size" --ulimit memlock=-1 --ulimit stack=67108864
  --volume "$ckpt_dir:$ckpt_dir" --volume "$token_dir:/ray-auth"
  --env RAY_AUTH_TOKEN_PATH=/ray-auth/auth_token)

if [[ "$ib_devices" == auto ]]; then
  ib_devices=""
  [[ -d /dev/infiniband ]] && ib_devices="/dev/infiniband"
elif [[ "$ib_devices" == none ]]; then
  ib_devices=""
fi
if [[ -n "$ib_devices" ]]; then
  # RDMA needs the verbs devices and the right to pin memory.
  cmd+=(--device "$ib_devices" --cap-add IPC_LOCK)
fi
(( sys_admin )) && cmd+=(--cap-add SYS_ADMIN)

cmd+=("$image" rlhf-launch)
if [[ "$role" == head ]]; then
  cmd+=(up --head --block --port "$port" --dashboard-port "$dashboard_port")
else
  cmd+=(join "$head_ip" --block --port "$port")
fi
cmd+=(--token-file /ray-auth/auth_token)
[[ -n "$num_gpus" ]] && cmd+=(--num-gpus "$num_gpus")
[[ -n "$ib_hca" ]] && cmd+=(--ib-hca "$ib_hca")
[[ -n "$socket_ifname" ]] && cmd+=(--socket-ifname "$socket_ifname")

if (( dry_run )); then
  printf '%q ' "${cmd[@]}"
  printf '\n'
  exit 0
fi

mkdir -p "$token_dir"
chmod 700 "$token_dir"
"${cmd[@]}"
echo "started $name; follow it with: docker logs -f $name"
if [[ "$role" == head ]]; then
  echo "the join line for workers appears in: docker logs $name"
fi
