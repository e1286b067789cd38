"""predict on one batch in memory skips Keras' tf.data pipeline (modeling/one_batch_predict.py):
the same arrays as Keras' own loop (float, int8, a head, float64 inputs), one trace shared with
that loop for every batch size, callbacks and the progress bar as Keras gives them, and
everything else left to Keras."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model_inputs import padded_pair_batch
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
from xlnet_tf.modeling import one_batch_predict

CONFIG = XLNetConfig.preset("tiny", dropout=0.0, dropatt=0.0)
LENGTH = 12


def inputs(rows, seed=0):
  pads = [(3 * row) % (LENGTH // 2) for row in range(rows)]
  return padded_pair_batch(np.random.default_rng(seed), rows, LENGTH, CONFIG.n_token, pads)


def keras_loop(model, x, **kwargs):
  """Keras' own predict, past the model's."""
  return keras.Model.predict(model, x, **kwargs)


def backbone(seed=0):
  model = XLNetModel(CONFIG)
  randomize_weights(model, seed)
  return model


def traces(model):
  return model.predict_function.experimental_get_tracing_count()


def test_one_batch_gives_keras_loops_arrays_without_the_pipeline(monkeypatch):
  model = backbone()
  batch = inputs(4)
  expected = keras_loop(model, batch, verbose=0)
  # The pipeline is not built: Keras' adapter would fail here.
  monkeypatch.setattr(keras.Model, "predict", lambda *args, **kwargs: pytest.fail("Keras loop"))
  actual = model.predict(batch, verbose=0)
  assert sorted(actual) == sorted(expected)
  for name in expected:
    assert isinstance(actual[name], np.ndarray)
    np.testing.assert_array_equal(actual[name], expected[name])


def test_every_batch_size_shares_one_trace_with_keras_loop():
  model = backbone()
  first = model.predict(inputs(3), verbose=0)["sequence_output"]
  assert traces(model) == 1
  model.predict(inputs(5, seed=1), verbose=0)
  tensors = {name: tf.constant(value) for name, value in inputs(2, seed=2).items()}
  model.predict(tensors, verbose=0)
  # Keras' loop over several batches (16, 16, 8): the same trace.
  many = inputs(40, seed=3)
  looped = model.predict(many, batch_size=16, verbose=0)["sequence_output"]
  assert traces(model) == 1
  np.testing.assert_allclose(looped[:16], model.predict(
      {name: value[:16] for name, value in many.items()}, batch_size=16,
      verbose=0)["sequence_output"], rtol=0, atol=1e-6)
  np.testing.assert_allclose(first, keras_loop(model, inputs(3), verbose=0)["sequence_output"],
                             rtol=0, atol=1e-6)


def test_float64_inputs_are_cast_to_floatx_as_keras_does():
  model = backbone()
  batch = inputs(3)
  wide = dict(batch, input_mask=batch["input_mask"].astype(np.float64))
  np.testing.assert_array_equal(model.predict(wide, verbose=0)["sequence_output"],
                                keras_loop(model, wide, verbose=0)["sequence_output"])


def test_int8_and_a_head_give_keras_loops_arrays():
  head = XLNetClassifier(backbone(), num_classes=3)
  randomize_weights(head, 1)
  head.quantize("int8")
  batch = inputs(4)
  np.testing.assert_array_equal(head.predict(batch, verbose=0),
                                keras_loop(head, batch, verbose=0))
  assert traces(head) == 1


def test_callbacks_and_progress_bar_as_keras_gives_them(capsys):
  model = backbone()
  seen = []

  class Recorder(keras.callbacks.Callback):
    def on_predict_begin(self, logs=None):
      seen.append("begin")

    def on_predict_batch_end(self, batch, logs=None):
      seen.append((batch, logs["sequence_output"].shape))  # Keras flattens {"outputs": ...}

    def on_predict_end(self, logs=None):
      seen.append("end")

  model.predict(inputs(2), verbose=1, callbacks=[Recorder()])
  assert seen == ["begin", (0, (2, LENGTH, CONFIG.d_model)), "end"]
  assert "1/1" in capsys.readouterr().out
  model.predict(inputs(2), verbose=0)
  assert capsys.readouterr().out == ""


@pytest.mark.parametrize("case", ["more_rows_than_batch", "steps", "dataset", "list", "empty"])
def test_what_is_not_one_batch_goes_through_keras_loop(monkeypatch, case):
  model = backbone()
  batch = inputs(6)
  arguments = {"more_rows_than_batch": (batch, {"batch_size": 4}),
               "steps": (batch, {"steps": 1}),
               "dataset": (tf.data.Dataset.from_tensor_slices(batch).batch(6), {}),
               "list": ([batch], {}),
               "empty": ({name: value[:0] for name, value in batch.items()}, {})}[case]
  x, kwargs = arguments
  assert one_batch_predict.one_batch(x, kwargs.get("batch_size")) is None or case == "steps"
  loops = []
  original = keras.Model.predict
  monkeypatch.setattr(keras.Model, "predict",
                      lambda *args, **kw: loops.append(1) or original(*args, **kw))
  try:
    model.predict(x, verbose=0, **kwargs)
  except Exception:  # noqa: BLE001  Keras' own answer to these inputs is not the point here
    pass
  assert loops == [1]
