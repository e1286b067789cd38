"""int8 values for quantized models: weights int8 per output channel, activations int8 per row.

What it stores: a kernel `[In, Out]` as round(kernel * scale) in int8, scale = 127 / max|kernel
column| (one per output channel, as Keras' int8 Dense: `quantize_kernel`; `Int8Kernel` for the
attention's [D, N, H] kernels), and each row of a product's inputs quantized when called
(dynamic, per token) to 256 levels (128 on a CPU whose oneDNN product would overflow with
256: `row_top`) over [min(row, 0), max(row, 0)] with a zero point (`quantized_rows`);
`dequantized` undoes both scales after the integer product, corrected for the zero point with
the kernel's column sums. `XLNetModel.quantize("int8")` stores the
projections this way; ops.int8_products multiplies them. The zero point matters after gelu,
whose outputs are lopsided: it halves the error of the feed-forward's second product (base,
random weights: the whole model's sequence_output 1.93% -> 1.79% from float).

`constant_int8_weights()` chooses oneDNN's u8 x s8 kernel, which reads the kernels as graph
constants (`constant_kernel`) and the rows as uint8 (`quantized_u8_rows`); why, and the
speeds: ops.int8_products.
"""

import contextlib
import warnings
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from xlnet_tf.modeling.ops.compile import compiled, in_xla_context
from xlnet_tf.utils import cpu_features
from xlnet_tf.utils.thread_settings import ThreadSetting

INT8_RANGE = 127  # the weights: symmetric, -127..127, as Keras' AbsMaxQuantizer
# Keras' backend.epsilon(): a zero row or column quantizes to zeros, not to NaN.
EPSILON = 1e-7


class Int8Kernel(NamedTuple):
  """A kernel [D, N, H] quantized per output channel: float kernel ~= values / scale.

  values: int8 [D, N, H] (the float kernel's shape). reduces_heads False: a projection
  [..., D] -> [..., N, H], scale [N, H]; True: an output projection [..., N, H] -> [..., D]
  (the attention's `o`), scale [D]. Variables or tensors."""
  values: Any
  scale: Any
  reduces_heads: bool = False


def quantize_kernel(kernel, axis=0):
  """NumPy (int8 values, float32 scale): `kernel` quantized per channel, `axis` the contracted
  one(s) the absolute maximum runs over (scale keeps the other axes)."""
  kernel = np.asarray(kernel, np.float32)
  scale = INT8_RANGE / (np.max(np.abs(kernel), axis=axis, keepdims=True) + EPSILON)
  values = np.clip(np.round(kernel * scale), -INT8_RANGE, INT8_RANGE).astype(np.int8)
  return values, np.squeeze(scale, axis=axis).astype(np.float32)


def row_top() -> int:
  """The top level of the rows' quantization on this machine, the same on every path (XLA,
  eager, the constant weights): 255 (256 levels), or 127 where oneDNN's u8 x s8 product would
  sum pairs of byte products in int16 (a CPU without VNNI: utils.cpu_features), where 7-bit rows
  keep every pair sum (2 x 127 x 127) exact at twice the rows' rounding (docs/performance.md,
  "int8 on a CPU without VNNI"). Where TensorFlow runs no oneDNN product, 255."""
  return 255 if cpu_features.exact_u8_pairs() or not _onednn_int8_kernel() else 127


def quantized_rows(rows, offset):
  """rows [R, In] float -> (quantized float32 [R, In] in offset + 0..row_top(), row_scale
  [R, 1], zero_point [R, 1]): row ~= (quantized - zero_point) / row_scale. offset -128: int8
  levels; 0: uint8."""
  top = float(row_top())
  rows = tf.cast(rows, tf.float32)
  low = tf.minimum(tf.reduce_min(rows, axis=-1, keepdims=True), 0.0)  # 0 stays in range
  high = tf.maximum(tf.reduce_max(rows, axis=-1, keepdims=True), 0.0)
  row_scale = top / (high - low + EPSILON)
  zero_point = tf.round(offset - low * row_scale)  # low -> offset
  quantized = tf.clip_by_value(tf.round(rows * row_scale) + zero_point, offset, offset + top)
  return quantized, row_scale, zero_point


def dequantized(product, row_scale, zero_point, column_sums, kernel_scale):
  """sum_k (q_k - z) w_k = q . w - z * sum_k w_k, divided by both scales: [R, Out] float32."""
  corrected = tf.cast(product, tf.float32) - zero_point * column_sums[None]
  return corrected / (row_scale * tf.cast(kernel_scale, tf.float32))


def u8_rows(rows):
  """quantized_rows as uint8: (uint8 rows [R, In], row scales [R, 1], zero points [R, 1])."""
  quantized, row_scale, zero_point = quantized_rows(rows, 0.0)
  return tf.cast(quantized, tf.uint8), row_scale, zero_point


_regions = {}


def region(key, function, signature):
  """`function` compiled (ops.compile) once per `key`: one trace for every shape its
  `signature` admits (a model's projections call a region with several)."""
  if key not in _regions:
    _regions[key] = compiled(function, signature)
  return _regions[key]


def quantized_u8_rows(rows):
  """u8_rows, compiled: the cast inside the region, where a separate Cast op cost 3 ms of a
  base 4x128 forward."""
  return region(("quantize", rows.dtype), u8_rows, [tf.TensorSpec([None, None], rows.dtype)])(
      rows)


# ---- constant weights: oneDNN's u8 x s8 kernel ---------------------------------------------
# Outside constant_int8_weights None, inside its float_products.
_float_products = ThreadSetting()


@contextlib.contextmanager
def constant_int8_weights(float_products: bool = False):
  """int8 products traced in this context (on this thread) outside XLA read their kernels
  once, when traced, as graph constants, and multiply with oneDNN's u8 x s8 kernel (VNNI):
  2-2.5x the speed of the default path for a base model's forward on CPU. The traced function
  then holds a copy of the weights: changing the model's weights afterwards does not reach it
  (trace again). Eager calls and XLA-compiled functions take the default path, and so do
  TensorFlow without the oneDNN kernel (loaded with oneDNN off: onednn_available) unless
  `float_products`: then
  they multiply the same integers in float32 against the constants
  (ops.int8_products._float_product), at the float32 product's speed where every int8 product
  TensorFlow has there is slower, but each trace holds the kernels in float32 (~1.25 GB more
  RSS a trace at base size). Decoding asks for it (its steps read every weight each token).

  >>> with constant_int8_weights():  # doctest: +SKIP
  ...   forward = tf.function(lambda x: model(x)["sequence_output"])
  ...   forward(inputs)  # traced here, inside the context
  """
  with _float_products.set(bool(float_products)):
    yield


_onednn = {}


def onednn_available() -> bool:
  """Whether this TensorFlow runs QuantizedMatMulWithBias on CPU, checked once on a tiny
  product: a oneDNN build with oneDNN on (by default only on CPUs with AVX-512 VNNI / BF16 or
  AMX; elsewhere TF_ENABLE_ONEDNN_OPTS=1 when TensorFlow loads, which xlnet_tf sets: its
  __init__)."""
  return _onednn_int8_kernel()


def _onednn_int8_kernel() -> bool:
  """onednn_available's check (row_top asks it directly: what the CPU computes, whatever a
  test claims of the path)."""
  if "available" not in _onednn:
    with tf.init_scope():
      try:
        product, _, _ = tf.raw_ops.QuantizedMatMulWithBias(
            a=tf.zeros([1, 4], tf.quint8), b=tf.zeros([4, 2], tf.qint8), bias=tf.zeros([2]),
            min_a=0.0, max_a=255.0, min_b=-127.0, max_b=127.0, Toutput=tf.qint32)
        _onednn["available"] = product.shape == (1, 2)
      except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
              tf.errors.UnimplementedError):
        _onednn["available"] = False
  return _onednn["available"]


def warn_without_onednn() -> None:
  """A RuntimeWarning (once a place) where an x86 TensorFlow runs without oneDNN's int8 product
  and nobody asked for that (TF_ENABLE_ONEDNN_OPTS=0): TensorFlow was loaded before xlnet_tf
  could turn oneDNN on (utils.cpu_features.default_onednn_on), so the int8 model computes at
  float32 speed or below."""
  if cpu_features.is_x86() and not onednn_available() and not cpu_features.onednn_switched_off():
    switch = cpu_features.ONEDNN_SWITCH
    warnings.warn(
        "TensorFlow runs without oneDNN in this process (it was imported before xlnet_tf, "
        f"which sets {switch}=1 when it loads first), so the int8 model's products run at "
        f"float32 speed or below; import xlnet_tf first, or set {switch}=1 before TensorFlow "
        "loads, for oneDNN's int8 product (docs/performance.md)", RuntimeWarning, stacklevel=3)


def constant_weights_requested() -> bool:
  """Whether this thread is inside constant_int8_weights (whether or not products traced now
  can take that path: uses_constant_weights)."""
  return _float_products.value() is not None


def uses_constant_weights() -> bool:
  """Whether a product traced now reads its kernel as a constant: inside
  constant_int8_weights, traced (not eager), outside XLA, on a TensorFlow with oneDNN's int8
  kernel or, asked for (`float_products`), the float32 product of the integers without it."""
  return (constant_weights_requested() and not tf.executing_eagerly()
          and not in_xla_context()
          and (onednn_available() or _float_products.value()))


def numpy_value(variable):
  """A variable's (or tensor's) value now, as NumPy: what a constant kernel holds."""
  with tf.init_scope():
    return tf.convert_to_tensor(variable).numpy()


def constant_kernel(kernel, kernel_scale, transpose_kernel):
  """(int8 kernel [In, Out], column sums, scale [Out]) as NumPy: the values when traced."""
  with tf.init_scope():
    kernel = tf.convert_to_tensor(kernel).numpy()
    kernel_scale = tf.cast(kernel_scale, tf.float32).numpy()
  if transpose_kernel:
    kernel = np.ascontiguousarray(kernel.T)
  return kernel, kernel.astype(np.int32).sum(axis=0).astype(np.float32), kernel_scale


def reshaped_kernel(variable, shape):
  """A variable's value reshaped; with constant weights (uses_constant_weights), read now as
  NumPy (the product puts it into the graph as a constant)."""
  if uses_constant_weights():
    return np.reshape(numpy_value(variable), shape)
  return tf.reshape(variable, shape)
