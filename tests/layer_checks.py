"""The standard checks of a Keras layer or model, written once: rebuilt from its config, and
saved to and loaded from a `.keras` file, it computes what the original computes; for the
backbone and every head also XLA, mixed precision and the serving outputs (run_model_checks).

`call(layer)` runs the layer on fixed inputs and returns a tensor or a structure of tensors;
each check compares every tensor of the structure.
"""

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.serving.saved_model import ids_serving_function


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


def _floating(structure):
  """The floating tensors of an output structure, as float32 arrays, in order."""
  return [tf.cast(value, tf.float32).numpy() for value in tf.nest.flatten(structure)
          if value.dtype.is_floating]


def run_model_checks(make_model, inputs, tmp_path, policy, *, mixed_precision_tolerance=0.1,
                     sep_id=4):
  """The checks every model of the package passes (keras-hub's run_task_test habit), on a
  model made by `make_model()` (weights random but seeded) and `inputs` (batch > 1, padding,
  several segments):
  - rebuilt from its config and from a `.keras` file, it computes the same outputs;
  - compiled with XLA, the same outputs (float32 rounding);
  - under mixed_bfloat16, with the same weights: finite outputs within
    `mixed_precision_tolerance` of float32 (relative to their largest magnitude), also under
    XLA, and the weights kept in float32;
  - `serving_outputs` (what a SavedModel returns), where the model has it: traced as the
    serve_ids signature it equals the eager outputs, and floating outputs are float32.
  `policy` is the fixture that sets Keras' global dtype policy. Returns the float32 outputs.
  """
  keras.utils.set_random_seed(0)
  model = make_model()

  def call(candidate):
    return candidate(inputs, training=False)

  expected = call(model)
  assert_config_round_trip(model, call, atol=0)
  assert_keras_file_round_trip(model, call, tmp_path / "model.keras")
  compiled = tf.function(lambda features: model(features, training=False), jit_compile=True)
  _assert_same_outputs(expected, compiled(inputs), atol=1e-5)

  if getattr(model, "serving_outputs", None) is not None:
    serve = tf.function(ids_serving_function(model, sep_id))
    served = serve(inputs["input_ids"], inputs["segment_ids"], inputs["input_mask"])
    eager = ids_serving_function(model, sep_id)(
        tf.constant(inputs["input_ids"]), tf.constant(inputs["segment_ids"]),
        tf.constant(inputs["input_mask"]))
    assert set(served) == set(eager) and served
    for name, value in served.items():
      assert value.dtype != tf.bfloat16 and value.dtype != tf.float16, name
      np.testing.assert_allclose(np.asarray(value), np.asarray(eager[name]), atol=1e-5,
                                 err_msg=name)

  weights = model.get_weights()
  policy("mixed_bfloat16")
  mixed = make_model()
  mixed.set_weights(weights)
  assert all(variable.dtype == "float32" for variable in mixed.weights)
  for outputs in (call(mixed), tf.function(lambda features: mixed(features, training=False),
                                           jit_compile=True)(inputs)):
    for want, got in zip(_floating(expected), _floating(outputs)):
      assert np.isfinite(got).all()
      scale = max(float(np.abs(want).max()), 1e-3)
      assert np.abs(got - want).max() <= mixed_precision_tolerance * scale
  return expected
