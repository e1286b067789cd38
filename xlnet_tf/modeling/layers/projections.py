"""The products of the attention and the feed-forward with their kernels: float or int8.

The layers multiply by a kernel only through a projection object, and the score and sublayer
code is the same for both kinds. `FloatHeadProjection` and `Int8HeadProjection` project
through the attention's kernels [D, N, H] (which one a layer gives is settled when it is
quantized: layers.quantization.Int8HeadKernels); `dense_projection` gives a feed-forward
Dense layer's, from the Dense layer's own quantization mode. An int8 projection computes what
the float one does, in int8 (ops.int8_products), and arranges it where int8 gains from that:
projections of the same states in one product, and the step after a product (`AfterProduct`)
inside its dequantization region.

Shapes: B batch, L length, D d_model, N heads, H head size; In / Out a Dense kernel's.
"""

import contextlib
from typing import Any, Callable, NamedTuple, Optional

import tensorflow as tf

from xlnet_tf.modeling.ops.compile import in_xla_context
from xlnet_tf.modeling.ops.flat_matmul import flat_matmul
from xlnet_tf.modeling.ops.int8_packing import Int8Kernel
from xlnet_tf.modeling.ops.int8_products import (int8_matmul, int8_projection,
                                                 int8_projections, int8_two_products)
from xlnet_tf.utils.thread_settings import ThreadSetting


def heads_first_layout(tensor):
  """[B, L, N, H] -> [B, N, L, H] (one row, L = 1, as decoding's new token: the same layout, a
  reshape instead of a transpose's copy)."""
  if tensor.shape[1] == 1:
    return tf.reshape(tensor, tf.concat([tf.shape(tensor)[:1], [tensor.shape[2], 1,
                                                                 tensor.shape[3]]], 0))
  return tf.transpose(tensor, [0, 2, 1, 3])


class AfterProduct(NamedTuple):
  """The step that follows a product (bias and activation, or the residual LayerNorm), in the
  two forms a projection may run it.

  separately: product -> output, the compiled region of xlnet_tf.modeling.ops (dropout, a
    gradient) run on the product: what float products, and int8 ones while training, do.
  epilogue: () -> ops.int8_epilogues.Epilogue, the same step for an int8 product's
    dequantization region, made when one runs it (its inputs are read then); None when it may
    not run there (training: dropout and a gradient).
  """
  separately: Callable
  epilogue: Optional[Callable] = None


# ---- the attention's kernels [D, N, H] ------------------------------------------------------
def _one_row_twice(product, states):
  """product(states [B, L, ...]), a product with the kernel. One with a single row (B = L = 1:
  decoding one token) is computed on that row twice and one copy kept: XLA's CPU compiler
  turns a one-row product with a [D, N, H] kernel into an element-wise loop 3-4x slower than
  the matrix product it keeps for two rows (measured at base size: 6.7 ms against 2.1 ms for
  12 768x768 projections)."""
  if states.shape[0] == 1 and states.shape[1] == 1:
    return product(tf.concat([states, states], axis=0))[:1]
  return product(states)


class FloatHeadProjection(NamedTuple):
  """A float kernel [D, N, H]: a variable, or its value read once for both streams.

  reduces_heads: an output projection [..., N, H] -> [..., D] (the attention's `o`)."""
  kernel: Any
  reduces_heads: bool = False

  @classmethod
  def of_layer(cls, layer, name, value=False):
    """Kernel `name` of `layer.HEAD_KERNELS` (its `.value` with `value`)."""
    attribute, reduces_heads = layer.HEAD_KERNELS[name]
    variable = getattr(layer, attribute)
    return cls(variable.value if value else variable, reduces_heads)

  def project(self, states, heads_first=False, plus=()):
    """states [B, L, D] -> [B, L, N, H] (reduces_heads: [B, L, N, H] -> [B, L, D]).

    heads_first: heads before positions on the heads' side: [B, L, D] -> [B, N, L, H]
    (reduces_heads: [B, N, L, H] -> [B, L, D]); `plus` (biases [N, H], heads_first only): a
    list instead, the projection plus each bias."""
    if self.reduces_heads:
      if heads_first:
        states = tf.transpose(states, [0, 2, 1, 3])
      if in_xla_context():
        return self._heads_reduced(states)
      return self._einsum("bqnh,dnh->bqd", states)
    projected = self._einsum("bld,dnh->blnh", states)
    if not heads_first:
      return projected
    projected = heads_first_layout(projected)
    return [projected + bias[:, None] for bias in plus] if plus else projected

  def _einsum(self, equation, states):
    """tf.einsum(equation, states, kernel) (_one_row_twice)."""
    kernel = tf.cast(self.kernel, states.dtype)  # float32 under mixed precision outside call()
    return _one_row_twice(lambda rows: tf.einsum(equation, rows, kernel), states)

  def _heads_reduced(self, states):
    """states [B, Q, N, H] . kernel [D, N, H] over (N, H) -> [B, Q, D] as a matmul with the
    kernel [D, N * H] transposed, for XLA: its einsum laid the kernel out anew at every call
    (12 copies of 768 x 768 per base decoding step, a third of a batch-1 step)."""
    width, heads, head_size = self.kernel.shape
    flat_kernel = tf.reshape(self.kernel, [width, heads * head_size])  # [Out, In]

    def product(rows):
      merged = tf.reshape(rows, tf.concat([tf.shape(rows)[:2], [heads * head_size]], 0))
      merged.set_shape(rows.shape[:2].concatenate([heads * head_size]))
      return flat_matmul(merged, flat_kernel, transpose_kernel=True)
    return _one_row_twice(product, states)

  def projections(self, states, others, plus=None):
    """[this projection and each of `others` of states [B, L, D], heads first (plus their
    biases: `plus`, one sequence each)]: one einsum each."""
    plus = plus or [()] * (1 + len(others))
    return [projection.project(states, heads_first=True, plus=biases)
            for projection, biases in zip((self, *others), plus)]

  def with_keys_values(self, states, keys, values, query_biases):
    """((keys, values) of states [B, L, D], heads first, through the projections `keys` and
    `values`; this query projection plus each of `query_biases` ({name: bias [N, H]}) or
    None). Float: None, the queries are projected where the scores read them; separate
    einsums cost the same as one over the kernels side by side."""
    del query_biases  # projected later, by project(..., plus=...)
    return tuple(keys.projections(states, [values])), None

  def output(self, attended, after: AfterProduct):
    """attended [B, N, Q, H] through this output projection -> [B, Q, D], then `after`."""
    return after.separately(self.project(attended, heads_first=True))


class Int8HeadProjection(NamedTuple):
  """An int8 kernel (ops.int8_packing.Int8Kernel); the methods of FloatHeadProjection, in
  int8 (ops.int8_products)."""
  kernel: Int8Kernel

  @classmethod
  def of_layer(cls, layer, name, value=False):
    """Kernel `name` of a quantized `layer` (Int8HeadKernels: the variables it holds)."""
    del value  # the int8 variables are read by the products
    _, reduces_heads = layer.HEAD_KERNELS[name]
    return cls(Int8Kernel(layer.int8_kernels[name], layer.int8_scales[name], reduces_heads))

  def project(self, states, heads_first=False, plus=()):
    """FloatHeadProjection.project in int8: with constant int8 weights, heads first, the
    transposes and additions run inside the quantization regions."""
    return int8_projection(states, self.kernel, heads_first=heads_first, plus=plus)

  def projections(self, states, others, plus=None):
    """FloatHeadProjection.projections in int8: with constant int8 weights, one product of
    the kernels side by side (ops.int8_products.int8_projections)."""
    kernels = [projection.kernel for projection in (self, *others)]
    return int8_projections(states, kernels, plus or [()] * len(kernels))

  def with_keys_values(self, states, keys, values, query_biases):
    """FloatHeadProjection.with_keys_values, the queries projected too: keys, values and
    queries of the same rows in one product."""
    keys, values, queries = keys.projections(states, [values, self],
                                             [(), (), list(query_biases.values())])
    return (keys, values), dict(zip(query_biases, queries))

  def output(self, attended, after: AfterProduct):
    """FloatHeadProjection.output in int8: `after.epilogue` (inference) runs inside the
    dequantization region."""
    if after.epilogue is None:
      return after.separately(self.project(attended, heads_first=True))
    return int8_projection(attended, self.kernel, heads_first=True, epilogue=after.epilogue())


# ---- the feed-forward's Dense layers [In, Out] ----------------------------------------------
_kernel_copies = ThreadSetting()


@contextlib.contextmanager
def kernels_read_transposed(copies):
  """Dense kernels traced in this context (on this thread) are read from their transposed
  copies: `copies` {kernel variable's ref(): its value transposed, [Out, In]}.

  For XLA's products of a few rows (a decoding step of several prompts): against a kernel
  stored [Out, In] XLA's CPU dots of 8-16 rows run faster than against the [In, Out] a Dense
  layer keeps, and a transpose written in the graph is folded back (docs/performance.md).
  The copies are the caller's: made from the current weights, read by value."""
  with _kernel_copies.set(copies):
    yield


class FloatDenseProjection(NamedTuple):
  """A float Dense layer; its kernel's value once `read` (the fused path reads it once for
  every stream), or its transposed copy in `kernels_read_transposed`."""
  dense: Any
  kernel: Any = None
  transposed: bool = False

  def read(self):
    """This projection with the kernel's value read now."""
    copies = _kernel_copies.value()
    copy = copies.get(self.dense.kernel.value.ref()) if copies else None
    if copy is not None:
      return self._replace(kernel=copy, transposed=True)
    return self._replace(kernel=self.dense.kernel.value)

  def layer(self, inputs):
    """The Dense layer on inputs [..., In] (kernel and bias): the plain path."""
    return self.dense(inputs)

  def product(self, inputs):
    """inputs [..., In] x the kernel read -> [..., Out] (ops.flat_matmul)."""
    return flat_matmul(inputs, self.kernel, transpose_kernel=self.transposed)

  def two_products(self, inputs, second, first_after: AfterProduct, second_after: AfterProduct):
    """second_after(second . first_after(this . inputs)): the feed-forward's two products,
    each followed by its step."""
    hidden = first_after.separately(self.product(inputs))
    return second_after.separately(second.product(hidden))


class Int8DenseProjection(NamedTuple):
  """A Dense layer quantized by Keras as int8 (kernel int8 [In, Out], kernel_scale [Out]);
  the methods of FloatDenseProjection in int8, with the zero point of ops.int8_packing, which
  Keras' int8 Dense does not have."""
  dense: Any

  def read(self):
    """This projection (the products read the int8 variables)."""
    return self

  def layer(self, inputs):
    """FloatDenseProjection.layer: the int8 product, plus the float bias."""
    return self.product(inputs) + tf.cast(self.dense.bias, inputs.dtype)

  def product(self, inputs):
    """FloatDenseProjection.product in int8 (ops.int8_products.int8_matmul)."""
    return int8_matmul(inputs, self.dense.kernel, self.dense.kernel_scale)

  def two_products(self, inputs, second, first_after: AfterProduct, second_after: AfterProduct):
    """FloatDenseProjection.two_products in int8: with epilogues (inference), each step runs
    in its product's dequantization region, and the first also quantizes for the second
    (ops.int8_products.int8_two_products; `second` is int8 too)."""
    if first_after.epilogue is None:
      hidden = first_after.separately(self.product(inputs))
      return second_after.separately(second.product(hidden))
    return int8_two_products(
        inputs, (self.dense.kernel, self.dense.kernel_scale, first_after.epilogue()),
        (second.dense.kernel, second.dense.kernel_scale, second_after.epilogue()))


def dense_projection(dense, owner):
  """The projection of `dense`, a Dense layer of `owner`: float, or int8 once quantized in
  int8 (by owner's `quantize`, or by Keras' Model.quantize walking the layers, which quantizes
  the Dense layers without calling owner's). Modes these projections do not compute raise
  rather than read a kernel wrongly."""
  mode = dense.quantization_mode
  if mode is None:
    return FloatDenseProjection(dense)
  if mode != "int8" or getattr(dense, "lora_enabled", False):
    raise NotImplementedError(
        f"{type(owner).__name__} '{owner.name}': its Dense '{dense.name}' is quantized as "
        f"{mode!r}{' with LoRA' if mode == 'int8' else ''}; this layer computes float or "
        "int8 (XLNetModel.quantize('int8'))")
  return Int8DenseProjection(dense)
