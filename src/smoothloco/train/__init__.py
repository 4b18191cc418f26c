"""Train layer: SHAC (ours), networks, checkpoints and the training run."""
