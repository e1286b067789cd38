"""The standard checks of a Keras layer or model, written once: rebuilt from its config, and
saved to and loaded from a `.keras` file, it computes what the original computes.

`call(layer)` runs the layer on fixed inputs and returns a tensor or a structure of tensors;
each check compares every tensor of the structure.
"""

import keras
import numpy as np
import tensorflow as tf


def _assert_same_outputs(expected, got, atol):
  expected, got = tf.nest.flatten(expected), tf.nest.flatten(got)
  assert len(expected) == len(got)
  for a, b in zip(expected, got):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=atol, rtol=1e-7 if atol else 0)


def assert_config_round_trip(layer, call, build_shape=None, atol=1e-6):
  """type(layer).from_config(layer.get_config()), built (`build_shape`) and given the layer's
  weights, computes call(layer); returns the clone (for checks of its config). atol=0: the
  same numbers exactly."""
  expected = call(layer)  # builds the layer if it is not yet built
  clone = type(layer).from_config(layer.get_config())
  if build_shape is not None:
    clone.build(build_shape)
  clone.set_weights(layer.get_weights())
  _assert_same_outputs(expected, call(clone), atol)
  return clone


def assert_keras_file_round_trip(model, call, path, atol=1e-6):
  """model saved to `path` (a .keras file) and loaded back computes call(model); returns the
  loaded model."""
  expected = call(model)
  model.save(str(path))
  restored = keras.models.load_model(str(path))
  _assert_same_outputs(expected, call(restored), atol)
  return restored
