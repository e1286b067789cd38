"""Python functions for tf.function whose traces TensorFlow counts apart from other functions'.

TensorFlow warns that a tf.function "triggered tf.function retracing" by counting the traces of
every tf.function made over the same Python code together (its key is the code object). A
function the library makes once per model or per preprocessor (the same method, the same
lambda) then reads as one function retraced over and over as soon as a few models or
preprocessors each trace theirs once or twice, a quantized model after its float self
included. A callable object has no code object: TensorFlow counts its traces by themselves.
"""

import contextlib
from typing import Callable, Optional


class TracedAlone:
  """`function` as a callable object, run inside `within()` when given (a context manager
  factory, e.g. a quantized model's constant weights): `tf.function(TracedAlone(f), ...)`."""

  def __init__(self, function: Callable, within: Optional[Callable] = None):
    self.function = function
    self.within = within or contextlib.nullcontext
    # tf.function names its graphs after it.
    self.__name__ = getattr(function, "__name__", type(self).__name__)

  def __call__(self, *args, **kwargs):
    with self.within():
      return self.function(*args, **kwargs)
