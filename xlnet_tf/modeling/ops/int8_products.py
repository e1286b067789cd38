"""int8 products for quantized models: `inputs [..., In] x kernel [In, Out]` in integers.

What it computes: the inputs' rows quantized when called (ops.int8_packing.quantized_rows:
per row, with a zero point) times the int8 kernel (quantized per output channel,
int8_packing.quantize_kernel), accumulated in int32, then dequantized (int8_packing.dequantized:
the zero point corrected with the kernel's column sums, both scales divided out).
`int8_matmul` is the product; `int8_projection` and `int8_projections` the attention's
projections through int8_packing.Int8Kernel [D, N, H]; `int8_two_products` the
feed-forward's two in a row.

Why these kernels (measured on the AMD EPYC with AVX-512 VNNI, docs/performance.md#quantization):
- `int8_matmul`'s default: the product as an s8 x s8 -> s32 `dot` inside one `compiled` region
  with the quantization around it (traced inline in an XLA step, compiled on its own in a step
  without XLA). XLA's CPU backend runs it at ~700 GOP/s against ~450 GFLOP/s in float32; no
  XLA CPU option reaches the VNNI rate, and TensorFlow's own int8 MatMul (Eigen) runs at ~90.
- in `constant_int8_weights()` (traced without XLA): oneDNN's u8 x s8 inner product
  (`QuantizedMatMulWithBias`), ~1,700 GOP/s, near ONNX Runtime's 1,900. oneDNN reorders the
  weights for VNNI at every call unless they are graph constants (2.4 ms of the 3.8 a
  768 x 3072 product takes); so in that context the kernels are read once, when traced, and
  put into the graph as constants. Around each product there, the compiled regions do what the
  layers would do in separate ops: the quantizer writes uint8, the attention's projections
  come out heads first with their biases added (`int8_projection(heads_first=True, plus=...)`),
  an ops.int8_epilogues.Epilogue (activation, residual LayerNorm) runs in the dequantization
  region (the feed-forward's first one also quantizes for the second product:
  `int8_two_products`), and the projections of the same rows share one product
  (`int8_projections`: keys, values, queries).
  Interleaved in one run against the version without them: base 4x128 forward 1.03x, greedy
  generation at batch 1 1.05x (docs/performance.md#quantization).
"""

import numpy as np
import tensorflow as tf

from xlnet_tf.modeling.ops.compile import in_xla_context
from xlnet_tf.modeling.ops.int8_epilogues import dequantized_then
from xlnet_tf.modeling.ops.int8_packing import (INT8_RANGE, Int8Kernel, constant_kernel,
                                                dequantized, numpy_value, onednn_available,
                                                quantized_rows, quantized_u8_rows, region,
                                                reshaped_kernel, u8_rows, uses_constant_weights)
from xlnet_tf.modeling.ops.shapes import reshape_target, rows_target, static_or_dynamic_dim


def _xla_int8_matmul(rows, kernel, kernel_scale, transpose_kernel=False):
  """rows [R, In] float x kernel int8 -> [R, Out] float32 (an s8 x s8 -> s32 dot)."""
  quantized, row_scale, zero_point = quantized_rows(rows, -128.0)
  quantized = tf.cast(quantized, tf.int8)

  def integer_product(rows):  # [R, Out]
    return tf.linalg.matmul(rows, kernel, transpose_b=transpose_kernel, output_type=tf.int32)
  if in_xla_context():
    # XLA's CPU dot of a single int8 row is an element-wise loop 6x slower than the matrix
    # product it runs for two (768 x 3072: 4.0 against 0.65 ms; a decoding step at batch 1
    # has 61): one row is multiplied twice and one copy kept. XLA resolves the condition
    # when it compiles the shape.
    product = tf.cond(tf.shape(quantized)[0] == 1,
                      lambda: integer_product(tf.concat([quantized, quantized], 0))[:1],
                      lambda: integer_product(quantized))
  else:  # plain ops (ops.compile.without_xla): TensorFlow's own int8 MatMul
    product = integer_product(quantized)
  column_sums = tf.reduce_sum(tf.cast(kernel, tf.int32), axis=1 if transpose_kernel else 0)
  return dequantized(product, row_scale, zero_point, tf.cast(column_sums, tf.float32),
                     kernel_scale)


def _compiled_int8_matmul(transpose_kernel, dtype):
  """The compiled region for one layout and input dtype."""
  transpose_kernel, dtype = bool(transpose_kernel), tf.as_dtype(dtype)
  return region(("int8 matmul", transpose_kernel, dtype),
                lambda rows, kernel, scale: _xla_int8_matmul(rows, kernel, scale,
                                                             transpose_kernel),
                [tf.TensorSpec([None, None], dtype), tf.TensorSpec([None, None], tf.int8),
                 tf.TensorSpec([None], tf.float32)])


# ---- constant weights: oneDNN's u8 x s8 kernel ---------------------------------------------
def _onednn_product(quantized, kernel):
  """uint8 rows [R, In] x a NumPy int8 kernel [In, Out] (a graph constant) -> int32 [R, Out]:
  oneDNN's u8 x s8 kernel, or _float_product where TensorFlow has none (reached only with
  constant_int8_weights(float_products=True): int8_packing.uses_constant_weights)."""
  if not onednn_available():
    return _float_product(quantized, kernel)
  # Scale 1 for both operands (0..255, -127..127): the exact int32 dot product.
  product, _, _ = tf.raw_ops.QuantizedMatMulWithBias(
      a=tf.bitcast(quantized, tf.quint8),
      b=tf.bitcast(tf.constant(kernel), tf.qint8), bias=tf.zeros([kernel.shape[1]]),
      min_a=0.0, max_a=255.0, min_b=-float(INT8_RANGE), max_b=float(INT8_RANGE),
      Toutput=tf.qint32)
  return tf.bitcast(product, tf.int32)


# Grappler's constant folding makes constants of at most this many bytes (its
# kMaxConstantSize): a Cast of a larger constant would run at every call.
_FOLDED_CONSTANT_BYTES = 10 * 1024 * 1024


def _float_product(quantized, kernel):
  """_onednn_product where TensorFlow has no oneDNN int8 kernel (loaded with oneDNN off): the
  same integers multiplied in float32 (each term and every partial sum below 2^24 is exact),
  at the float32 product's speed, where every int8 product TensorFlow has there runs slower
  (docs/performance.md). The graph holds the int8 kernel and a Cast that Grappler folds into a
  float32 constant when it optimizes the graph (the trace's own graph stays int8-sized); a
  kernel too large to fold (the tied LM projection: 98 MB in float32; 768 x 32,000, 44 ms a
  call cast against 8.7 ms folded) goes in as float32."""
  if kernel.size * 4 <= _FOLDED_CONSTANT_BYTES:
    weights = tf.cast(tf.constant(kernel), tf.float32)
  else:
    weights = tf.constant(kernel.astype(np.float32))
  product = tf.matmul(tf.cast(quantized, tf.float32), weights)
  return tf.cast(tf.round(product), tf.int32)


def _onednn_int8_matmul(rows, kernel, kernel_scale, transpose_kernel, epilogue=None,
                        quantize=False):
  """rows [R, In] float, or u8_rows's (uint8 rows, row scales, zero points), x the kernel's
  values now, as constants -> [R, Out] float32 (then `epilogue`; with `quantize`, as
  u8_rows)."""
  kernel, column_sums, kernel_scale = constant_kernel(kernel, kernel_scale, transpose_kernel)
  quantized, row_scale, zero_point = rows if isinstance(rows, tuple) else quantized_u8_rows(rows)
  return dequantized_then(epilogue, _onednn_product(quantized, kernel), row_scale, zero_point,
                          tf.constant(column_sums), tf.constant(kernel_scale), quantize)


# Heads-first regions: the attention's batched products read [B, N, L, H]. Transposing, and
# adding the attention biases to the queries, inside the quantization regions saves the
# separate Transpose and AddV2 ops around every projection (5 transposes and 3 additions a
# layer).
def _u8_heads_first_rows(heads_first):
  """[B, N, L, H] -> the uint8 rows [B * L, N * H] of its [B, L, N, H] layout, row scales,
  zero points."""
  batch, heads, length, head_size = (tf.shape(heads_first)[i] for i in range(4))
  rows = tf.reshape(tf.transpose(heads_first, [0, 2, 1, 3]), [batch * length, heads * head_size])
  return u8_rows(rows)


def _dequantized_heads_first(product, row_scale, zero_point, column_sums, kernel_scale, biases,
                             *, columns, heads, dtype):
  """Columns [start, stop) of an int32 product [B, L, Out] (projections side by side), one
  projection [B, N, L, H] -> (that projection plus each bias [N, H]), or (the projection,)
  without biases; in `dtype`. column_sums and kernel_scale: the projection's own."""
  values = dequantized(product[:, :, columns[0]:columns[1]], row_scale, zero_point,
                       column_sums, kernel_scale)
  batch, length = tf.shape(product)[0], tf.shape(product)[1]
  values = tf.transpose(tf.reshape(values, [batch, length, heads, -1]), [0, 2, 1, 3])
  if not biases:
    return (tf.cast(values, dtype),)
  return tuple(tf.cast(values + tf.cast(bias, tf.float32)[:, None], dtype) for bias in biases)


def _onednn_projections_heads_first(states, kernels, plus):
  """states [B, L, D] through projections' Int8Kernels side by side, one product -> see
  int8_projections."""
  matrices, scales, layouts = [], [], []
  for kernel, biases in zip(kernels, plus):
    d_model, heads, head_size = kernel.values.shape
    matrices.append(np.reshape(numpy_value(kernel.values), [d_model, heads * head_size]))
    scales.append(np.reshape(numpy_value(kernel.scale), [heads * head_size]))
    layouts.append((heads, head_size, len(biases)))
  matrix, column_sums, kernel_scale = constant_kernel(
      np.concatenate(matrices, axis=1), np.concatenate(scales), False)
  quantized, row_scale, zero_point = quantized_u8_rows(
      tf.reshape(states, [-1, states.shape[-1]]))

  def by_position(tensor):  # [B * L, X] -> [B, L, X]
    return tf.reshape(tensor, reshape_target(states, [0, 1], tensor.shape[1:]))
  product = by_position(_onednn_product(quantized, matrix))
  row_scale, zero_point = by_position(row_scale), by_position(zero_point)
  dtype = tf.as_dtype(states.dtype)
  results, start = [], 0
  for (heads, head_size, bias_count), biases in zip(layouts, plus):
    columns = (start, start + heads * head_size)
    start = columns[1]
    # A region per projection, each reading its columns: one region writing them all
    # compiled to slower code (XLA's CPU multi-output fusion).
    projection_region = region(
        ("dequantize heads first", columns, heads, bias_count, dtype.name),
        lambda *args, columns=columns, heads=heads: _dequantized_heads_first(
            *args[:5], args[5:], columns=columns, heads=heads, dtype=dtype),
        [tf.TensorSpec([None, None, None], tf.int32),
         tf.TensorSpec([None, None, 1], tf.float32), tf.TensorSpec([None, None, 1], tf.float32),
         tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.float32)]
        + [tf.TensorSpec([None, None])] * bias_count)
    outputs = projection_region(product, row_scale, zero_point,
                                tf.constant(column_sums[columns[0]:columns[1]]),
                                tf.constant(kernel_scale[columns[0]:columns[1]]),
                                *[tf.cast(bias, tf.float32) for bias in biases])
    for output in outputs:
      output.set_shape([states.shape[0], heads, states.shape[1], head_size])
    results.append(list(outputs) if bias_count else outputs[0])
  return results


def _onednn_reduce_heads_first(heads_first, kernel, epilogue):
  """[B, N, L, H] through an output projection's Int8Kernel -> [B, L, D] (then `epilogue`)."""
  d_model, heads, head_size = kernel.values.shape
  matrix, column_sums, kernel_scale = constant_kernel(
      np.reshape(numpy_value(kernel.values), [d_model, heads * head_size]), kernel.scale, True)
  quantized, row_scale, zero_point = region(
      ("quantize heads first", heads_first.dtype), _u8_heads_first_rows,
      [tf.TensorSpec([None] * 4, heads_first.dtype)])(heads_first)
  output = dequantized_then(epilogue, _onednn_product(quantized, matrix), row_scale,
                            zero_point, tf.constant(column_sums), tf.constant(kernel_scale))
  output = tf.cast(tf.reshape(output, reshape_target(heads_first, [0, 2], [d_model])),
                   heads_first.dtype)
  output.set_shape([heads_first.shape[0], heads_first.shape[2], d_model])
  return output


# ---- the products the layers call ------------------------------------------------------------
def int8_matmul(inputs, kernel, kernel_scale, transpose_kernel=False, epilogue=None):
  """[..., In] float x kernel int8 [In, Out] (or [Out, In] with `transpose_kernel`), scale
  [Out] -> [..., Out] in the inputs' dtype (see the module docstring), then `epilogue` (an
  ops.int8_epilogues.Epilogue keeping the width Out) on its rows. Inference only: no gradient
  flows through the rounding."""
  rows = tf.reshape(inputs, [-1, static_or_dynamic_dim(inputs, -1)])  # [rows, In]
  if uses_constant_weights():
    output = _onednn_int8_matmul(rows, kernel, kernel_scale, transpose_kernel, epilogue)
  else:
    kernel = tf.convert_to_tensor(kernel)
    kernel_scale = tf.cast(kernel_scale, tf.float32)  # Keras' Dense scale is autocast
    output = _compiled_int8_matmul(transpose_kernel, inputs.dtype)(rows, kernel, kernel_scale)
    if epilogue is not None:
      output = epilogue(output)
  return _like_inputs(output, inputs, kernel.shape[0] if transpose_kernel else kernel.shape[-1])


def int8_two_products(inputs, first, second):
  """The int8_matmul of the int8_matmul of `inputs`: two products in a row (a
  feed-forward), each given as (kernel [In, Out], scale [Out], Epilogue or None). In
  constant_int8_weights the first product's dequantization region also quantizes its result
  for the second (one launch fewer, and the [R, Out] float rows between them are never
  written)."""
  if not uses_constant_weights():
    hidden = int8_matmul(inputs, *first[:2], epilogue=first[2])
    return int8_matmul(hidden, *second[:2], epilogue=second[2])
  rows = tf.reshape(inputs, [-1, static_or_dynamic_dim(inputs, -1)])  # [rows, In]
  hidden = _onednn_int8_matmul(rows, *first[:2], False, first[2], quantize=True)
  output = _onednn_int8_matmul(hidden, *second[:2], False, second[2])
  return _like_inputs(output, inputs, second[0].shape[-1])


def _like_inputs(output, inputs, out_width):
  """Rows [R, Out] as [..., Out] of inputs [..., In], in their dtype."""
  output = tf.cast(tf.reshape(output, rows_target(inputs, out_width)), inputs.dtype)
  output.set_shape(inputs.shape[:-1].concatenate([out_width]))
  return output


def int8_projection(states, kernel: Int8Kernel, heads_first=False, plus=(), epilogue=None):
  """states [..., D] -> [..., N, H] (or, with kernel.reduces_heads, [..., N, H] -> [..., D])
  through an Int8Kernel [D, N, H].

  heads_first: the attention's layout, heads before positions: states [B, L, D] ->
  [B, N, L, H] (with reduces_heads, [B, N, L, H] -> [B, L, D]); `plus` (biases [N, H], not
  with reduces_heads): a list instead, the projection plus each bias. In
  constant_int8_weights the transposes and additions run inside the quantization regions.
  `epilogue` (an output projection's): see int8_matmul."""
  if plus and (kernel.reduces_heads or not heads_first):
    raise ValueError("int8_projection: `plus` takes a heads_first projection to heads")
  if epilogue is not None and not kernel.reduces_heads:
    raise ValueError("int8_projection: an epilogue follows an output projection only")
  d_model, heads, head_size = kernel.values.shape
  if heads_first and uses_constant_weights():
    if kernel.reduces_heads:
      return _onednn_reduce_heads_first(states, kernel, epilogue)
    return _onednn_projections_heads_first(states, [kernel], [plus])[0]
  matrix = reshaped_kernel(kernel.values, [d_model, heads * head_size])  # [D, N * H]
  if kernel.reduces_heads:
    if heads_first:
      states = tf.transpose(states, [0, 2, 1, 3])
    flat = tf.reshape(states, tf.concat([tf.shape(states)[:-2], [heads * head_size]], 0))
    flat.set_shape(states.shape[:-2].concatenate([heads * head_size]))
    return int8_matmul(flat, matrix, kernel.scale, transpose_kernel=True,
                       epilogue=epilogue)  # [..., D]
  output = int8_matmul(states, matrix, reshaped_kernel(kernel.scale, [heads * head_size]))
  output = tf.reshape(output, tf.concat([tf.shape(states)[:-1], [heads, head_size]], 0))
  output.set_shape(states.shape[:-1].concatenate([heads, head_size]))
  if not heads_first:
    return output
  output = tf.transpose(output, [0, 2, 1, 3])
  return [output + tf.cast(bias, output.dtype)[:, None] for bias in plus] if plus else output


def int8_projections(states, kernels, plus):
  """[int8_projection(states, kernel, heads_first=True, plus=biases) for each kernel and its
  biases in `plus`]: several projections of the same states [B, L, D] (the attention's keys,
  values and queries). In constant_int8_weights, one product with the kernels side by side and
  one dequantization region: a 768 x 2304 product runs at 1.4x the rate of three 768 x 768
  ones (oneDNN, 2 threads)."""
  if not uses_constant_weights():
    return [int8_projection(states, kernel, heads_first=True, plus=biases)
            for kernel, biases in zip(kernels, plus)]
  return _onednn_projections_heads_first(states, list(kernels), [tuple(b) for b in plus])
