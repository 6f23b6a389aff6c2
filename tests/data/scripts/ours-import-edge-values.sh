#!/bin/bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# Values a launch config cannot hold, which `rlhf-launch import` must report: an attention implementation
# other than flash_attention_2/eager, --ref.offload without --reward.offload, --rollout.max_new_tokens left
# unset (generate up to --data.max_len), and 0 reward GPUs beside a remote reward; under `deepspeed --module`.
deepspeed --module openrlhf.cli.train_ppo_ray \
  --actor.model_name_or_path meta-llama/Llama-3.1-8B-Instruct \
  --actor.num_gpus_per_node 4 --ref.num_gpus_per_node 4 \
  --reward.remote_url http://rm:5000/get_reward \
  --reward.num_nodes 0 --reward.num_gpus_per_node 0 \
  --ds.attn_implementation sdpa \
  --ref.offload \
  --data.max_len 3072 \
  --data.prompt_dataset OpenRLHF/prompt-collection-v0.1 \
  --algo.advantage.estimator reinforce_baseline
