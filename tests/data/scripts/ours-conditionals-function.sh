#!/usr/bin/env bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# A case, an if, a loop and a function around the trainer call (flat flags, `python3 -m`).
set -eo pipefail

MODE=${MODE:-grpo}
MODEL_PATH=/models/Qwen2.5-7B-Instruct/
NNODES=2
EXTRA_ARGS=()

case "$MODE" in
  ppo)
    ESTIMATOR=gae
    ;;
  grpo|reinforce_baseline)
    ESTIMATOR=group_norm
    ;;
esac

if [[ -n "${RESUME:-}" ]]; then
  EXTRA_ARGS+=(--load_checkpoint)
fi

for node in $(seq 1 "$NNODES"); do
  echo "node $node"
done

launch() {
  local tag="$1"
  local model="${MODEL_PATH%/}"
  python3 -m openrlhf.cli.train_ppo_ray \
    --actor_num_nodes $NNODES \
    --actor_num_gpus_per_node 8 \
    --pretrain "$model" \
    --advantage_estimator "${ESTIMATOR:-group_norm}" \
    --save_path "/ckpt/${model##*/}-$tag" \
    "${EXTRA_ARGS[@]}" \
    --wandb_run_name "${tag^^}"
}

launch "$MODE" 2>&1 | tee launch.log
