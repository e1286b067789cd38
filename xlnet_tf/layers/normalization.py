"""Dropout + residual + LayerNorm, the closing step of every XLNet sublayer, as one kernel."""

import tensorflow as tf

from xlnet_tf.layers import dropout as dropout_lib
from xlnet_tf.layers.compiled import compiled


def residual_layer_norm(sublayer_output, residual, gamma, beta, *, epsilon, bias=None,
                        dropout_threshold=0, dropout_seed=None):
  """LayerNorm(dropout(sublayer_output + bias) + residual) * gamma + beta, in float32.

  Returns the sublayer_output's dtype. Same arithmetic as keras.layers.LayerNormalization
  (mean and variance over the last axis, rsqrt(variance + epsilon)). Dropout with
  `dropout_threshold` / 2^32 (see layers.dropout) when a seed is given.
  """
  hidden = sublayer_output if bias is None else sublayer_output + tf.cast(
      bias, sublayer_output.dtype)
  if dropout_seed is not None:
    hidden = dropout_lib.dropout(hidden, dropout_seed, dropout_threshold)
  hidden = tf.cast(hidden, tf.float32) + tf.cast(residual, tf.float32)
  mean, variance = tf.nn.moments(hidden, axes=[-1], keepdims=True)
  normalized = (hidden - mean) * tf.math.rsqrt(variance + epsilon)
  normalized = normalized * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)
  return tf.cast(normalized, sublayer_output.dtype)


compiled_residual_layer_norm = compiled(residual_layer_norm)

