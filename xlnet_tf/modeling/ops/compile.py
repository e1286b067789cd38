"""Compile element-wise regions with XLA when the surrounding step is not compiled.

bfloat16 steps run without XLA on CPU (XLA's CPU matmuls do not use the bfloat16 units; TF's
oneDNN kernels do). Their element-wise regions (attention masking/softmax/dropout, activation,
residual + LayerNorm) then run as a dozen separate passes over the activations. Wrapping such
a region in `compiled` fuses it, and its gradient, into one XLA kernel each. Inside a step that
XLA already compiles, the region is traced inline instead: a nested compiled function, with
its gradient, compiled pathologically slowly there (measured: 22 s instead of 2 s per step).
"""

import contextlib
import functools

import tensorflow as tf

from xlnet_tf.utils.thread_settings import ThreadSetting

# TensorFlow has no public way to ask whether the code being traced will be compiled by XLA;
# tf.function(jit_compile=True) records it on the graph, read here through TensorFlow's own
# helper. This is the only private TensorFlow API the project uses. If a TensorFlow version
# moves it, `in_xla_context` answers False: still correct, but the regions are then compiled
# nested inside XLA steps (10x slower steps), so tests/modeling/ops/test_compile.py checks it works.
try:
  from tensorflow.python.framework import ops as _framework_ops
  from tensorflow.python.ops import control_flow_util as _control_flow_util

  def in_xla_context() -> bool:
    """True while tracing inside tf.function(jit_compile=True) (or an XLA-compiled parent)."""
    return _control_flow_util.GraphOrParentsInXlaContext(_framework_ops.get_default_graph())
except ImportError:  # pragma: no cover - a TensorFlow layout without the helper
  def in_xla_context() -> bool:
    return False


_inline = ThreadSetting(default=False)


@contextlib.contextmanager
def without_xla():
  """Regions traced in this context (on this thread) become plain TensorFlow ops.

  For graphs that must run where XLA may not: TF Serving refuses a compiled function unless
  started with --xla_cpu_compilation_enabled, and its GPU builds have no XLA compiler."""
  with _inline.set(True):
    yield


def compiled(function, input_signature=None):
  """`function` compiled by XLA, or traced inline when already inside an XLA computation (or
  in `without_xla`).

  `region.tracing_count()` (on this and the regions below) counts the traces of its compiled
  functions: one per input signature (shapes, dtypes, Python settings), then fixed.
  `input_signature`: tf.function's, for a region called with many shapes (one trace; XLA
  still compiles each shape it runs).
  """
  # No AutoGraph: the regions hold no Python control flow over tensors, and converting them
  # (and every function they call) cost ~40 ms each at every first trace (~0.8 s of a tiny
  # model's first non-XLA train step).
  jitted = tf.function(function, jit_compile=True, input_signature=input_signature,
                       autograph=False)

  @functools.wraps(function)
  def call(*args, **kwargs):
    if in_xla_context() or _inline.value():
      return function(*args, **kwargs)
    return jitted(*args, **kwargs)

  call.tracing_count = jitted.experimental_get_tracing_count
  return call


def _tracing_count_of(*regions):
  return lambda: sum(region.tracing_count() for region in regions)


def _as_tensors(inputs):
  """A region's inputs read as tensors. Eager tf.custom_gradient refuses a function that reads
  a variable it was not handed as that very object, and a distributed (mirrored) variable
  passed in is read as its replica's component: read first, the region sees tensors only
  (what graph-mode custom_gradient does anyway); the gradient reaches the variable through
  the read."""
  return [tf.convert_to_tensor(x) for x in inputs]


def compiled_with_recomputed_gradient(function):
  """Like `compiled`, but the gradient recomputes `function` in one compiled backward kernel.

  Call as `region(*differentiable, **others)`: gradients flow to the positional float tensors
  only; `others` (masks, seeds, Python settings) are fixed. TensorFlow's gradient of a
  compiled function makes the forward kernel write out every intermediate the gradient needs
  (float32 copies of [B, L, F] activations, say) and a second kernel read them back; for
  element-wise regions that traffic cost more than the arithmetic (measured: gelu + dropout
  on [512, 3072] in bfloat16, forward + backward 15 ms that way, 7.5 ms recomputing). Dropout
  masks are recomputed from their stateless seeds, so they match the forward's.
  """
  forward = compiled(function)

  def vector_jacobian_product(upstream, differentiable, others):
    with tf.GradientTape() as tape:
      tape.watch(differentiable)
      output = function(*differentiable, **others)
    return tape.gradient(output, differentiable, output_gradients=upstream,
                         unconnected_gradients=tf.UnconnectedGradients.ZERO)

  backward = compiled(vector_jacobian_product)

  @functools.wraps(function)
  def call(*differentiable, **others):
    @tf.custom_gradient
    def region(*inputs):
      def gradient(upstream):
        return backward(upstream, list(inputs), others)
      return forward(*inputs, **others), gradient
    return region(*_as_tensors(differentiable))

  call.tracing_count = _tracing_count_of(forward, backward)
  return call


def compiled_with_gradient(forward, backward, finish_backward=None):
  """A compiled region with a written-out gradient, each compiled (or inlined) as `compiled`.

  forward(*inputs, **settings) -> (output, saved); backward(upstream, saved, input_dtypes,
  **settings) -> one gradient per input, in that input's dtype. Call as
  `region(*inputs, **settings)`; gradients flow to the positional inputs only. `saved` holds
  just what the gradient needs (e.g. probabilities and a dropout keep mask), where
  TensorFlow's own gradient of a compiled function makes the forward write out every
  intermediate in float32. `finish_backward(gradients, saved, **settings) -> gradients`, if
  given, runs after the compiled backward as plain TensorFlow ops (inlined inside an XLA step):
  for moving data that XLA's CPU code moves slowly (see attention.rel_shift_adjoint).

  `region(..., keep_for_gradient=False)` (inference) runs a forward that writes only the
  output; a gradient, if one is still asked for, then recomputes `saved` first.
  """
  forward_output = compiled(lambda *inputs, **settings: forward(*inputs, **settings)[0])
  forward, backward = compiled(forward), compiled(backward)

  def call(*inputs, keep_for_gradient=True, **settings):
    @tf.custom_gradient
    def region(*inputs):
      if keep_for_gradient:
        output, saved = forward(*inputs, **settings)
      else:
        output, saved = forward_output(*inputs, **settings), None

      def gradient(upstream):
        kept = saved if saved is not None else forward(*inputs, **settings)[1]
        gradients = backward(upstream, kept, [x.dtype for x in inputs], **settings)
        if finish_backward is not None:
          gradients = finish_backward(gradients, kept, **settings)
        return gradients
      return output, gradient
    return region(*_as_tensors(inputs))

  call.tracing_count = _tracing_count_of(forward_output, forward, backward)
  return call
