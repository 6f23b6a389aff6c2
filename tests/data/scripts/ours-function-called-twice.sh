#!/usr/bin/env bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# A two-model sweep: one trainer command in a function the script calls twice (flat flags, ray job submit).
set -euo pipefail

DATA=OpenRLHF/prompt-collection-v0.1

train() {
  local model="$1"
  local nodes="$2"
  ray job submit --address="http://127.0.0.1:8265" \
    --runtime-env-json='{"working_dir": "/openrlhf"}' \
    -- python3 -m openrlhf.cli.train_ppo_ray \
    --ref_num_nodes "$nodes" \
    --ref_num_gpus_per_node 8 \
    --actor_num_nodes "$nodes" \
    --actor_num_gpus_per_node 8 \
    --vllm_num_engines $((nodes * 4)) \
    --vllm_tensor_parallel_size 2 \
    --colocate_all_models \
    --vllm_gpu_memory_utilization 0.6 \
    --advantage_estimator group_norm \
    --pretrain "$model" \
    --remote_rm_url http://reward.internal:5000/get_reward \
    --save_path "/ckpt/${model##*/}" \
    --micro_train_batch_size 4 \
    --train_batch_size 128 \
    --micro_rollout_batch_size 8 \
    --rollout_batch_size 128 \
    --n_samples_per_prompt 8 \
    --max_len 4096 \
    --zero_stage 3 \
    --param_dtype bf16 \
    --actor_learning_rate 5e-7 \
    --prompt_data "$DATA" \
    --input_key context_messages \
    --apply_chat_template \
    --packing_samples \
    --gradient_checkpointing \
    --vllm_enable_sleep \
    --deepspeed_enable_sleep
}

train Qwen/Qwen2.5-7B-Instruct 1
train Qwen/Qwen2.5-32B-Instruct 2
