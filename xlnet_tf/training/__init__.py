"""Training: AdamW with XLNet's schedules and per-layer rates, strategy selection."""

from xlnet_tf.training.optimization import WarmupLinearDecay, XLNetAdamW, create_optimizer
from xlnet_tf.training.strategy import create_strategy

__all__ = ["WarmupLinearDecay", "XLNetAdamW", "create_optimizer", "create_strategy"]
