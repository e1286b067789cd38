"""A quantized model's inference traces take the constant-weights int8 path by themselves
(xlnet_tf.modeling.int8_inference): Keras' predict and evaluate, a plain tf.function, a head;
not eager calls, XLA or training; and a trace whose weights changed refuses, while predict
traces again.

Where this TensorFlow and CPU have oneDNN's int8 kernel, the products are the real ones (and
the traced graphs are checked for it); elsewhere (AVX2-only CPUs) an exact stand-in computes
the same int32 product from the constant kernel, so the path's routing, regions and checks
are tested on every machine.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import XLNetClassifier, XLNetModel
from xlnet_tf.modeling import int8_inference
from xlnet_tf.modeling.ops import int8_packing, int8_products
from xlnet_tf.utils.relative_error import relative_error

LENGTH, N_TOKEN = 12, 50
TOLERANCE = 0.02  # relative error of an int8 output against the float model's
ONEDNN = int8_packing.onednn_available()  # before the fixture's stand-in claims it


@pytest.fixture
def constant_products(monkeypatch):
  """The kernel shapes of the oneDNN products traced since (int8_products._onednn_product);
  without oneDNN's int8 kernel here, the exact int32 stand-in described above."""
  original = int8_products._onednn_product
  traced = []

  def product(quantized, kernel):
    traced.append(kernel.shape)
    if ONEDNN:
      return original(quantized, kernel)
    return tf.linalg.matmul(tf.cast(quantized, tf.int32), tf.constant(kernel.astype(np.int32)))
  monkeypatch.setattr(int8_products, "_onednn_product", product)
  if not ONEDNN:
    monkeypatch.setattr(int8_packing, "onednn_available", lambda: True)
  return traced


def make_backbone(seed=0):
  keras.utils.set_random_seed(seed)
  return XLNetModel(tiny_config(n_token=N_TOKEN, init_std=0.15))


def batch():
  """Three left-padded A <sep> B <sep> <cls> rows (padding, three segment ids)."""
  return padded_pair_batch(np.random.default_rng(3), 3, LENGTH, N_TOKEN, pad_lengths=[0, 3, 5])


def sequence_output(model, inputs):
  return model(inputs, training=False)["sequence_output"].numpy()


def operation_types(function, inputs):
  return {operation.type for operation in function.get_concrete_function(inputs).graph
          .get_operations()}


def test_predict_and_tf_function_take_the_constant_path(constant_products):
  """After quantize: predict and a plain tf.function trace the oneDNN products (every block's
  keys/values/queries, output and two feed-forward products) and compute the eager int8
  numbers, within TOLERANCE of float; eager calls, XLA and training=True do not."""
  inputs, model = batch(), make_backbone()
  float_output = sequence_output(model, inputs)
  model.quantize("int8")
  eager = sequence_output(model, inputs)
  assert constant_products == []  # eager: the variables' path
  predicted = model.predict(inputs, batch_size=3, verbose=0)["sequence_output"]
  per_block = 5  # [k v q] side by side, r, o, the feed-forward's two
  assert len(constant_products) == per_block * model.config.n_layer
  np.testing.assert_allclose(predicted, eager, atol=2e-5)
  assert relative_error(float_output, predicted) < TOLERANCE

  traced = tf.function(lambda features: model(features)["sequence_output"])
  np.testing.assert_allclose(traced(inputs), eager, atol=2e-5)
  assert len(constant_products) == 2 * per_block * model.config.n_layer
  if ONEDNN:
    assert "QuantizedMatMulWithBias" in operation_types(traced, inputs)

  for other in (tf.function(lambda features: model(features)["sequence_output"],
                            jit_compile=True),
                tf.function(lambda features: model(features, training=True)["sequence_output"])):
    np.testing.assert_allclose(other(inputs), eager, atol=2e-5)
  assert len(constant_products) == 2 * per_block * model.config.n_layer


def test_a_head_predicts_and_evaluates_on_the_constant_path(constant_products):
  """A quantized classifier: predict and evaluate on the oneDNN products, with the eager int8
  logits; its head Dense layers stay Keras' own int8."""
  inputs = batch()
  keras.utils.set_random_seed(0)
  head = XLNetClassifier(XLNetModel(tiny_config(n_token=N_TOKEN, init_std=0.15)), 3)
  float_logits = head(inputs).numpy()
  head.quantize("int8")
  eager = head(inputs).numpy()
  logits = head.predict(inputs, batch_size=3, verbose=0)
  assert constant_products
  np.testing.assert_allclose(logits, eager, atol=2e-5)
  assert relative_error(float_logits, logits) < 0.05
  head.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  traced = len(constant_products)
  loss = head.evaluate(inputs, np.array([0, 1, 2]), batch_size=3, verbose=0)
  assert len(constant_products) > traced
  expected = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
      np.array([0, 1, 2]), eager)
  np.testing.assert_allclose(loss, expected, rtol=1e-4)


def test_changed_weights_are_refused_by_a_trace_and_retraced_by_predict(constant_products):
  """New int8 weights loaded after a trace: the trace refuses in one error (never the old
  weights' outputs); predict traces again and gives the new weights' outputs."""
  inputs = batch()
  model, other = make_backbone(0), make_backbone(1)
  for quantized in (model, other):
    quantized.quantize("int8")
  traced = tf.function(lambda features: model(features)["sequence_output"])
  traced(inputs)
  model.predict(inputs, batch_size=3, verbose=0)
  model.set_weights(other.get_weights())
  with pytest.raises(tf.errors.InvalidArgumentError, match="weights have changed since"):
    traced(inputs)
  expected = sequence_output(other, inputs)
  np.testing.assert_allclose(model.predict(inputs, batch_size=3, verbose=0)["sequence_output"],
                             expected, atol=2e-5)
  retraced = tf.function(lambda features: model(features)["sequence_output"])
  np.testing.assert_allclose(retraced(inputs), expected, atol=2e-5)


def test_a_float_model_traces_as_before(constant_products):
  """A float model: no products of the int8 path, no check, the same outputs."""
  inputs, model = batch(), make_backbone()
  traced = tf.function(lambda features: model(features)["sequence_output"])
  np.testing.assert_allclose(traced(inputs), sequence_output(model, inputs), atol=1e-6)
  assert constant_products == []
  assert "Assert" not in operation_types(traced, inputs)
  assert int8_inference.quantization_scales(model) == []


def _input_free(graph, operation_type):
  """The operations of `operation_type` in `graph` that no input of the graph reaches (a
  constant subgraph the graph optimizer folds), and all of that type."""
  reached = {}

  def from_inputs(operation):
    if operation.name not in reached:
      reached[operation.name] = False  # (no cycles in a function's graph)
      reached[operation.name] = operation.type == "Placeholder" or any(
          from_inputs(tensor.op) for tensor in operation.inputs)
    return reached[operation.name]
  typed = [operation for operation in graph.get_operations() if operation.type == operation_type]
  return [operation for operation in typed if not from_inputs(operation)], typed


@pytest.mark.parametrize("quantized", [False, True], ids=["float32", "int8"])
def test_a_trace_for_any_batch_size_computes_the_position_keys_from_constants(
    constant_products, quantized):
  """Keras' predict and a SavedModel's signature trace for any batch size, [None, T]: T's
  position encoding, and with int8 constant weights its keys, are still a constant subgraph
  (folded once by the graph optimizer, not computed at every call), and the outputs stay the
  eager model's."""
  inputs, model = batch(), make_backbone()
  if quantized:
    model.quantize("int8")
  signature = {name: tf.TensorSpec([None, *value.shape[1:]], value.dtype)
               for name, value in inputs.items()}
  traced = tf.function(lambda features: model(features)["sequence_output"],
                       input_signature=[signature])
  graph = traced.get_concrete_function().graph
  constant_sines, sines = _input_free(graph, "Sin")
  assert sines and constant_sines == sines  # the sinusoid of every relative distance
  if quantized and ONEDNN:
    constant_products_, products = _input_free(graph, "QuantizedMatMulWithBias")
    assert len(constant_products_) == model.config.n_layer  # each layer's position keys
    assert len(products) == 5 * model.config.n_layer
  np.testing.assert_allclose(traced(inputs), sequence_output(model, inputs), atol=2e-5)
