"""The feed-forward's inner element-wise step, bias + activation + dropout, as one kernel.

What it computes: dropout(activation(hidden + bias)), the activation in float32, the result in
hidden's dtype (`layers.feed_forward` writes the same with Keras layers when fused=False).

Why: without XLA (bfloat16 on CPU) these are separate passes over the [B, L, F] activations,
the largest tensors of a layer. Compiled, with a backward kernel that recomputes the region
from its inputs (the dropout mask from its stateless seed) instead of TensorFlow's gradient of
a compiled function, which made the forward write out float32 copies of every intermediate:
forward + backward on [512, 3072] bfloat16 15 -> 7.5 ms; per base 4x128 step the region went
from about 200 to 80 ms (docs/performance.md item 4).
"""

import tensorflow as tf

from xlnet_tf.modeling.ops import random as random_ops
from xlnet_tf.modeling.ops.compile import compiled_with_recomputed_gradient


def bias_activation_dropout(hidden, bias, *, activation, dropout_threshold=0,
                            dropout_seed=None):
  """dropout(activation(hidden + bias)) in hidden's dtype; `activation` (a function of a
  float32 tensor) runs in float32. Dropout with `dropout_threshold` / 2^32 (see ops.random)
  when a seed is given."""
  activated = activation(tf.cast(hidden, tf.float32) + tf.cast(bias, tf.float32))
  activated = tf.cast(activated, hidden.dtype)
  if dropout_seed is not None:
    activated = random_ops.dropout(activated, dropout_seed, dropout_threshold)
  return activated


fused_bias_activation_dropout = compiled_with_recomputed_gradient(bias_activation_dropout)
