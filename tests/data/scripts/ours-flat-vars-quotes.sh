#!/usr/bin/env bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# Flat-flag era (OpenRLHF <= 0.10.1), direct `python -m`: variables, defaults, arithmetic, quoting.
set -euo pipefail

MODEL=meta-llama/Llama-3.1-8B-Instruct
export RM_MODEL="OpenRLHF/Llama-3-8b-rm-700k"
: ${NODES:=2}
: "${GPUS_PER_NODE:=8}"
TOTAL_GPUS=$((NODES * GPUS_PER_NODE))
OUT_ROOT=${OUT_ROOT:-/mnt/ckpt}
RUN_NAME="ppo llama3 8b"                      # a value with spaces
SAVE_DIR="${OUT_ROOT}/${RUN_NAME// /-}"
DATA='OpenRLHF/prompt-collection-v0.1'
TEMPLATE=$'User: {}\nAssistant: '

CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m openrlhf.cli.train_ppo_ray \
    --ref_num_nodes 1 --ref_num_gpus_per_node $GPUS_PER_NODE \
    --actor_num_nodes=$NODES \
    --actor_num_gpus_per_node=${GPUS_PER_NODE} \
    --vllm_num_engines $((TOTAL_GPUS / 2)) \
    --vllm_tensor_parallel_size 2 \
    --pretrain $MODEL \
    --reward_pretrain "$RM_MODEL" \
    --save_path "$SAVE_DIR" \
    --ckpt_path "${SAVE_DIR}/ckpt" \
    --prompt_data $DATA \
    --input_key 'context_messages' \
    --input_template "$TEMPLATE" \
    --max_epochs=1 \
    --zero_stage 3 --bf16 \
    --actor_learning_rate 5e-7 \
    --use_wandb ${WANDB_KEY} \
    --wandb_run_name "$RUN_NAME" \
    --wandb_project "rlhf launch" 2>&1 | tee "train-$(date +%s).log"
