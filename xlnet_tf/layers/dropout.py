"""Dropout that compiles to one cheap kernel on CPU, with or without XLA around it.

keras.layers.Dropout draws with the generator's "auto_select" algorithm, which XLA's CPU
backend runs very slowly (measured here: 790 ms for 5.3M draws against 3.7 ms with ThreeFry;
see docs/benchmarks.md); under XLA it was the largest cost of a training step. This layer draws
32-bit ThreeFry words in a function that XLA always compiles (inside an XLA step it is inlined;
in a plain TensorFlow graph, e.g. bfloat16 on CPU, it becomes one fused cluster), keeps an
element when its word is >= round(rate * 2^32), and scales kept elements by the exact inverse
of that keep probability. Seeds come from a Keras SeedGenerator as in keras.layers.Dropout, so
keras.utils.set_random_seed makes runs repeatable.
"""

import keras
import tensorflow as tf

from xlnet_tf.layers.compiled import compiled

_LEVELS = 1 << 32


@keras.saving.register_keras_serializable(package="xlnet_tf")
class FastDropout(keras.layers.Dropout):
  """keras.layers.Dropout (same arguments, no noise_shape) drawn as described above."""

  def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
    if noise_shape is not None:
      raise ValueError("FastDropout does not take noise_shape")
    super().__init__(rate, seed=seed, **kwargs)
    self.threshold = min(int(round(rate * _LEVELS)), _LEVELS - 1)

  def fused_arguments(self, training):
    """{dropout_threshold, dropout_seed} for a compiled region that applies this dropout
    itself (see layers.compiled); {} when it is off. Draws the next seed."""
    if not training or self.threshold == 0:
      return {}
    return {"dropout_threshold": self.threshold,
            "dropout_seed": tf.cast(self.seed_generator.next(), tf.int64)}

  def call(self, inputs, training=False):
    arguments = self.fused_arguments(training)
    if not arguments:
      return inputs
    return dropout(inputs, arguments["dropout_seed"], arguments["dropout_threshold"])


@compiled
def dropout(inputs, seed, threshold: int):
  """Zeroes each element with probability threshold / 2^32 and scales the rest to keep the
  mean. seed: int64 [2] for the stateless ThreeFry generator."""
  words = tf.random.stateless_uniform(tf.shape(inputs), seed, minval=None, maxval=None,
                                      dtype=tf.uint32, alg="threefry")
  scale = tf.cast(_LEVELS / (_LEVELS - threshold), inputs.dtype)
  return tf.where(words >= tf.constant(threshold, tf.uint32), inputs * scale,
                  tf.zeros_like(inputs))
