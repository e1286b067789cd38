"""FastDropout and the compiled element-wise regions (layers.dropout, normalization, compiled)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.layers import attention
from xlnet_tf.layers import compiled as compiled_lib
from xlnet_tf.layers import feed_forward
from xlnet_tf.layers.dropout import FastDropout
from xlnet_tf.layers.feed_forward import ACTIVATIONS, bias_activation_dropout
from xlnet_tf.layers.normalization import compiled_residual_layer_norm, residual_layer_norm


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_dropout_rate_and_mean(rate):
  layer = FastDropout(rate, seed=1)
  inputs = tf.ones([400, 500])
  outputs = layer(inputs, training=True).numpy()
  dropped = (outputs == 0).mean()
  # 200k Bernoulli draws: 5 standard deviations of the dropped fraction.
  assert abs(dropped - rate) < 5 * np.sqrt(rate * (1 - rate) / inputs.shape.num_elements())
  np.testing.assert_allclose(outputs[outputs != 0], 1 / (1 - rate), rtol=1e-6)
  assert abs(outputs.mean() - 1.0) < 0.01  # unbiased



def test_keep_mask_streams_are_independent():
  """Masks of seeds one SeedGenerator step apart ([7, 0], [7, 1]) or differing in the other
  half, and neighbouring elements of one mask, are uncorrelated (|r| < 5 / sqrt(n)); the rows'
  drop counts spread as binomials do (chi-square within 5 standard deviations)."""
  from xlnet_tf.layers.dropout import keep_mask
  rate, shape = 0.3, [500, 400]
  def draw(seed):
    mask = keep_mask(tf.constant(shape), tf.constant(seed, tf.int64), round(rate * 2**32))
    return mask.numpy().astype(np.float64)
  first, next_step, other = draw([7, 0]), draw([7, 1]), draw([8, 0])
  pairs = [(first, next_step), (first, other), (first[:, :-1], first[:, 1:]),
           (first[:-1], first[1:])]
  for x, y in pairs:
    r = np.corrcoef(x.ravel(), y.ravel())[0, 1]
    assert abs(r) < 5 / np.sqrt(x.size), r
  dropped = (1 - first).sum(axis=1)
  expected, variance = shape[1] * rate, shape[1] * rate * (1 - rate)
  chi_square = ((dropped - expected) ** 2 / variance).sum()
  assert abs(chi_square - shape[0]) < 5 * np.sqrt(2 * shape[0]), chi_square

def test_dropout_is_identity_outside_training_and_draws_anew_each_call():
  layer = FastDropout(0.3, seed=2)
  inputs = tf.random.normal([8, 64])
  np.testing.assert_array_equal(layer(inputs, training=False).numpy(), inputs.numpy())
  first, second = (layer(inputs, training=True).numpy() == 0 for _ in range(2))
  assert (first != second).any()
  again = FastDropout(0.3, seed=2)
  np.testing.assert_array_equal(again(inputs, training=True).numpy() == 0, first)


def test_dropout_gradient_is_the_scaled_mask():
  layer = FastDropout(0.25, seed=3)
  inputs = tf.random.normal([16, 32])
  with tf.GradientTape() as tape:
    tape.watch(inputs)
    outputs = layer(inputs, training=True)
  gradient = tape.gradient(outputs, inputs).numpy()
  kept = outputs.numpy() != 0
  np.testing.assert_allclose(gradient, np.where(kept, 1 / 0.75, 0.0), rtol=1e-6)


def test_model_dropout_is_the_same_with_and_without_xla():
  """Same seeds -> same masks whether the step is compiled or not (one generator for both)."""
  from model_inputs import (factorization_perm_mask, padded_pair_batch, target_mapping_for,
                            tiny_config)
  from xlnet_tf import XLNetModel
  rng = np.random.default_rng(0)
  inputs = padded_pair_batch(rng, 2, 10, 50, [0, 3])
  perm_mask, targets, _ = factorization_perm_mask(rng, 2, 10, 3)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, 10))
  outputs = []
  for jit in (False, True, None):
    keras.utils.set_random_seed(0)
    model = XLNetModel(tiny_config(dropout=0.3, dropatt=0.2))
    if jit is None:  # reference: no dropout
      result = model(inputs, training=False)
    else:
      result = tf.function(lambda x: model(x, training=True), jit_compile=jit)(inputs)
    outputs.append(np.concatenate([result["sequence_output"].numpy().ravel(),
                                   result["query_output"].numpy().ravel()]))
  np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5)
  assert np.abs(outputs[2] - outputs[0]).max() > 0.1


@pytest.mark.parametrize("function", [residual_layer_norm, compiled_residual_layer_norm])
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
  for name, activation in ACTIVATIONS.items():
    got = bias_activation_dropout(tf.constant(hidden), tf.constant(bias), activation=name)
    np.testing.assert_allclose(got.numpy(), activation(hidden + bias).numpy(), atol=1e-6)


def test_compiled_regions_inline_inside_xla_and_compile_outside():
  seen = []
  region = compiled_lib.compiled(lambda x: seen.append(compiled_lib._in_xla_context()) or x + 1)
  tf.function(lambda x: region(x), jit_compile=True)(tf.ones([2]))
  tf.function(lambda x: region(x))(tf.ones([3]))
  assert seen == [True, True]  # outside XLA the region is traced in its own XLA function
  assert not compiled_lib._in_xla_context()


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
  expected = _gradients(attention.attention_probabilities, scores, 7, jit=True, **settings)
  got = _gradients(attention._compiled_attention_probabilities, scores, 7, **settings)
  assert (expected[0] == 0).mean() > 0.2  # dropout and masking are active
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-7)
  # The inference forward (nothing kept) recomputes what the gradient needs when asked.
  recomputed = _gradients(attention._compiled_attention_probabilities, scores, 7,
                          keep_for_gradient=False, **settings)
  for want, have in zip(got, recomputed):
    np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-7)
  assert np.abs(expected[2]).max() > 1e-3 and np.abs(expected[3]).max() > 1e-3
  # Without the segment term and without dropout, too.
  settings.update(mismatch=None, dropout_seed=None)
  expected = _gradients(attention.attention_probabilities, scores[:2], 8, jit=True,
                        **settings)
  got = _gradients(attention._compiled_attention_probabilities, scores[:2], 8, **settings)
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_bias_activation_dropout_recomputed_gradient_equals_autodiff(rng, activation):
  hidden = tf.constant(rng.standard_normal([3, 5, 32]), tf.float32)
  bias = tf.constant(rng.standard_normal([32]), tf.float32)
  settings = dict(activation=activation, dropout_threshold=round(0.2 * 2**32),
                  dropout_seed=tf.constant([1, 9], tf.int64))
  expected = _gradients(bias_activation_dropout, [hidden, bias], 3, jit=True, **settings)
  got = _gradients(feed_forward._compiled_bias_activation_dropout, [hidden, bias], 3, **settings)
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
  got = _gradients(compiled_residual_layer_norm, inputs, 5, **settings)
  for want, have in zip(expected, got):
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)
  recomputed = _gradients(compiled_residual_layer_norm, inputs, 5, keep_for_gradient=False,
                          **settings)  # the inference forward; the gradient recomputes
  for want, have in zip(got, recomputed):
    np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-6)
  assert (got[1] == 0).mean() > 0.1  # dropout reaches the sublayer's gradient
