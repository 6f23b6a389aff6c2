#!/bin/bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# Flat flags of OpenRLHF 0.9.8 .. 0.10.1 (--param_dtype, --max_len/--max_new_tokens) for `rlhf-launch import`:
# abbreviated flags, a flag given twice, flags 0.10.2 splits per role (--l2, --lr_warmup_ratio,
# --ref_reward_offload), and the W&B key from the environment, in the flags and in the runtime env.
set -euo pipefail

MODEL=Qwen/Qwen2.5-7B-Instruct
SAVE=/mnt/shared/ckpt/qwen-ppo
GPUS=4

ray job submit --address="http://127.0.0.1:8265" \
  --runtime-env-json='{"working_dir": "/openrlhf", "pip": ["math-verify"], "env_vars": {"NCCL_DEBUG": "WARN", "WANDB_API_KEY": "'"$WANDB_KEY"'"}}' \
  -- python3 -m openrlhf.cli.train_ppo_ray \
  --ref_num_nodes 1 --ref_num_gpus_per_node ${GPUS} \
  --reward_num_nodes 1 --reward_num_gpus_per_node ${GPUS} \
  --critic_num_nodes 1 --critic_num_gpus_per_node ${GPUS} \
  --actor_num_nodes 1 --actor_num_gpus ${GPUS} \
  --vllm_num_engines 2 --vllm_tensor_parallel_size 2 --vllm_gpu_mem 0.6 \
  --colocate_critic_reward --colocate_actor_ref \
  --pretrain ${MODEL} \
  --reward_pretrain OpenRLHF/Llama-3-8b-rm-mixture \
  --critic_pretrain ${MODEL} \
  --save_path ${SAVE} --ckpt_path ${SAVE}/ckpt --save_steps 50 --max_ckpt_num 2 --load_checkpoint \
  --micro_train_batch_size 8 --train_batch_size 128 \
  --micro_rollout_batch_size 16 --rollout_batch_size 512 --n_samples_per_prompt 4 \
  --max_len 6144 --max_new_tokens 4096 \
  --zero_stage 3 --param_dtype bf16 --attn_implementation flash_attention_2 \
  --actor_learning_rate 5e-7 --critic_learning_rate 9e-6 --l2 0.01 --lr_warmup_ratio 0.05 \
  --init_kl_coef 0.01 --kl_estimator k3 --eps_clip_low_high 0.2 0.28 \
  --prompt_data OpenRLHF/prompt-collection-v0.1 --input_key context_messages --apply_chat_template \
  --ref_reward_offload --adam_offload --gradient_checkpointing --packing_samples \
  --micro_train_batch_size 4 \
  --use_wandb "$WANDB_KEY" --wandb_project qwen-ppo
