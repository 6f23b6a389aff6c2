#!/bin/bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# Dotted flags of OpenRLHF 0.10.2+ for `rlhf-launch import`, the trainer run directly (its ray.init()
# joins RAY_ADDRESS): --flag=value, an abbreviated flag (--ds.zero), settings with no config key
# (async training, Adam betas, sampling temperature), 2-node actor and reference.
export RAY_ADDRESS=http://10.1.0.5:8265
ROOT=/mnt/shared/rlhf
RUN=grpo-qwen3-8b

python3 -m openrlhf.cli.train_ppo_ray \
   --actor.num_nodes 2 --actor.num_gpus_per_node 8 \
   --ref.num_nodes 2 --ref.num_gpus_per_node 8 \
   --train.colocate_actor_ref \
   --vllm.num_engines 4 --vllm.tensor_parallel_size 4 --vllm.gpu_memory_utilization=0.85 \
   --actor.model_name_or_path Qwen/Qwen3-8B \
   --reward.remote_url http://10.1.0.9:5000/get_reward \
   --ckpt.output_dir ${ROOT}/${RUN} --ckpt.path ${ROOT}/${RUN}/ckpt --ckpt.save_steps 20 --ckpt.save_hf \
   --data.prompt_dataset OpenRLHF/dapo-math-17k --data.input_key prompt --data.label_key label --data.apply_chat_template \
   --data.max_len 10240 --rollout.max_new_tokens 8192 \
   --train.micro_batch_size 2 --train.batch_size 256 \
   --rollout.micro_batch_size 8 --rollout.batch_size 64 --rollout.n_samples_per_prompt 8 \
   --train.async_enable --train.async_queue_size 2 \
   --ds.zero 3 --ds.param_dtype bf16 --ds.packing_samples --actor.gradient_checkpointing_enable \
   --actor.adam.lr 1e-6 --actor.adam.betas 0.9 0.98 --algo.kl.init_coef 0.001 --algo.kl.estimator k3 \
   --algo.advantage.estimator group_norm --rollout.temperature 0.9 \
   --logger.wandb.project grpo --logger.wandb.run_name ${RUN} --logger.wandb.key "$WANDB_KEY"
