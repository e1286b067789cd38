"""ops.shapes: reshape targets that are constants where the trace knows the sizes."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.modeling.ops.shapes import reshape_target, rows_target, static_or_dynamic_dim


@pytest.mark.parametrize("shape, constant", [
    ([2, 4, 8], True), ([None, 4, 8], True), ([None, None, 8], False), (None, False)])
def test_rows_target_is_constant_with_one_unknown_size_and_reshapes_alike(shape, constant):
  """[B, L, 8] -> rows [B * L, 8] -> a product [B * L, 3] -> [B, L, 3], traced with the sizes
  known, the batch unknown, both unknown and the rank unknown."""
  values = np.random.default_rng(0).standard_normal([2, 4, 8]).astype(np.float32)
  kernel = np.random.default_rng(1).standard_normal([8, 3]).astype(np.float32)
  targets = []

  @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
  def product(tensor):
    rows = tf.reshape(tensor, [-1, static_or_dynamic_dim(tensor, -1)])
    targets.append(rows_target(tensor, 3))
    return tf.reshape(tf.matmul(rows, kernel), targets[-1])
  np.testing.assert_allclose(product(values), values @ kernel, rtol=1e-6)
  assert isinstance(targets[0], list) == constant, targets[0]
  if constant:
    assert targets[0] == [-1 if size is None else size for size in shape[:-1]] + [3]


def test_reshape_target_reads_the_axes_asked_and_refuses_unknown_trailing_sizes():
  @tf.function(input_signature=[tf.TensorSpec([None, 3, 4, 5], tf.float32)])
  def positions_first(heads_first):  # [B, N, L, H] -> [B, L, N * H]
    target = reshape_target(heads_first, [0, 2], [15])
    assert target == [-1, 4, 15]
    return tf.reshape(tf.transpose(heads_first, [0, 2, 1, 3]), target)
  values = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape([2, 3, 4, 5])
  np.testing.assert_array_equal(positions_first(values),
                                values.transpose([0, 2, 1, 3]).reshape([2, 4, 15]))
  with pytest.raises(ValueError, match="trailing sizes must be known"):
    reshape_target(tf.zeros([2, 3]), [0], [None])
