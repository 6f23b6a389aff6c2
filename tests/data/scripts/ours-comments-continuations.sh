#!/bin/bash
# Source: written for rlhf-launch's tests (not copied from any repository; Apache-2.0 like the project).
# Comments in and around a continued command, tab indentation, and an unquoted variable that splits.
# python3 -m openrlhf.cli.train_ppo_ray --pretrain commented/out   <- a comment, not a call

ARGS="--zero_stage 3 --bf16"   # unquoted below, so it becomes three arguments

python3 -m openrlhf.cli.train_ppo_ray \
	--pretrain OpenRLHF/Llama-3-8b-sft-mixture \
	--reward_pretrain OpenRLHF/Llama-3-8b-rm-mixture `# the reward model` \
	--micro_train_batch_size 8 $(: per GPU) \
	$ARGS \
	--save_path /tmp/ckpt \
	# --load_checkpoint \
	--max_epochs 1 \
	--actor_learning_rate 5e-7

# bash ends the command at the comment line above, so `--max_epochs 1 --actor_learning_rate 5e-7`
# run as a separate (failing) command and never reach the trainer.
#   --adam_offload \
