"""The compiled functions of decoding, kept per model: later calls of generate and fill with
the same settings reuse their traces (and XLA compilations: about 10 s each at base size)
instead of tracing again. tf.function then keeps one trace per input shape (or, built with
reduce_retracing, a trace for any length after a few).

A quantized model's functions are traced in ops.int8_packing.constant_int8_weights (outside
XLA): oneDNN's int8 kernel on the int8 weights read once, as constants of the trace, or
where TensorFlow has no such kernel the float32 product of the same integers (float_products).
A decoding step at batch 1 reads every weight once, and the default int8 path's compiled
products are slower there than the float model's (docs/performance.md). Such traces hold a
snapshot of the weights, so the cache is keyed on a digest of the quantization scales, which
change with any weights loaded into the model."""

import functools
import weakref
from typing import Callable

import tensorflow as tf

from xlnet_tf.modeling.int8_inference import scales_digest
from xlnet_tf.modeling.ops.int8_packing import constant_int8_weights
from xlnet_tf.utils.tracing import TracedAlone

# model -> {(make, settings, quantization mode, weights digest): what make(model, *settings)
# returned}
_made = weakref.WeakKeyDictionary()


def compiled_for(model, make: Callable, *settings):
  """make(model, *settings) the first time `model` asks for it with these (hashable)
  settings; the same object after, until the model is quantized (a trace holds the float
  kernels it read) or, quantized, holds other weights."""
  functions = _made.setdefault(model, {})
  mode = getattr(model, "quantization", None)
  key = (make, settings, mode, scales_digest(model) if mode else None)
  if key not in functions:
    functions[key] = make(model, *settings)
  return functions[key]


def decoding_function(model, python_function, **options):
  """tf.function(python_function, **options), traced in constant_int8_weights when `model`
  is quantized (the context has no effect under jit_compile=True). Its traces are counted
  apart from other models' (utils.tracing): every model's functions run the same code, and a
  second model, or this one quantized, would read as retracing."""
  quantized = getattr(model, "quantization", None) is not None
  within = functools.partial(constant_int8_weights, float_products=True) if quantized else None
  return tf.function(TracedAlone(python_function, within), autograph=False, **options)

