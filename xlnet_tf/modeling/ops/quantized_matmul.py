"""int8 products for quantized models: weights int8 per output channel, activations int8 per row.

What it computes: `inputs [..., In] x kernel [In, Out]` with the kernel stored as
round(kernel * scale) in int8, scale = 127 / max|kernel column| (one per output channel, as
Keras' int8 Dense: `quantize_kernel`), and each row of the inputs quantized when called
(dynamic, per token) to 256 levels over [min(row, 0), max(row, 0)] with a zero point
(`_quantized_rows`); the product in integers (int32 accumulation), corrected for the zero point
with the kernel's column sums, then divided by both scales. `XLNetModel.quantize("int8")`
stores the projections this way. The zero point matters after gelu, whose outputs are
lopsided: it halves the error of the feed-forward's second product (base, random weights:
the whole model's sequence_output 1.93% -> 1.79% from float).

Why these kernels (measured on the AMD EPYC with AVX-512 VNNI, docs/performance.md#quantization):
- `int8_matmul`'s default: the product as an s8 x s8 -> s32 `dot` inside one `compiled` region
  with the quantization around it (traced inline in an XLA step, compiled on its own in a step
  without XLA). XLA's CPU backend runs it at ~700 GOP/s against ~450 GFLOP/s in float32; no
  XLA CPU option reaches the VNNI rate, and TensorFlow's own int8 MatMul (Eigen) runs at ~90.
- in `constant_int8_weights()` (traced without XLA): oneDNN's u8 x s8 inner product
  (`QuantizedMatMulWithBias`), ~1,700 GOP/s, near ONNX Runtime's 1,900. oneDNN reorders the
  weights for VNNI at every call unless they are graph constants (2.4 ms of the 3.8 a
  768 x 3072 product takes); so in that context the kernels are read once, when traced, and
  put into the graph as constants.
"""

import contextlib
import threading
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from xlnet_tf.modeling.ops.compile import compiled, in_xla_context

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


def _quantized_rows(rows, offset):
  """rows [R, In] float -> (quantized float32 [R, In] in offset + 0..255, row_scale [R, 1],
  zero_point [R, 1]): row ~= (quantized - zero_point) / row_scale. offset -128: int8 levels;
  0: uint8."""
  rows = tf.cast(rows, tf.float32)
  low = tf.minimum(tf.reduce_min(rows, axis=-1, keepdims=True), 0.0)  # 0 stays in range
  high = tf.maximum(tf.reduce_max(rows, axis=-1, keepdims=True), 0.0)
  row_scale = 255.0 / (high - low + EPSILON)
  zero_point = tf.round(offset - low * row_scale)  # low -> offset
  quantized = tf.clip_by_value(tf.round(rows * row_scale) + zero_point, offset, offset + 255.0)
  return quantized, row_scale, zero_point


def _dequantized(product, row_scale, zero_point, column_sums, kernel_scale):
  """sum_k (q_k - z) w_k = q . w - z * sum_k w_k, divided by both scales: [R, Out] float32."""
  corrected = tf.cast(product, tf.float32) - zero_point * column_sums[None]
  return corrected / (row_scale * tf.cast(kernel_scale, tf.float32))


def _xla_int8_matmul(rows, kernel, kernel_scale, transpose_kernel=False):
  """rows [R, In] float x kernel int8 -> [R, Out] float32 (an s8 x s8 -> s32 dot)."""
  quantized, row_scale, zero_point = _quantized_rows(rows, -128.0)
  product = tf.linalg.matmul(tf.cast(quantized, tf.int8), kernel, transpose_b=transpose_kernel,
                             output_type=tf.int32)  # [R, Out]
  column_sums = tf.reduce_sum(tf.cast(kernel, tf.int32), axis=1 if transpose_kernel else 0)
  return _dequantized(product, row_scale, zero_point, tf.cast(column_sums, tf.float32),
                      kernel_scale)


_compiled_products = {}


def _compiled_int8_matmul(transpose_kernel, dtype):
  """The compiled region for one layout and input dtype, with one trace for every shape (the
  projections of a model call it with several)."""
  key = (bool(transpose_kernel), tf.as_dtype(dtype))
  if key not in _compiled_products:
    signature = [tf.TensorSpec([None, None], key[1]), tf.TensorSpec([None, None], tf.int8),
                 tf.TensorSpec([None], tf.float32)]
    _compiled_products[key] = compiled(
        lambda rows, kernel, scale: _xla_int8_matmul(rows, kernel, scale, key[0]), signature)
  return _compiled_products[key]


# ---- constant weights: oneDNN's u8 x s8 kernel ---------------------------------------------
_settings = threading.local()


@contextlib.contextmanager
def constant_int8_weights():
  """int8 products traced in this context (on this thread) outside XLA read their kernels
  once, when traced, as graph constants, and multiply with oneDNN's u8 x s8 kernel (VNNI):
  2-2.5x the speed of the default path for a base model's forward on CPU. The traced function
  then holds a copy of the weights: changing the model's weights afterwards does not reach it
  (trace again). Eager calls, XLA-compiled functions and TensorFlow builds without the oneDNN
  kernel take the default path.

  >>> with constant_int8_weights():  # doctest: +SKIP
  ...   forward = tf.function(lambda x: model(x)["sequence_output"])
  ...   forward(inputs)  # traced here, inside the context
  """
  previous = getattr(_settings, "constant", False)
  _settings.constant = True
  try:
    yield
  finally:
    _settings.constant = previous


_onednn = {}


def onednn_available() -> bool:
  """Whether this TensorFlow runs QuantizedMatMulWithBias on CPU (oneDNN builds), checked once
  on a tiny product."""
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


def _uses_constant_weights() -> bool:
  return (getattr(_settings, "constant", False) and not tf.executing_eagerly()
          and not in_xla_context() and onednn_available())


_quantizers = {}


def _quantized_u8_rows(rows):
  """_quantized_rows in uint8, compiled (one trace per input dtype for every shape)."""
  if rows.dtype not in _quantizers:
    _quantizers[rows.dtype] = compiled(lambda rows: _quantized_rows(rows, 0.0),
                                       [tf.TensorSpec([None, None], rows.dtype)])
  return _quantizers[rows.dtype](rows)


_compiled_dequantized = compiled(_dequantized, [
    tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, 1], tf.float32),
    tf.TensorSpec([None, 1], tf.float32), tf.TensorSpec([None], tf.float32),
    tf.TensorSpec([None], tf.float32)])


def _onednn_int8_matmul(rows, kernel, kernel_scale, transpose_kernel):
  """rows [R, In] float x the kernel's values now, as constants -> [R, Out] float32."""
  with tf.init_scope():  # the values when traced
    kernel = tf.convert_to_tensor(kernel).numpy()
    kernel_scale = tf.cast(kernel_scale, tf.float32).numpy()
  if transpose_kernel:
    kernel = np.ascontiguousarray(kernel.T)
  column_sums = kernel.astype(np.int32).sum(axis=0).astype(np.float32)
  quantized, row_scale, zero_point = _quantized_u8_rows(rows)
  # Scale 1 for both operands (0..255, -127..127): the exact int32 dot product.
  product, _, _ = tf.raw_ops.QuantizedMatMulWithBias(
      a=tf.bitcast(tf.cast(quantized, tf.uint8), tf.quint8),
      b=tf.bitcast(tf.constant(kernel), tf.qint8), bias=tf.zeros([kernel.shape[1]]),
      min_a=0.0, max_a=255.0, min_b=-float(INT8_RANGE), max_b=float(INT8_RANGE),
      Toutput=tf.qint32)
  return _compiled_dequantized(tf.bitcast(product, tf.int32), row_scale, zero_point,
                               tf.constant(column_sums), tf.constant(kernel_scale))


# ---- the products the layers call ------------------------------------------------------------
def int8_matmul(inputs, kernel, kernel_scale, transpose_kernel=False):
  """[..., In] float x kernel int8 [In, Out] (or [Out, In] with `transpose_kernel`), scale
  [Out] -> [..., Out] in the inputs' dtype (see the module docstring). Inference only: no
  gradient flows through the rounding."""
  rows = tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])  # [rows, In]
  if _uses_constant_weights():
    output = _onednn_int8_matmul(rows, kernel, kernel_scale, transpose_kernel)
  else:
    kernel = tf.convert_to_tensor(kernel)
    kernel_scale = tf.cast(kernel_scale, tf.float32)  # Keras' Dense scale is autocast
    output = _compiled_int8_matmul(transpose_kernel, inputs.dtype)(rows, kernel, kernel_scale)
  out_width = kernel.shape[0] if transpose_kernel else kernel.shape[-1]
  output = tf.cast(tf.reshape(output, tf.concat([tf.shape(inputs)[:-1], [out_width]], 0)),
                   inputs.dtype)
  output.set_shape(inputs.shape[:-1].concatenate([out_width]))
  return output


def int8_projection(states, kernel: Int8Kernel):
  """states [..., D] -> [..., N, H] (or, with kernel.reduces_heads, [..., N, H] -> [..., D])
  through an Int8Kernel [D, N, H]."""
  d_model, heads, head_size = kernel.values.shape
  matrix = _reshaped(kernel.values, [d_model, heads * head_size])  # [D, N * H]
  if kernel.reduces_heads:
    flat = tf.reshape(states, tf.concat([tf.shape(states)[:-2], [heads * head_size]], 0))
    flat.set_shape(states.shape[:-2].concatenate([heads * head_size]))
    return int8_matmul(flat, matrix, kernel.scale, transpose_kernel=True)  # [..., D]
  output = int8_matmul(states, matrix, _reshaped(kernel.scale, [heads * head_size]))
  output = tf.reshape(output, tf.concat([tf.shape(states)[:-1], [heads, head_size]], 0))
  output.set_shape(states.shape[:-1].concatenate([heads, head_size]))
  return output


def _reshaped(variable, shape):
  """A variable's value reshaped; in constant_int8_weights (traced outside XLA), read now as
  NumPy (int8_matmul puts it into the graph as a constant)."""
  if _uses_constant_weights():
    with tf.init_scope():
      return np.reshape(tf.convert_to_tensor(variable).numpy(), shape)
  return tf.reshape(variable, shape)
