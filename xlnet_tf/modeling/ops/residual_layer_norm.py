"""Dropout + residual + LayerNorm, the closing step of every XLNet sublayer, as one kernel.

What it computes: LayerNorm(dropout(sublayer_output + bias) + residual) * gamma + beta, in
float32 (layers.attention / layers.feed_forward write the same with Keras layers when
fused=False). Why: without XLA (bfloat16 on CPU) these are half a dozen passes over [B, L, D];
compiled, one pass forward and one backward. The written-out gradient saves only the
normalized rows and 1 / std, where TensorFlow's gradient of a compiled function keeps every
float32 intermediate (measured, base 4x128 bfloat16 step: LayerNorm backward 59 -> 44 ms;
docs/performance.md items 3-4).
"""

import tensorflow as tf

from xlnet_tf.modeling.ops import random as random_ops
from xlnet_tf.modeling.ops.compile import compiled_with_gradient


def residual_layer_norm(sublayer_output, residual, gamma, beta, bias=None, *, epsilon,
                        dropout_threshold=0, dropout_seed=None):
  """LayerNorm(dropout(sublayer_output + bias) + residual) * gamma + beta, in float32.

  Returns the sublayer_output's dtype. Same arithmetic as keras.layers.LayerNormalization
  (mean and variance over the last axis, rsqrt(variance + epsilon)). Dropout with
  `dropout_threshold` / 2^32 (see ops.random) when a seed is given.
  """
  inputs = [sublayer_output, residual, gamma, beta] + ([] if bias is None else [bias])
  return _forward(*inputs, epsilon=epsilon, dropout_threshold=dropout_threshold,
                  dropout_seed=dropout_seed)[0]


def _forward(sublayer_output, residual, gamma, beta, bias=None, *, epsilon, dropout_threshold=0,
             dropout_seed=None):
  """The output, plus what the gradient needs: the normalized float32 rows, 1 / std per row,
  the dropout keep mask (or None) and gamma."""
  hidden = sublayer_output if bias is None else sublayer_output + tf.cast(
      bias, sublayer_output.dtype)
  keep = None
  if dropout_seed is not None:
    keep = random_ops.keep_mask(tf.shape(hidden), dropout_seed, dropout_threshold)
    hidden = random_ops.apply_keep_mask(hidden, keep, dropout_threshold)
  hidden = tf.cast(hidden, tf.float32) + tf.cast(residual, tf.float32)
  mean, variance = tf.nn.moments(hidden, axes=[-1], keepdims=True)
  inverse_std = tf.math.rsqrt(variance + epsilon)
  normalized = (hidden - mean) * inverse_std
  output = normalized * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)
  saved = (normalized, inverse_std, keep, gamma)
  return tf.cast(output, sublayer_output.dtype), saved


def _backward(upstream, saved, input_dtypes, *, epsilon, dropout_threshold=0, dropout_seed=None):
  """LayerNorm's gradient, dx = (dn - mean(dn) - n * mean(dn * n)) / std with dn = dy * gamma,
  then back through the residual sum, the dropout and the bias."""
  del epsilon, dropout_seed  # in the saved 1 / std and keep mask
  normalized, inverse_std, keep, gamma = saved
  gradient = tf.cast(upstream, tf.float32)
  rows = tf.range(tf.rank(gradient) - 1)
  gamma_gradient = tf.reduce_sum(gradient * normalized, axis=rows)
  beta_gradient = tf.reduce_sum(gradient, axis=rows)
  normalized_gradient = gradient * tf.cast(gamma, tf.float32)
  hidden_gradient = inverse_std * (
      normalized_gradient - tf.reduce_mean(normalized_gradient, axis=-1, keepdims=True)
      - normalized * tf.reduce_mean(normalized_gradient * normalized, axis=-1, keepdims=True))
  sublayer_gradient = hidden_gradient
  if keep is not None:
    sublayer_gradient = random_ops.apply_keep_mask(  # with the forward's rounded scale
        sublayer_gradient, keep, dropout_threshold, scale_dtype=input_dtypes[0])
  gradients = [sublayer_gradient, hidden_gradient, gamma_gradient, beta_gradient]
  if len(input_dtypes) == 5:  # a bias was given
    gradients.append(tf.reduce_sum(sublayer_gradient, axis=rows))
  return [tf.cast(g, dtype) for g, dtype in zip(gradients, input_dtypes)]


# One kernel forward, one backward (see ops.compile). Call with the bias positional.
fused_residual_layer_norm = compiled_with_gradient(_forward, _backward)
