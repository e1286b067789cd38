"""FastDropout: keras.layers.Dropout drawn by the SplitMix64 kernel of ops.random.

Seeds come from a Keras SeedGenerator as in keras.layers.Dropout, so keras.utils.set_random_seed
makes runs repeatable; inside `ops.random.seeds_derived_from(seed)` they are derived from one
given seed instead (recomputed blocks draw the forward's masks; the pretraining loop's steps
draw masks fixed by the run's seed, the step and the replica, so a resumed run is exact).
"""

import keras

from xlnet_tf.modeling.ops import random as random_ops


@keras.saving.register_keras_serializable(package="xlnet_tf")
class FastDropout(keras.layers.Dropout):
  """keras.layers.Dropout (same arguments, no noise_shape) drawn as described above."""

  def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
    if noise_shape is not None:
      raise ValueError("FastDropout does not take noise_shape")
    super().__init__(rate, seed=seed, **kwargs)
    self.threshold = min(int(round(rate * random_ops.LEVELS)), random_ops.LEVELS - 1)

  def fused_arguments(self, training):
    """{dropout_threshold, dropout_seed} for a compiled region that applies this dropout
    itself (see ops.compile); {} when it is off. Draws the next seed."""
    if not training or self.threshold == 0:
      return {}
    return {"dropout_threshold": self.threshold,
            "dropout_seed": random_ops.next_seed(self.seed_generator)}

  def call(self, inputs, training=False):
    arguments = self.fused_arguments(training)
    if not arguments:
      return inputs
    return random_ops.dropout(inputs, arguments["dropout_seed"], arguments["dropout_threshold"])
