#!/bin/bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# Dotted-flag era (OpenRLHF >= 0.10.2) submitted with `ray job submit` to a remote cluster:
# runtime-env JSON with a spliced variable and env_vars, a quoted array, ANSI-C quoting, a heredoc.
set -x

HEAD_IP=10.0.0.1
export RAY_ADDRESS="http://${HEAD_IP}:8265"
WORKDIR=/openrlhf

cat > /dev/null <<EOF_NOTE
This here-document mentions python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path x
and must not be read as a command.
EOF_NOTE

PLACEMENT=(
  --ref.num_nodes 1
  --ref.num_gpus_per_node 8   # the reference model gets its own node
  --actor.num_nodes 1
  --actor.num_gpus_per_node 8
  --vllm.num_engines 4
  --vllm.tensor_parallel_size 2
)

ray job submit --address="http://${HEAD_IP}:8265" \
  --runtime-env-json='{"working_dir": "'"${WORKDIR}"'", "env_vars": {"NCCL_DEBUG": "WARN", "VLLM_USE_V1": "1"}}' \
  --no-wait \
  -- python3 -m openrlhf.cli.train_ppo_ray \
  "${PLACEMENT[@]}" \
  --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct \
  --reward.remote_url http://10.0.0.2:5000/get_reward \
  --ckpt.output_dir=/openrlhf/ckpt/qwen-grpo \
  --data.prompt_dataset "OpenRLHF/prompt-collection-v0.1" \
  --data.input_template $'<|user|>\n{}\n<|assistant|>\n' \
  --algo.advantage.estimator group_norm \
  --logger.wandb.key xxxxx \
  --logger.wandb.run_name "qwen grpo (run 1)"
