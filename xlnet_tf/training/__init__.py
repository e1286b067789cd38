"""Training: the options every run shares (optimizer, runtime), AdamW with XLNet's schedules and
per-layer rates, strategy selection."""

from xlnet_tf.training.optimization import WarmupLinearDecay, XLNetAdamW, create_optimizer
from xlnet_tf.training.options import OptimizerOptions, RuntimeOptions
from xlnet_tf.training.strategy import create_strategy

__all__ = ["OptimizerOptions", "RuntimeOptions", "WarmupLinearDecay", "XLNetAdamW",
           "create_optimizer", "create_strategy"]
