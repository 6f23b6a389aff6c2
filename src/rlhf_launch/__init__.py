"""rlhf-launch: get an OpenRLHF PPO run onto a multi-node Ray GPU cluster, correctly, and keep it running."""

__version__ = "0.1.0"
