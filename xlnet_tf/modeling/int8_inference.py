"""A quantized model's inference traces hold its int8 weights as graph constants, by default.

oneDNN's u8 x s8 product runs at 2.4x its rate when the weights are graph constants (it
reorders variable weights at every call: ops.int8_packing.constant_int8_weights). So an
XLNetModel or head quantized in int8 (`quantize("int8")`) traces every inference call outside
XLA with its kernels read once, as constants: `model.predict`, `evaluate`, a plain
`tf.function(model)` and the exported SavedModel all take that path without being asked. Eager
calls, calls with training=True, XLA-compiled functions and a TensorFlow without the oneDNN
kernel (loaded with oneDNN off: ops.int8_packing.onednn_available) take the variables' path.

A trace then holds a copy of the int8 weights. So that a later change of the weights (new
weights loaded into the model) never gives silently stale results:
- each such trace checks, at every call, that the model's quantization scales are still the
  ones it holds (new int8 weights come with new scales), and otherwise fails with
  WEIGHTS_CHANGED (about 0.2 M float32 numbers compared at base size: ~0.1 ms);
- Keras' predict and evaluate notice it before they run (`Int8InferenceTraces`: a digest of
  the scales) and trace again.
Callers that trace inside constant_int8_weights themselves (decoding's steps, the SavedModel
export) key their traces on `scales_digest` and get no check.
"""

import contextlib
import hashlib

import numpy as np
import tensorflow as tf

from xlnet_tf.modeling.ops.int8_packing import (constant_int8_weights,
                                                constant_weights_requested,
                                                uses_constant_weights)

WEIGHTS_CHANGED = (
    "xlnet_tf: this function holds the int8 weights of a quantized model as they were when it "
    "was traced, and the model's weights have changed since; trace it again (a new "
    "tf.function; Keras' predict and evaluate do it by themselves)")


def quantization_scales(model):
  """The model's quantization scales: its float32 variables named `*scale`, in order."""
  return [variable for variable in getattr(model, "weights", ())
          if variable.path.endswith("scale") and variable.dtype == "float32"]


def scales_digest(model) -> str:
  """A digest of the model's quantization scales (about 0.2 M numbers at base size): new int8
  weights come with new scales."""
  digest = hashlib.sha1()
  for variable in quantization_scales(model):
    digest.update(variable.numpy().tobytes())
  return digest.hexdigest()


def _check_scales_unchanged(model):
  """In the function being traced: an assertion, run at every call, that the model's scales
  equal their values now (what the trace's constant kernels were quantized with)."""
  scales = quantization_scales(model)
  if not scales:
    return
  with tf.init_scope():
    traced = np.concatenate([np.reshape(variable.numpy(), [-1]) for variable in scales])
  now = tf.concat([tf.reshape(tf.convert_to_tensor(variable), [-1]) for variable in scales], 0)
  tf.debugging.Assert(tf.reduce_all(tf.equal(now, tf.constant(traced))), [WEIGHTS_CHANGED])


@contextlib.contextmanager
def int8_weights_as_constants(model, training):
  """Around a model's call: a quantized model's inference traced outside XLA (where oneDNN's
  kernel exists) reads its int8 kernels as constants, and checks at every call that they are
  still the model's (the module docstring). Nothing changes for a float model, training, an
  eager call, or inside a caller's own constant_int8_weights."""
  # Cheapest first: an eager call traces nothing (a head's `quantization` walks its layers).
  if (tf.executing_eagerly() or training or constant_weights_requested()
      or getattr(model, "quantization", None) is None):
    yield
    return
  with constant_int8_weights():
    if uses_constant_weights():
      _check_scales_unchanged(model)
    yield


class Int8InferenceTraces:
  """For a Keras model: `__call__` in int8_weights_as_constants, and Keras' predict and
  evaluate functions traced again when the quantized weights changed since they were traced
  (a digest of the scales, read at each predict or evaluate: ~3 ms at base size)."""

  def __call__(self, *args, **kwargs):
    with int8_weights_as_constants(self, kwargs.get("training")):
      return super().__call__(*args, **kwargs)

  def _int8_weights_changed(self, function_name):
    """Whether the function `function_name` was traced on other int8 weights than the model
    holds now (it is then made again); False for a float model."""
    digests = self.__dict__.setdefault("_int8_digests", {})
    digest = scales_digest(self) if getattr(self, "quantization", None) else None
    changed = digests.get(function_name, digest) != digest
    digests[function_name] = digest
    return changed

  def make_predict_function(self, force=False):
    """Keras' predict function, made again when the int8 weights changed since it was made.

    Args:
      force: make it again in any case (Keras' argument).

    Returns:
      What Keras' method returns.
    """
    return super().make_predict_function(
        force=self._int8_weights_changed("predict") or force)

  def make_test_function(self, force=False):
    """Keras' evaluate function, made again when the int8 weights changed since it was made.

    Args:
      force: make it again in any case (Keras' argument).

    Returns:
      What Keras' method returns.
    """
    return super().make_test_function(force=self._int8_weights_changed("test") or force)
