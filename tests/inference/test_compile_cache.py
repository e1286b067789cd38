"""The one cache of decoding's compiled functions (xlnet_tf.inference.compile_cache): one
object per model, builder and settings."""

import gc
import weakref

from xlnet_tf.inference.compile_cache import compiled_for


class _Model:
  """Any object a weak reference can point to stands in for a model."""


def test_made_once_per_model_builder_and_settings():
  made = []

  def make(model, *settings):
    made.append((model, settings))
    return object()

  def other_make(model):
    return object()

  first, second = _Model(), _Model()
  function = compiled_for(first, make, "greedy", True)
  assert compiled_for(first, make, "greedy", True) is function
  assert compiled_for(first, make, "greedy", False) is not function
  assert compiled_for(second, make, "greedy", True) is not function
  assert compiled_for(first, other_make) is not compiled_for(first, make)
  assert made == [(first, ("greedy", True)), (first, ("greedy", False)),
                  (second, ("greedy", True)), (first, ())]


def test_a_model_is_not_kept_alive_by_the_cache():
  model = _Model()
  compiled_for(model, lambda model: "a function that does not hold the model")
  reference = weakref.ref(model)
  del model
  gc.collect()
  assert reference() is None


def test_made_again_once_the_model_is_quantized():
  """A trace holds the float kernels it read: after model.quantize the steps are made anew."""
  model = _Model()
  make = lambda model: object()  # noqa: E731
  float_steps = compiled_for(model, make)
  model.quantization = "int8"
  int8_steps = compiled_for(model, make)
  assert int8_steps is not float_steps and compiled_for(model, make) is int8_steps
