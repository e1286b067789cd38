"""Products over the last axis as one 2-D matmul: [..., In] x kernel -> [..., Out].

What it computes: `tf.einsum("...i,io->...o", inputs, kernel)` (or `"...i,oi->...o"` with
`transpose_kernel`, the tied LM projection against the word embedding [V, D]).

Why: TensorFlow's einsum gradient treats an ellipsis as broadcast dimensions. For the kernel it
computes `einsum("...o,...i->io...")` and then sums the leading axes away, so it writes out a
[In, Out, ...] tensor: for the tied projection at base size (V 32,000, D 768, 4 x 21 targets)
that is 2.1 G elements (8 GB in float32) per step. Since 06c9edf used `"...d,vd->...v"` there,
a base permutation-LM train step ran 2.2x slower (306 -> 134 tokens/s, float32, XLA),
and the cost grew with the vocabulary. Measured on the projection alone (forward + both
gradients, [4, 21, 768] x [32000, 768], float32, Intel Xeon): ellipsis einsum 2,247 ms under
XLA and 4,221 ms without, this 2-D matmul 114 ms and 93 ms. Folding the leading axes into the
rows first makes both gradients plain matmuls, whatever the rank of `inputs`.

The tied projection runs as (kernel . inputs^T)^T outside XLA: TensorFlow's (oneDNN's) MatMul
of a few rows against the transposed [32000, 768] embedding re-reads it slowly. Measured on an
AMD EPYC (AVX2, 2 cores), forward ms x . E^T against E . x^T: 2 rows 69 / 13 (a decoding
step's), 8 rows 36 / 16, 84 rows 44 / 36, 256 rows 182 / 92; forward and both gradients 84
rows 133 / 122; under XLA the two forms are equal within noise.
"""

import tensorflow as tf

from xlnet_tf.modeling.ops.compile import in_xla_context
from xlnet_tf.modeling.ops.shapes import rows_target, static_or_dynamic_dim


def flat_matmul(inputs, kernel, transpose_kernel=False):
  """[..., In] x kernel [In, Out] (or [Out, In] with `transpose_kernel`) -> [..., Out].

  The kernel is cast to the inputs' dtype (mixed precision keeps float32 variables)."""
  kernel = tf.cast(kernel, inputs.dtype)
  flat = tf.reshape(inputs, [-1, static_or_dynamic_dim(inputs, -1)])  # [rows, In]
  if transpose_kernel and not in_xla_context():
    # (kernel . flat^T)^T: the graph executor's product against a transposed [Out, In]
    # kernel of 32k rows runs 1.2-5.8x slower than the kernel first (2-256 rows; module
    # docstring); XLA runs both alike and keeps its graph.
    output = tf.transpose(tf.matmul(kernel, flat, transpose_b=True))  # [rows, Out]
  else:
    output = tf.matmul(flat, kernel, transpose_b=transpose_kernel)  # [rows, Out]
  static_width = kernel.shape[0] if transpose_kernel else kernel.shape[-1]
  if static_width is None:
    out_width = tf.shape(kernel)[:1] if transpose_kernel else tf.shape(kernel)[-1:]
    output = tf.reshape(output, tf.concat([tf.shape(inputs)[:-1], out_width], 0))
  else:
    output = tf.reshape(output, rows_target(inputs, static_width))
  output.set_shape(inputs.shape[:-1].concatenate([static_width]))  # what is known statically
  return output
