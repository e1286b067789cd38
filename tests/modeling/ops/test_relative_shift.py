"""The rel-shift, its adjoint and the query stream's gather (ops.relative_shift)."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.modeling.ops.relative_shift import (gather_relative_scores, rel_shift,
                                                  rel_shift_adjoint)


def test_rel_shift_picks_the_query_key_distance(rng):
  batch, heads, memory, length = 2, 3, 2, 4
  keys = memory + length
  scores = rng.standard_normal([batch, heads, length, keys + length]).astype(np.float32)
  shifted = rel_shift(tf.constant(scores), keys).numpy()
  for i in range(length):
    for j in range(keys):
      column = keys - ((memory + i) - j)  # the column of distance (M + i) - j
      np.testing.assert_array_equal(shifted[:, :, i, j], scores[:, :, i, column])


@pytest.mark.parametrize("memory, uni", [(0, False), (2, False), (2, True), (0, True)])
def test_rel_shift_adjoint_is_its_gradient(rng, memory, uni):
  """<adjoint(g), x> = <g, rel_shift(x)> for the bi (R = K + T) and uni (R = K + 1) layouts,
  where the shift wraps rows; equal to autodiff of rel_shift."""
  batch, heads, length = 2, 3, 4
  keys = memory + length
  positions = keys + 1 if uni else keys + length
  x = tf.constant(rng.standard_normal([batch, heads, length, positions]), tf.float32)
  g = tf.constant(rng.standard_normal([batch, heads, length, keys]), tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(x)
    shifted = rel_shift(x, keys)
  expected = tape.gradient(shifted, x, output_gradients=g).numpy()
  adjoint = rel_shift_adjoint(g, positions).numpy()
  np.testing.assert_array_equal(adjoint, expected)
  np.testing.assert_allclose(np.sum(adjoint * x.numpy()), np.sum(g.numpy() * shifted.numpy()),
                             rtol=1e-5)
  assert (adjoint != 0).sum() == (expected != 0).sum() > 0


def test_gather_relative_scores_matches_rel_shift_at_every_position(rng):
  batch, heads, memory, length = 2, 3, 1, 5
  keys = memory + length
  scores = rng.standard_normal([batch, heads, length, keys + length]).astype(np.float32)
  positions = np.tile(np.arange(length, dtype=np.int32), [batch, 1])
  gathered = gather_relative_scores(tf.constant(scores), positions, length, keys)
  np.testing.assert_array_equal(gathered.numpy(), rel_shift(tf.constant(scores), keys).numpy())
