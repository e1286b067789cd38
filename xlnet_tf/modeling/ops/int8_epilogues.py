"""What runs after an int8 product, in the same compiled region as its dequantization.

With constant int8 weights (ops.int8_packing.constant_int8_weights) the layers' element-wise
steps after a product run in the region that dequantizes it (`dequantized_then`): the
feed-forward's bias and activation, the residual LayerNorm closing a sublayer, or the next
product's quantization. One XLA launch instead of two, and the float product is never written
out (measured: docs/performance.md#quantization).
"""

from typing import Callable, NamedTuple

import tensorflow as tf

from xlnet_tf.modeling.ops.int8_packing import dequantized, region, u8_rows


class Epilogue(NamedTuple):
  """What follows an int8 product: function(rows [R, Out] float32, *inputs, **settings), run
  inside the product's dequantization region (one XLA launch instead of two, and the float
  product is never written out). inputs: tensors per row ([R, ...]) or per column (a bias);
  settings: (name, value) pairs, hashable (they key the compiled region). Inference only."""
  function: Callable
  inputs: tuple = ()
  settings: tuple = ()

  def __call__(self, rows):
    """The epilogue on `rows` as plain ops (inlined where XLA compiles the step)."""
    return self.function(rows, *self.inputs, **dict(self.settings))


DEQUANTIZE_SIGNATURE = [
    tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, 1], tf.float32),
    tf.TensorSpec([None, 1], tf.float32), tf.TensorSpec([None], tf.float32),
    tf.TensorSpec([None], tf.float32)]


def _unchanged(rows):
  return rows


def dequantized_then(epilogue, product, row_scale, zero_point, column_sums, kernel_scale,
                     quantize=False):
  """ops.int8_packing.dequantized, then `epilogue` (or None), in one region per epilogue
  function, settings and input dtypes and ranks; with `quantize`, the result as the next
  product's uint8 rows (int8_packing.u8_rows: rows, row scales, zero points) instead."""
  if epilogue is None and not quantize:
    return region("dequantize", dequantized, DEQUANTIZE_SIGNATURE)(
        product, row_scale, zero_point, column_sums, kernel_scale)
  epilogue = epilogue or Epilogue(_unchanged)  # one region for every caller without one
  inputs = [tf.convert_to_tensor(tensor) for tensor in epilogue.inputs]
  key = ("dequantize", epilogue.function, epilogue.settings, quantize,
         tuple((tensor.dtype, tensor.shape.rank) for tensor in inputs))
  function, settings = epilogue.function, dict(epilogue.settings)

  def dequantized_then(*args):
    result = function(dequantized(*args[:5]), *args[5:], **settings)
    return u8_rows(result) if quantize else result
  compiled_region = region(
      key, dequantized_then,
      DEQUANTIZE_SIGNATURE + [tf.TensorSpec([None] * tensor.shape.rank, tensor.dtype)
                              for tensor in inputs])
  return compiled_region(product, row_scale, zero_point, column_sums, kernel_scale, *inputs)
