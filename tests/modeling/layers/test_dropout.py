"""FastDropout and its SplitMix64 kernel (layers.dropout, ops.random)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.modeling.layers.dropout import FastDropout


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
  from xlnet_tf.modeling.ops.random import keep_mask
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
      result = tf.function(lambda x, m=model: m(x, training=True), jit_compile=jit)(inputs)
    outputs.append(np.concatenate([result["sequence_output"].numpy().ravel(),
                                   result["query_output"].numpy().ravel()]))
  np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5)
  assert np.abs(outputs[2] - outputs[0]).max() > 0.1


def test_a_step_seed_fixes_every_mask_of_the_model():
  """Inside seeds_derived_from(step_seed(...)) every dropout of the model, the blocks' too,
  draws from that seed alone (how the pretraining loop resumes exactly): after the layers' own
  generators advanced the outputs are the same; another step or replica changes them."""
  from model_inputs import padded_pair_batch, tiny_config
  from xlnet_tf import XLNetModel
  from xlnet_tf.modeling.ops import random as random_ops
  inputs = padded_pair_batch(np.random.default_rng(0), 2, 10, 50, [0, 3])
  keras.utils.set_random_seed(0)
  model = XLNetModel(tiny_config(dropout=0.3, dropatt=0.2))

  def forward(step, replica):
    with random_ops.seeds_derived_from(random_ops.step_seed(0, step, replica, 2)):
      return model(inputs, training=True)["sequence_output"].numpy()
  first = forward(5, 0)
  model(inputs, training=True)  # advances the generators
  np.testing.assert_array_equal(forward(5, 0), first)
  assert np.abs(forward(6, 0) - first).max() > 0.1
  assert np.abs(forward(5, 1) - first).max() > 0.1
