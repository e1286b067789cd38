import numpy as np

from layer_checks import assert_config_round_trip
from xlnet_tf.modeling.layers.feed_forward import PositionwiseFeedForward, gelu_tanh
from xlnet_tf.modeling.layers.masks import AttentionMasks, RowMasks
from xlnet_tf.modeling.layers.position_encoding import relative_position_encoding
from xlnet_tf.modeling.layers.two_stream_block import TwoStreamBlock


def test_gelu_is_the_tanh_approximation():
  x = np.linspace(-4, 4, 41).astype(np.float32)
  expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  np.testing.assert_allclose(gelu_tanh(x).numpy(), expected, atol=1e-6)


def test_feed_forward_matches_formula(rng):
  layer = PositionwiseFeedForward(6, activation="relu")
  x = rng.standard_normal([2, 3, 4]).astype(np.float32)
  out = layer(x).numpy()
  w1, b1 = layer.inner_dense.get_weights()
  w2, b2 = layer.output_dense.get_weights()
  y = np.maximum(x @ w1 + b1, 0) @ w2 + b2 + x
  y = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + 1e-12)
  np.testing.assert_allclose(out, y, atol=1e-5)



def test_feed_forward_reads_the_transposed_copies_it_is_given(rng):
  """In kernels_read_transposed, the fused feed-forward multiplies by the [Out, In] copies
  (XLA and the graph executor alike): the transposed kernels give the layer's output, copies of
  other values another one (so the copies, not the variables, are read); outside it, the
  variables again."""
  import tensorflow as tf
  from xlnet_tf.modeling.layers.projections import kernels_read_transposed
  layer = PositionwiseFeedForward(6)
  streams = [tf.constant(rng.standard_normal(shape).astype(np.float32))
             for shape in ([4, 1, 4], [4, 1, 4])]
  expected = [out.numpy() for out in layer(streams)]
  kernels = [layer.inner_dense.kernel.value, layer.output_dense.kernel.value]

  def with_copies(copies):
    mapping = {kernel.ref(): copy for kernel, copy in zip(kernels, copies)}
    with kernels_read_transposed(mapping):
      return layer(list(streams))

  transposed = [tf.transpose(kernel) for kernel in kernels]
  others = [tf.constant(rng.standard_normal(copy.shape).astype(np.float32)) for copy in transposed]
  for call in (with_copies, tf.function(with_copies, jit_compile=True)):
    for got, want in zip(call(transposed), expected):
      np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    assert all(np.abs(got.numpy() - want).max() > 1e-2
               for got, want in zip(call(others), expected))
  for got, want in zip(layer(streams), expected):
    np.testing.assert_allclose(got.numpy(), want, atol=1e-6)


def test_feed_forward_on_two_streams_equals_two_calls(rng):
  """A list of streams shares one read of the weights: same outputs and weight gradients as
  calling the layer on each stream (gradients summed)."""
  import tensorflow as tf
  layer = PositionwiseFeedForward(6)
  streams = [tf.constant(rng.standard_normal(shape).astype(np.float32))
             for shape in ([2, 3, 4], [2, 1, 4])]
  with tf.GradientTape(persistent=True) as tape:
    together = layer(streams)
    apart = [layer(stream) for stream in streams]
    loss_together = sum(tf.reduce_sum(out * np.float32(i + 1)) for i, out in enumerate(together))
    loss_apart = sum(tf.reduce_sum(out * np.float32(i + 1)) for i, out in enumerate(apart))
  assert isinstance(together, list) and len(together) == 2
  for a, b in zip(together, apart):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
  for a, b in zip(tape.gradient(loss_together, layer.trainable_variables),
                  tape.gradient(loss_apart, layer.trainable_variables)):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    assert np.abs(b.numpy()).max() > 0

def test_block_config_round_trip_and_shared_feed_forward(rng):
  block = TwoStreamBlock(n_head=2, d_head=4, d_inner=12, ff_activation="gelu", name="layer_0")
  block.build((None, None, 8))
  content = rng.standard_normal([2, 4, 8]).astype(np.float32)
  query = rng.standard_normal([2, 2, 8]).astype(np.float32)
  encoding = relative_position_encoding(4, 4, 2, 8)
  bias = rng.standard_normal([2, 4]).astype(np.float32)
  kwargs = dict(query=query, masks=AttentionMasks(query=RowMasks(
      positions=np.array([[0, 3], [1, 2]], np.int32), valid=np.ones([2, 2], np.float32))))
  assert_config_round_trip(block, lambda layer: layer(content, encoding, bias, bias, **kwargs),
                           build_shape=(None, None, 8))
  # One set of weights for both streams: 5 attention kernels + 2 LayerNorms + 2 dense layers.
  assert len(block.weights) == 5 + 2 + 2 + 2 + 2
