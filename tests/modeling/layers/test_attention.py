import keras
import numpy as np
import tensorflow as tf

from layer_checks import assert_config_round_trip
from xlnet_tf.modeling.layers.attention import RelativeMultiHeadAttention
from xlnet_tf.modeling.layers.masks import AttentionMasks, RowMasks
from xlnet_tf.modeling.layers.position_encoding import relative_position_encoding

def _call(layer, content, query, positions):
  encoding = relative_position_encoding(content.shape[1], content.shape[1], 2, 16)
  bias = np.full([2, 4], 0.1, np.float32)
  masks = AttentionMasks(query=RowMasks(positions=positions,
                                         valid=np.ones(positions.shape, np.float32)))
  return layer(content, encoding, bias, bias, query=query, masks=masks)


def test_config_round_trip_and_two_streams(rng):
  layer = RelativeMultiHeadAttention(n_head=2, d_head=4, dropout=0.1, dropatt=0.2, name="rel_attn")
  content = rng.standard_normal([2, 5, 16]).astype(np.float32)
  query = rng.standard_normal([2, 2, 16]).astype(np.float32)
  positions = np.array([[1, 4], [0, 2]], np.int32)
  content_out, query_out = _call(layer, content, query, positions)
  clone = assert_config_round_trip(layer, lambda a: _call(a, content, query, positions),
                                   build_shape=content.shape)
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
  out, _ = layer(content, encoding, bias, bias, masks=AttentionMasks(RowMasks(blocked=mask)))
  assert out.dtype == tf.float16
  assert np.isfinite(out.numpy().astype(np.float32)).all()
  assert layer.layer_norm.compute_dtype == "float32"
  assert keras.backend.standardize_dtype(layer.query_kernel.dtype) == "float32"


def test_rows_at_positions_attend_as_the_query_stream_does(rng):
  """attend_rows (decoding's steps: one compiled region per layer when fused) against the
  query stream of `call` and against the plain path, with two texts, two segments, blocked
  keys and a padded row; with the keys as `call` makes them and transposed, as decoding's
  caches keep them."""
  content = rng.standard_normal([2, 6, 16]).astype(np.float32)
  rows = rng.standard_normal([2, 3, 16]).astype(np.float32)
  positions = np.array([[1, 4, 5], [0, 2, 3]], np.int32)
  valid = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
  segments = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
  row_segments = np.take_along_axis(segments, positions, axis=1)
  row_mismatch = row_segments[:, :, None] != segments[:, None, :]
  blocked = rng.random([2, 3, 6]) < 0.3
  blocked[:, :, 0] = False  # every row sees a key
  bias = rng.standard_normal([2, 4]).astype(np.float32)
  seg_embed = rng.standard_normal([2, 2, 4]).astype(np.float32)
  encoding = relative_position_encoding(6, 6, 2, 16)
  row_masks = RowMasks(blocked=blocked, segment_mismatch=row_mismatch, positions=positions,
                       valid=valid)
  masks = AttentionMasks(
      content=RowMasks(segment_mismatch=segments[:, :, None] != segments[:, None, :]),
      query=row_masks)

  def attend(layer, keys_transposed=False):
    keys, values = layer.project_keys_values(content)  # [B, N, T, H]
    if keys_transposed:
      keys = tf.transpose(keys, [0, 1, 3, 2])
    return layer.attend_rows(rows, row_masks, (keys, values),
                             layer.project_position_keys(encoding), bias, 0.5 * bias,
                             content_length=6, r_s_bias=-bias, seg_embed=seg_embed,
                             keys_transposed=keys_transposed).numpy()

  fused = RelativeMultiHeadAttention(n_head=2, d_head=4)
  _, query_output = fused(content, encoding, bias, 0.5 * bias, query=rows, masks=masks,
                          r_s_bias=-bias, seg_embed=seg_embed)
  plain = RelativeMultiHeadAttention(n_head=2, d_head=4, fused=False)
  plain(content, encoding, bias, bias, query=rows, masks=masks, r_s_bias=bias,
        seg_embed=seg_embed)
  plain.set_weights(fused.get_weights())
  rows_output = attend(fused)
  np.testing.assert_allclose(rows_output, query_output.numpy(), atol=2e-5)
  np.testing.assert_allclose(rows_output, attend(plain), atol=2e-5)
  for layer in (fused, plain):
    np.testing.assert_allclose(attend(layer, keys_transposed=True), rows_output, atol=2e-5)
  # the padded row is its input through the residual LayerNorm only: the attention is zeroed
  np.testing.assert_allclose(rows_output[1, 2], fused.layer_norm(rows[1:, 2])[0].numpy(),
                             atol=2e-5)


def test_output_projection_under_xla_is_the_einsum_with_its_gradient(rng):
  """Under XLA the output projection multiplies by the kernel reshaped to [D, N * H]
  (transposed in the product, not laid out anew); it equals the einsum the graph executor
  runs, for one row (computed twice, one kept) and for several, with the kernel's gradient."""
  from xlnet_tf.modeling.layers.projections import FloatHeadProjection
  kernel = tf.Variable(rng.standard_normal([16, 2, 4]).astype(np.float32))
  projection = FloatHeadProjection(kernel, reduces_heads=True)

  def projected_and_gradient(attended):  # attended [B, N, Q, H], heads first
    with tf.GradientTape() as tape:
      output = projection.project(attended, heads_first=True)
      loss = tf.reduce_sum(output * tf.range(1.0, 17.0))
    return output, tape.gradient(loss, kernel)

  compiled = tf.function(projected_and_gradient, jit_compile=True)
  for shape in ([1, 2, 1, 4], [3, 2, 5, 4]):
    attended = tf.constant(rng.standard_normal(shape).astype(np.float32))
    expected = np.einsum("bnqh,dnh->bqd", attended.numpy(), kernel.numpy())
    for output, gradient in (projected_and_gradient(attended), compiled(attended)):
      assert output.shape == (shape[0], shape[2], 16)
      np.testing.assert_allclose(output.numpy(), expected, rtol=1e-5, atol=1e-5)
      np.testing.assert_allclose(
          gradient.numpy(), np.einsum("bnqh,d->dnh", attended.numpy(), np.arange(1.0, 17.0)),
          rtol=1e-5, atol=1e-4)
