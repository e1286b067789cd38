import keras
import numpy as np
import tensorflow as tf

import pytest

from xlnet_tf.layers.attention import (RelativeMultiHeadAttention, gather_relative_scores,
                                       rel_shift, rel_shift_adjoint)
from xlnet_tf.layers.position_encoding import relative_position_encoding


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


def _call(layer, content, query, positions):
  encoding = relative_position_encoding(content.shape[1], content.shape[1], 2, 16)
  bias = np.full([2, 4], 0.1, np.float32)
  return layer(content, encoding, bias, bias, query=query, query_positions=positions,
               query_valid=np.ones(positions.shape, np.float32))


def test_config_round_trip_and_two_streams(rng):
  layer = RelativeMultiHeadAttention(n_head=2, d_head=4, dropout=0.1, dropatt=0.2, name="rel_attn")
  content = rng.standard_normal([2, 5, 16]).astype(np.float32)
  query = rng.standard_normal([2, 2, 16]).astype(np.float32)
  positions = np.array([[1, 4], [0, 2]], np.int32)
  content_out, query_out = _call(layer, content, query, positions)
  clone = RelativeMultiHeadAttention.from_config(layer.get_config())
  clone.build(content.shape)
  clone.set_weights(layer.get_weights())
  clone_content, clone_query = _call(clone, content, query, positions)
  np.testing.assert_allclose(clone_content.numpy(), content_out.numpy(), atol=1e-6)
  np.testing.assert_allclose(clone_query.numpy(), query_out.numpy(), atol=1e-6)
  assert clone.get_config()["dropatt"] == 0.2
  # The content stream does not depend on the query stream.
  alone, _ = _call(layer, content, None, positions)
  np.testing.assert_allclose(alone.numpy(), content_out.numpy(), atol=1e-6)


def test_masking_is_safe_in_float16():
  layer = RelativeMultiHeadAttention(n_head=2, d_head=4, dtype="mixed_float16")
  content = tf.random.normal([2, 3, 8], dtype=tf.float16)
  encoding = relative_position_encoding(3, 3, 2, 8)
  bias = np.zeros([2, 4], np.float32)
  mask = np.ones([2, 3, 3], bool)  # every key masked: uniform attention, not NaN or inf
  out, _ = layer(content, encoding, bias, bias, content_mask=mask)
  assert out.dtype == tf.float16
  assert np.isfinite(out.numpy().astype(np.float32)).all()
  assert layer.layer_norm.compute_dtype == "float32"
  assert keras.backend.standardize_dtype(layer.query_kernel.dtype) == "float32"
