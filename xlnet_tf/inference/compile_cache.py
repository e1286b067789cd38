"""The compiled functions of decoding, kept per model: later calls of generate and fill with
the same settings reuse their traces (and XLA compilations: about 10 s each at base size)
instead of tracing again. tf.function then keeps one trace per input shape (or, built with
reduce_retracing, a trace for any length after a few)."""

import weakref
from typing import Callable

# model -> {(make, settings, quantization mode): what make(model, *settings) returned}
_made = weakref.WeakKeyDictionary()


def compiled_for(model, make: Callable, *settings):
  """make(model, *settings) the first time `model` asks for it with these (hashable)
  settings; the same object after, until the model is quantized (a trace holds the float
  kernels it read)."""
  functions = _made.setdefault(model, {})
  key = (make, settings, getattr(model, "quantization", None))
  if key not in functions:
    functions[key] = make(model, *settings)
  return functions[key]
