"""Keras' own Model API on the backbone and every head: summary, get_config / from_config,
.keras files, JSON, count_params; no attribute of theirs hides one of keras.Model's. A head's
.keras file (model.save, ModelCheckpoint) keeps its preprocessor, and fit, predict, quantize
and decoding log no warning of variables without gradients, retracing or AutoGraph."""

import inspect
import logging
import os
import pathlib
import zipfile

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from forked_tools import run_forked
from head_batches import (N_TOKEN, answer_batch, choices_batch, pair_batch,
                          two_stream_batch)
from model_inputs import tiny_config
from xlnet_tf import (XLNetClassifier, XLNetModel, XLNetMultipleChoice, XLNetPreprocessor,
                      XLNetPretrainer, XLNetQuestionAnswering, XLNetTokenClassifier,
                      XLNetTokenizer)
from xlnet_tf.heads.registry import HEAD_CLASSES
from xlnet_tf.inference.compile_cache import decoding_function
from xlnet_tf.modeling.ops import int8_packing
from xlnet_tf.text import pack_texts
from xlnet_tf.utils.errors import UserInputError


def backbone():
  return XLNetModel(tiny_config(n_token=N_TOKEN))


MODELS = {
    "backbone": (backbone, two_stream_batch),
    "pretrainer": (lambda: XLNetPretrainer(backbone(), next_sentence=True), two_stream_batch),
    "classifier": (lambda: XLNetClassifier(backbone(), 3, summary_type="attn"), pair_batch),
    "regression": (lambda: XLNetClassifier(backbone(), 1), pair_batch),
    "multi-label": (lambda: XLNetClassifier(backbone(), 4, multi_label=True), pair_batch),
    "multiple choice": (lambda: XLNetMultipleChoice(backbone()), choices_batch),
    "question answering": (lambda: XLNetQuestionAnswering(backbone(), start_n_top=2,
                                                          end_n_top=2), answer_batch),
    "token classifier": (lambda: XLNetTokenClassifier(backbone(), 5), pair_batch),
}


def made(name, rng):
  keras.utils.set_random_seed(0)
  make, make_inputs = MODELS[name]
  return make(), make_inputs(rng)


def outputs_of(model, inputs):
  return [np.asarray(value) for value in tf.nest.flatten(model(inputs, training=False))]


def assert_same_outputs(model, other, inputs):
  for expected, got in zip(outputs_of(model, inputs), outputs_of(other, inputs), strict=True):
    np.testing.assert_array_equal(got, expected)


def size(variables):
  return sum(int(np.prod(variable.shape)) for variable in variables)


def test_every_model_class_is_checked():
  checked = {type(MODELS[name][0]()) for name in MODELS}
  assert checked == set(HEAD_CLASSES.values()) | {XLNetModel}


@pytest.mark.parametrize("name", list(MODELS))
def test_summary_config_files_json_and_parameter_counts(name, rng, tmp_path):
  model, inputs = made(name, rng)
  lines = []
  model.summary(line_length=150, print_fn=lambda line, **_: lines.append(line))  # no wrapping
  text = "\n".join(lines)
  for layer in model.layers:
    assert f"{layer.name} ({type(layer).__name__})" in text
  total = size(model.weights)
  assert model.count_params() == total == sum(value.size for value in model.get_weights())
  assert f"Total params: {total:,} " in text
  assert f"Trainable params: {size(model.trainable_weights):,} " in text
  assert f"Non-trainable params: {total - size(model.trainable_weights):,} " in text

  clone = type(model).from_config(model.get_config())
  assert clone.count_params() == total
  clone.set_weights(model.get_weights())
  assert_same_outputs(model, clone, inputs)

  from_json = keras.models.model_from_json(model.to_json())  # registered: no custom_objects
  assert type(from_json) is type(model) and from_json.get_config() == model.get_config()
  from_json.set_weights(model.get_weights())
  assert_same_outputs(model, from_json, inputs)

  model.save(str(tmp_path / "model.keras"))
  loaded = keras.models.load_model(str(tmp_path / "model.keras"))
  assert type(loaded) is type(model)
  assert [v.path for v in loaded.weights] == [v.path for v in model.weights]
  assert_same_outputs(model, loaded, inputs)


def _kind(attribute):
  """What a class attribute is: a property, a method, or a plain value."""
  if isinstance(attribute, property):
    return "property"
  return "method" if callable(attribute) or isinstance(attribute, (classmethod, staticmethod)) \
      else "value"


@pytest.mark.parametrize("name", list(MODELS))
def test_no_attribute_hides_a_public_name_of_keras_models_or_layers(name, rng):
  model, _ = made(name, rng)
  # What Keras itself sets on every instance (its wrapped build, quantize; loss).
  keras_own = {keras.Model: set(vars(keras.Model())),
               keras.layers.Layer: set(vars(keras.layers.Layer()))}
  public = {base: {n for n in dir(base) if not n.startswith("_")} for base in keras_own}
  for layer in [model] + list(model._flatten_layers(include_self=False)):
    base = keras.Model if isinstance(layer, keras.Model) else keras.layers.Layer
    hidden = (set(vars(layer)) & public[base]) - keras_own[base]
    assert not hidden, f"{layer.name} ({type(layer).__name__}) hides {base.__name__}.{hidden}"
    for cls in type(layer).__mro__:  # the package's classes override only in kind
      if not cls.__module__.startswith("xlnet_tf"):
        continue
      for attribute in set(vars(cls)) & public[base]:
        assert _kind(vars(cls)[attribute]) == _kind(inspect.getattr_static(base, attribute)), (
            f"{cls.__name__}.{attribute}")


@pytest.mark.parametrize("summary_type", ["last", "attn"])
def test_summary_weights_keep_the_paths_files_stored_before_the_rename(summary_type, rng,
                                                                       tmp_path):
  """Keras stores a Model's sublayers under `layers/<class>` (its `layers` property comes first
  in its walk), so renaming the head's attribute `summary` -> `sequence_summary` left every
  stored path as it was: files written before load as they always did."""
  model, inputs = made("classifier", rng)
  model = XLNetClassifier(model.backbone, 3, summary_type=summary_type)
  model.save_weights(str(tmp_path / "head.weights.h5"))
  with h5py.File(tmp_path / "head.weights.h5", "r") as stored:
    head_paths = set()
    stored.visititems(lambda path, node: head_paths.add(path) if isinstance(
        node, h5py.Dataset) and path.startswith("layers/") else None)
  expected = {"layers/dense/vars/0", "layers/dense/vars/1",  # logit
              "layers/sequence_summary/projection/vars/0",
              "layers/sequence_summary/projection/vars/1"}
  if summary_type == "attn":  # summary_bias, q, k, v, o; its LayerNorm
    expected |= {f"layers/sequence_summary/vars/{index}" for index in range(5)}
    expected |= {"layers/sequence_summary/layer_norm/vars/0",
                 "layers/sequence_summary/layer_norm/vars/1"}
  assert head_paths == expected
  with h5py.File(tmp_path / "head.weights.h5", "r") as stored:
    np.testing.assert_array_equal(stored["layers/sequence_summary/projection/vars/0"][()],
                                  model.sequence_summary.projection.kernel.numpy())
  restored = XLNetClassifier(backbone(), 3, summary_type=summary_type)
  restored.load_weights(str(tmp_path / "head.weights.h5"))
  assert_same_outputs(model, restored, inputs)


# ---- a head's .keras file keeps its preprocessor ------------------------------------------

TEXTS = ["The built-in function len returns the length of an object.", "A module holds values.",
         "Use the break statement to leave a loop.", "Strings are  IMMUTABLE sequences."]
LABELS = np.array([0, 1, 1, 0])
TEXT_LENGTH = 16


@pytest.fixture(scope="module")
def tokenizer(sp_model):
  return XLNetTokenizer(sp_model, lower=True)


def text_classifier(tokenizer):
  keras.utils.set_random_seed(5)
  # fused=False: the same numbers (tests/modeling/test_plain_path.py), traced in half the time.
  head = XLNetClassifier(XLNetModel(tiny_config(n_token=1000), fused=False), 2)
  head.preprocessor = XLNetPreprocessor(tokenizer, sequence_length=TEXT_LENGTH)
  head.compile(optimizer=keras.optimizers.Adam(1e-2),
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               jit_compile=False)  # XLA's compilation would be most of the test's time
  return head


def test_keras_files_and_checkpoints_keep_the_preprocessor(tokenizer, tmp_path):
  head = text_classifier(tokenizer)
  head.labels = ["negative", "positive"]
  before = [value.copy() for value in head.get_weights()]
  checkpoint = keras.callbacks.ModelCheckpoint(str(tmp_path / "checkpoint.keras"))
  head.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0, callbacks=[checkpoint])
  assert any((a != b).any() for a, b in zip(head.get_weights(), before))  # one step taken
  head.save(str(tmp_path / "head.keras"))
  expected = head.predict(TEXTS, verbose=0)
  expected_eagerly = head(TEXTS)  # the same up to rounding (not compiled)
  # Independently packed ids (Python tokenizer, left padding) give the same logits.
  packed = pack_texts(tokenizer, TEXTS, max_seq_length=TEXT_LENGTH)
  assert (packed["input_mask"] == 0).any()  # padded rows
  np.testing.assert_allclose(head(packed), expected, atol=1e-5)
  spiece = pathlib.Path(tokenizer.sp_path).read_bytes()
  for name in ("head.keras", "checkpoint.keras"):
    with zipfile.ZipFile(tmp_path / name) as archive:
      assert archive.read("assets/spiece.model") == spiece
    loaded = keras.models.load_model(str(tmp_path / name))  # its assets folder is gone after
    preprocessor = loaded.preprocessor
    assert preprocessor.sequence_length == TEXT_LENGTH and preprocessor.num_segments == 1
    assert loaded.tokenizer.lower and not loaded.tokenizer.keep_accents
    assert pathlib.Path(loaded.tokenizer.sp_path).read_bytes() == spiece
    assert loaded.labels == ["negative", "positive"]
    np.testing.assert_array_equal(loaded(TEXTS), expected_eagerly)
  np.testing.assert_array_equal(loaded.predict(TEXTS, verbose=0), expected)
  loaded.save(str(tmp_path / "again.keras"))  # from its kept copy of spiece.model
  again = keras.models.load_model(str(tmp_path / "again.keras"))
  np.testing.assert_array_equal(again(TEXTS), expected_eagerly)


def test_a_keras_file_keeps_a_multi_label_heads_labels_and_thresholds(tmp_path):
  head = XLNetClassifier(backbone(), 3, multi_label=True)
  head.labels, head.thresholds = ["a", "b", "c"], [0.25, 0.5, 0.75]
  head.save(str(tmp_path / "head.keras"))
  loaded = keras.models.load_model(str(tmp_path / "head.keras"))
  assert loaded.labels == ["a", "b", "c"] and loaded.thresholds == [0.25, 0.5, 0.75]
  assert loaded.tokenizer is None  # labels without a tokenizer


def test_a_keras_file_of_a_head_without_tokenizer_has_no_preprocessor(rng, tmp_path):
  model, _ = made("classifier", rng)
  model.save(str(tmp_path / "head.keras"))
  with zipfile.ZipFile(tmp_path / "head.keras") as archive:
    assert not [name for name in archive.namelist() if name.startswith("assets/")]
  loaded = keras.models.load_model(str(tmp_path / "head.keras"))
  assert loaded.tokenizer is None and loaded.preprocessor is None
  with pytest.raises(UserInputError, match="got raw strings but has no preprocessor"):
    loaded.predict(TEXTS, verbose=0)


# ---- no warnings in fit, predict, quantize and decoding -----------------------------------

FLOW_RUN = os.path.join(os.path.dirname(__file__), "warnings_run.py")
UNWANTED = ("Gradients do not exist", "triggered tf.function retracing",
            "AutoGraph could not transform")


def test_fit_predict_and_quantize_on_strings_log_none_of_these_warnings(sp_model):
  """What the README's fine-tuning example does, in a process of its own (TensorFlow counts
  traces per process: other tests' would count too)."""
  result = run_forked([FLOW_RUN, sp_model])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "probe: triggered tf.function retracing" in result.stderr  # logs reach stderr
  assert "probe: Gradients do not exist" in result.stderr  # and Python warnings
  shown = [line for line in (result.stdout + result.stderr).splitlines()
           if any(message in line for message in UNWANTED) and "probe: " not in line]
  assert not shown, "\n".join(shown)
  assert result.stdout.splitlines()[-1] == "mask_emb unchanged, quantized logits close"


class _Logged(logging.Handler):
  """TensorFlow's log messages (AutoGraph's and the retracing warning included) while added."""

  def __init__(self):
    super().__init__(logging.WARNING)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


class _StandInModel:
  def __init__(self, quantization):
    self.quantization = quantization


def test_functions_made_per_model_or_preprocessor_count_their_traces_apart(tokenizer):
  """Decoding makes its step functions per model (a second one for the model quantized), a
  preprocessor its packing function: over the same Python code each time. Plain
  tf.functions of one code, traced twice each, read as retracing after a few; these do not,
  and a quantized model's (traced in constant_int8_weights) convert with AutoGraph."""
  logged = _Logged()
  tf.get_logger().addHandler(logged)
  level = tf.get_logger().level  # a tool run in this process (cli.run) may have raised it
  tf.get_logger().setLevel(logging.WARNING)
  try:
    def plain_per_model():
      return tf.function(lambda x: x * 2.0, reduce_retracing=True)

    for _ in range(3):  # the same lambda code every time: counted together
      function = plain_per_model()
      function(tf.zeros([1]))
      function(tf.zeros([2]))
    assert any("triggered tf.function retracing" in m for m in logged.messages)  # seen
    del logged.messages[:]

    in_constant_context = []

    def per_model(model):
      return decoding_function(model, lambda x: in_constant_context.append(
          int8_packing.constant_weights_requested()) or x * 3.0,
          reduce_retracing=True)

    for quantization in (None, None, "int8", "int8"):
      function = per_model(_StandInModel(quantization))
      for length in (1, 2, 3):
        np.testing.assert_array_equal(function(tf.ones([length])), np.full([length], 3.0))
    assert in_constant_context == [False] * 4 + [True] * 4  # two traces each
    for _ in range(3):
      preprocessor = XLNetPreprocessor(tokenizer, sequence_length=8)
      for count in (2, 3, 4):
        np.testing.assert_array_equal(preprocessor(TEXTS[:count])["input_ids"],
                                      pack_texts(tokenizer, TEXTS[:count],
                                                 max_seq_length=8)["input_ids"])
  finally:
    tf.get_logger().removeHandler(logged)
    tf.get_logger().setLevel(level)
  shown = [m for m in logged.messages if any(message in m for message in UNWANTED)]
  assert not shown, "\n".join(shown)


def test_heads_leave_mask_emb_untrained_and_checkpoints_keep_it(tokenizer, tmp_path):
  head = text_classifier(tokenizer)
  mask_emb = head.backbone.mask_emb
  assert mask_emb.trainable  # the backbone's own flag: a pretrainer over it trains it
  assert mask_emb.path not in [v.path for v in head.trainable_variables + head.trainable_weights]
  assert mask_emb.path in [v.path for v in head.non_trainable_weights]
  assert mask_emb.path in [v.path for v in XLNetPretrainer(head.backbone).trainable_variables]
  assert size(head.trainable_weights) + size(head.non_trainable_weights) == head.count_params()
  values = np.random.default_rng(7).normal(size=mask_emb.shape).astype(np.float32)
  mask_emb.assign(values)
  head.save_pretrained(str(tmp_path / "own"))
  loaded = XLNetClassifier.from_pretrained(str(tmp_path / "own"))
  np.testing.assert_array_equal(loaded.backbone.mask_emb.numpy(), values)
