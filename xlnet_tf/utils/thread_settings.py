"""A setting each thread holds for the code it runs inside a `with`: how tracing-time switches
(compile regions inline, read int8 weights as constants, derive dropout seeds, read transposed
kernels) reach the layers without passing through every call between."""

import contextlib
import threading


class ThreadSetting:
  """`value()`: what this thread set with the innermost `set(...)` it is inside, else
  `default`; another thread's setting is not seen."""

  def __init__(self, default=None):
    self._local = threading.local()
    self._default = default

  def value(self):
    return getattr(self._local, "value", self._default)

  @contextlib.contextmanager
  def set(self, value):
    previous = self.value()
    self._local.value = value
    try:
      yield
    finally:
      self._local.value = previous
