"""quantize("int8") on every head: its backbone's and its own Dense layers' projections in int8,
outputs within 2% of float (batch > 1, padding, several segments), .keras files,
save_pretrained / from_pretrained, refusals.

As in tests/modeling/test_quantization.py, the tiny models are initialized with init_std 0.15
so that every sublayer and head layer moves its output (with 0.02 they barely do)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from layer_checks import assert_keras_file_round_trip
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import (XLNetClassifier, XLNetModel, XLNetMultipleChoice, XLNetPretrainer,
                      XLNetQuestionAnswering, XLNetTokenClassifier, checkpoints)
from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.tasks.finetuning import load_pretrained_weights
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.relative_error import relative_error

LENGTH, N_TOKEN = 10, 50
# Relative error of an int8 head output against float. Looser than the backbone's 0.02: a
# head's few outputs (2 next-sentence logits, 1 regression value) come from tiny (d_model 32)
# dot products, where int8 rounding averages over few terms; the base model's error is
# measured by the benchmark (docs/performance.md). A wrong int8 path gives errors near 1.
TOLERANCE = 0.05


BATCH = 8  # a relative error over a few logits would measure their cancellation, not int8
PADDING = [0, 2, 4, 0, 1, 3, 5, 0]


def pair_batch(seed=5, batch=BATCH):
  return padded_pair_batch(np.random.default_rng(seed), batch, LENGTH, N_TOKEN,
                           pad_lengths=PADDING[:batch])


def two_stream_batch():
  inputs = pair_batch()
  perm_mask = np.zeros([BATCH, LENGTH, LENGTH], np.float32)
  target_mapping = np.zeros([BATCH, 2, LENGTH], np.float32)
  for row in range(BATCH):
    targets = [6, 8] if row % 2 else [5, 7]
    perm_mask[row, :, targets] = 1.0
    perm_mask[row, targets[1], targets[0]] = 0.0
    target_mapping[row, [0, 1], targets] = 1.0
  return dict(inputs, perm_mask=perm_mask, target_mapping=target_mapping)


def choices_batch():
  rows = [pair_batch(seed, batch=4) for seed in range(3)]  # [4, 3 options, T]
  return {key: np.stack([row[key] for row in rows], axis=1) for key in rows[0]}


def answer_batch():
  """With start_positions: the training outputs (log-probabilities over every position, the
  answerability logit), whose top-k beams cannot swap under a small change."""
  inputs = pair_batch()
  p_mask = (inputs["segment_ids"] != 0).astype(np.float32)
  return dict(inputs, p_mask=p_mask, cls_index=np.full([BATCH], LENGTH - 1, np.int32),
              start_positions=np.array(PADDING, np.int32) + 1)


def backbone():
  return XLNetModel(tiny_config(n_token=N_TOKEN, init_std=0.15))


HEADS = {
    "pretrainer": (lambda: XLNetPretrainer(backbone(), next_sentence=True), two_stream_batch),
    "classifier attn": (lambda: XLNetClassifier(backbone(), 3, summary_type="attn"),
                        pair_batch),
    "regression": (lambda: XLNetClassifier(backbone(), 1, summary_type="mean"), pair_batch),
    "multiple choice": (lambda: XLNetMultipleChoice(backbone()), choices_batch),
    "question answering": (lambda: XLNetQuestionAnswering(backbone()), answer_batch),
    "token classifier": (lambda: XLNetTokenClassifier(backbone(), 5), pair_batch),
}
KERAS_FILES = ("pretrainer", "classifier attn", "question answering")  # slow-ish round trip


@pytest.mark.parametrize("name", list(HEADS))
def test_int8_head_is_close_to_float(name, tmp_path):
  make_head, make_inputs = HEADS[name]
  keras.utils.set_random_seed(0)
  head, inputs = make_head(), make_inputs()

  def call(model):
    return tf.nest.map_structure(np.asarray, model(inputs, training=False))

  expected = call(head)
  if name == "question answering":  # log-probabilities at the positions answers may take
    answerable = inputs["p_mask"] == 0
    call = lambda model, call=call: {key: value[answerable] if value.ndim == 2 else value
                                     for key, value in call(model).items()}
    expected = call(head)
  head.quantize("int8")
  assert head.quantization == head.backbone.quantization == "int8"
  dense = [layer for layer in head._head_layers() if isinstance(layer, keras.layers.Dense)]
  assert dense and all(layer.quantization_mode == "int8" for layer in dense)
  if name == "pretrainer":  # the tied output projection: an int8 copy, the embedding float
    assert head.lm_output_int8.dtype == "int8"
    assert head.backbone.word_embedding.dtype == "float32"
  got = call(head)
  errors = [relative_error(want, value)
            for want, value in zip(tf.nest.flatten(expected), tf.nest.flatten(got))]
  assert all(1e-5 < error < TOLERANCE for error in errors), (name, errors)
  if name in KERAS_FILES:
    restored = assert_keras_file_round_trip(head, call, tmp_path / "head.keras", atol=0)
    assert restored.quantization == "int8"


def test_head_refuses_unsupported_modes_saves_int8_and_refuses_training(tmp_path):
  """save_pretrained of a quantized head: from_pretrained gives it back quantized, with the
  same outputs; it is refused as another head's backbone, by fine-tuning and by fit."""
  keras.utils.set_random_seed(0)
  head = XLNetTokenClassifier(backbone(), 5)
  weights = head.get_weights()
  with pytest.raises(NotImplementedError, match=r"XLNetTokenClassifier.*'int4'"):
    head.quantize("int4")
  assert head.quantization is None
  assert all(np.array_equal(a, b) for a, b in zip(head.get_weights(), weights))
  float_directory = str(tmp_path / "float")
  head.save_pretrained(float_directory)
  head.quantize("int8")
  directory = str(tmp_path / "tagger")
  head.save_pretrained(directory)
  inputs = pair_batch()
  restored = XLNetTokenClassifier.from_pretrained(directory)
  assert restored.quantization == "int8"
  np.testing.assert_array_equal(restored(inputs).numpy(), head(inputs).numpy())
  with pytest.raises(CheckpointMismatchError, match="quantized head"):
    XLNetModel.from_pretrained(directory)  # its backbone alone (for another head)
  with pytest.raises(UserInputError, match="quantized to int8.*fine-tuning starts from float"):
    load_pretrained_weights(XLNetModel(tiny_config(n_token=N_TOKEN)), directory)
  with pytest.raises(ValueError, match=r"quantized \(int8\), for inference"):
    restored.fit(inputs, np.zeros([BATCH, LENGTH]), epochs=1, verbose=0)
  with pytest.raises(CheckpointMismatchError, match="holds float weights.*is int8"):
    checkpoints.load_own_checkpoint(restored, float_directory)
  head.save_pretrained(float_directory)  # over a float directory: marked quantized
  assert XLNetTokenClassifier.from_pretrained(float_directory).quantization == "int8"

