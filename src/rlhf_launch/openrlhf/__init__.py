"""What rlhf-launch knows about OpenRLHF's trainer, per release: flag sets as data and the dialect."""
