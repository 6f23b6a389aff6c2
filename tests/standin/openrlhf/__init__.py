"""A stand-in for OpenRLHF in tests (no GPUs here). Only `openrlhf.cli.train_ppo_ray` exists."""
