"""Training: optimizer and schedules, strategies, the pretraining loop."""
