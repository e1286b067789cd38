"""The compiled kernels (ops.attention_probabilities, ops.bias_activation,
ops.residual_layer_norm, ops.compile): outputs and written-out or recomputed gradients against
TensorFlow's autodiff of the plain functions."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_tf import XLNetModel
from xlnet_tf.modeling.layers.feed_forward import ACTIVATIONS
from xlnet_tf.modeling.ops import attention_probabilities
from xlnet_tf.modeling.ops import compile as compile_ops
from xlnet_tf.modeling.ops.bias_activation import (bias_activation_dropout,
                                                   fused_bias_activation_dropout)
from xlnet_tf.modeling.ops.residual_layer_norm import fused_residual_layer_norm, residual_layer_norm


@pytest.mark.parametrize("function", [residual_layer_norm, fused_residual_layer_norm])
def test_residual_layer_norm_equals_keras_layer_normalization(rng, function):
  sublayer, residual = (rng.standard_normal([3, 5, 16]).astype(np.float32) for _ in range(2))
  bias = rng.standard_normal([16]).astype(np.float32)
  layer = keras.layers.LayerNormalization(epsilon=1e-12, dtype="float32")
  layer.build((None, None, 16))
  layer.gamma.assign(rng.standard_normal([16]))
  layer.beta.assign(rng.standard_normal([16]))
  expected = layer(sublayer + bias + residual).numpy()
  got = function(tf.constant(sublayer), tf.constant(residual), layer.gamma.value,
                 layer.beta.value, tf.constant(bias), epsilon=1e-12).numpy()
  np.testing.assert_allclose(got, expected, atol=1e-5)


def test_bias_activation_keeps_the_activation(rng):
  hidden = rng.standard_normal([4, 32]).astype(np.float32)
  bias = rng.standard_normal([32]).astype(np.float32)
  for activation in ACTIVATIONS.values():
    got = bias_activation_dropout(tf.constant(hidden), tf.constant(bias), activation=activation)
    np.testing.assert_allclose(got.numpy(), activation(hidden + bias).numpy(), atol=1e-6)


def test_compiled_regions_inline_inside_xla_and_compile_outside():
  seen = []
  region = compile_ops.compiled(lambda x: seen.append(compile_ops.in_xla_context()) or x + 1)
  tf.function(lambda x: region(x), jit_compile=True)(tf.ones([2]))
  tf.function(lambda x: region(x))(tf.ones([3]))
  assert seen == [True, True]  # outside XLA the region is traced in its own XLA function
  assert not compile_ops.in_xla_context()


def _gradients(function, inputs, upstream_seed, jit=False, **settings):
  """Output and d(sum(output * random upstream)) / d inputs, in a tf.function (a graph, as in
  training). References run with jit=True: XLA's tanh and exp differ from TensorFlow's by
  ~1e-6."""
  @tf.function(jit_compile=jit)
  def run(upstream, *inputs):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      output = function(*inputs, **settings)
    return output, tape.gradient(output, inputs, output_gradients=upstream)
  shape = function(*inputs, **settings).shape
  upstream = np.random.default_rng(upstream_seed).standard_normal(shape).astype(np.float32)
  output, gradients = run(tf.constant(upstream), *inputs)
  return [output.numpy()] + [gradient.numpy() for gradient in gradients]


@pytest.mark.parametrize("stream", ["content", "query"])
def test_attention_probabilities_gradient_equals_autodiff(rng, stream):
  """The written-out gradient (softmax, mask, shift/gather adjoints, segment pick, dropout)
  against TensorFlow's autodiff of the plain function, with memory, padding, a fully masked
  row, two segments and dropout."""
  batch, heads, memory, length = 3, 2, 2, 6
  keys = memory + length
  rows = length if stream == "content" else 4
  positions = None
  if stream == "query":
    positions = tf.constant(rng.integers(0, length, size=[batch, rows]), tf.int32)
  scores = [tf.constant(rng.standard_normal(shape), tf.float32) for shape in
            ([batch, heads, rows, keys], [batch, heads, rows, keys + length],
             [batch, heads, rows, 2])]
  mask = rng.random([batch, rows, keys]) < 0.3
  mask[:, :, :1] = True  # padding at the first key of every row
  mask[1, 2] = True  # a row with every key blocked attends uniformly; no gradient
  mismatch = rng.random([batch, rows, keys]) < 0.5
  settings = dict(key_length=keys, content_length=length, scale=0.125,
                  query_positions=positions, mismatch=tf.constant(mismatch),
                  mask=tf.constant(mask), dropout_threshold=round(0.3 * 2**32),
                  dropout_seed=tf.constant([5, 6], tf.int64))
  expected = _gradients(attention_probabilities.attention_probabilities, scores, 7, jit=True,
                        **settings)
  got = _gradients(attention_probabilities.fused_attention_probabilities, scores, 7, **settings)
  assert (expected[0] == 0).mean() > 0.2  # dropout and masking are active
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-7)
  # The inference forward (nothing kept) recomputes what the gradient needs when asked.
  recomputed = _gradients(attention_probabilities.fused_attention_probabilities, scores, 7,
                          keep_for_gradient=False, **settings)
  for want, have in zip(got, recomputed):
    np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-7)
  assert np.abs(expected[2]).max() > 1e-3 and np.abs(expected[3]).max() > 1e-3
  # Without the segment term and without dropout, too.
  settings.update(mismatch=None, dropout_seed=None)
  expected = _gradients(attention_probabilities.attention_probabilities, scores[:2], 8, jit=True,
                        **settings)
  got = _gradients(attention_probabilities.fused_attention_probabilities, scores[:2], 8, **settings)
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_bias_activation_dropout_recomputed_gradient_equals_autodiff(rng, activation):
  hidden = tf.constant(rng.standard_normal([3, 5, 32]), tf.float32)
  bias = tf.constant(rng.standard_normal([32]), tf.float32)
  settings = dict(activation=ACTIVATIONS[activation], dropout_threshold=round(0.2 * 2**32),
                  dropout_seed=tf.constant([1, 9], tf.int64))
  expected = _gradients(bias_activation_dropout, [hidden, bias], 3, jit=True, **settings)
  got = _gradients(fused_bias_activation_dropout, [hidden, bias], 3, **settings)
  assert (expected[0] == 0).mean() > 0.1
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("with_bias", [True, False])
def test_residual_layer_norm_gradient_equals_autodiff(rng, with_bias):
  inputs = [tf.constant(rng.standard_normal(shape), tf.float32)
            for shape in ([3, 5, 16], [3, 5, 16], [16], [16], [16])]
  inputs = inputs if with_bias else inputs[:4]
  settings = dict(epsilon=1e-6, dropout_threshold=round(0.25 * 2**32),
                  dropout_seed=tf.constant([4, 2], tf.int64))
  expected = _gradients(residual_layer_norm, inputs, 5, jit=True, **settings)
  got = _gradients(fused_residual_layer_norm, inputs, 5, **settings)
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)
  recomputed = _gradients(fused_residual_layer_norm, inputs, 5, keep_for_gradient=False,
                          **settings)  # the inference forward; the gradient recomputes
  for want, have in zip(got, recomputed):
    np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-6)
  assert (got[1] == 0).mean() > 0.1  # dropout reaches the sublayer's gradient


def test_regions_trace_once_per_input_signature_not_per_layer_or_call(rng):
  """Eager forwards (the image summaries' path, outside any compiled step): each region traces
  once per input signature (content or query stream, with or without a bias), the same for
  one layer or three, and never again for inputs of the same shapes. TensorFlow's "retracing"
  warning on the first call counts those signatures."""
  regions = (attention_probabilities.fused_attention_probabilities, fused_residual_layer_norm,
             fused_bias_activation_dropout)

  def traces():
    return sum(region.tracing_count() for region in regions)

  def inputs(seed):
    batch_rng = np.random.default_rng(seed)
    batch = padded_pair_batch(batch_rng, 2, 12, 50, pad_lengths=[2, 0])
    perm_mask, targets, _ = factorization_perm_mask(batch_rng, 2, 12, num_targets=3)
    return dict(batch, perm_mask=perm_mask, target_mapping=target_mapping_for(targets, 12))

  start = traces()
  XLNetModel(tiny_config(n_layer=1))(inputs(0))
  per_signature = traces() - start
  assert per_signature > 0  # the regions were compiled, not inlined
  three_layers = XLNetModel(tiny_config(n_layer=3))
  for seed in (1, 2, 3):
    three_layers(inputs(seed))
  assert traces() - start == per_signature
