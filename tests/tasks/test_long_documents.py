"""Long documents in classification: the split into segments (Python and in the graph), the
settings a run reads back, and a classification run with segments end to end."""

import csv
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.tasks import FinetuningOptions, ModelSource, run_finetuning
from xlnet_tf.tasks.classification import ClassificationOptions, ClassificationTask
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.tasks import long_documents
from xlnet_tf.text.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf.text.packing import TextPacker, pack_texts
from xlnet_tf.text.tokenizer import XLNetTokenizer

SENTENCE = "The class statement defines a new type of object with methods and values. "
TEXTS = [SENTENCE * 4, "a short one", "", SENTENCE * 2 + "Café naïve 中文 😀"]
PAIRS = ["a question about it", SENTENCE * 3, "x", ""]


def hand_layout(tokenizer, tokens_a, tokens_b, num_segments, length):
  """The documented layout, written out: `A <sep> [B <sep>] <cls>` right-aligned in S * T
  positions (texts that fit), cut into S rows of T."""
  ids = tokenizer.special_ids
  tokens = list(tokens_a) + [ids.sep] + ([] if tokens_b is None else list(tokens_b) + [ids.sep])
  segments = [0] * (len(tokens_a) + 1) + ([] if tokens_b is None else [1] * (len(tokens_b) + 1))
  pad = num_segments * length - len(tokens) - 1
  assert pad >= 0, "the hand layout covers texts that fit"
  rows = ([max(ids.pad, 0)] * pad + tokens + [ids.cls], [4] * pad + segments + [2],
          [0.0] * pad + [1.0] * (len(tokens) + 1))
  return [np.reshape(row, [num_segments, length]) for row in rows]


def test_segments_are_the_packed_document_cut_in_pieces(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  length, num_segments = 16, 4
  features = pack_texts(tokenizer, TEXTS, PAIRS, length, num_segments=num_segments)
  assert features["input_ids"].shape == (4, num_segments, length)
  for row, (text, pair) in enumerate(zip(TEXTS, PAIRS)):
    tokens_a, tokens_b = tokenizer.encode(text), tokenizer.encode(pair)
    if len(tokens_a) + len(tokens_b) + 3 > num_segments * length:
      continue  # truncated: checked below
    expected = hand_layout(tokenizer, tokens_a, tokens_b, num_segments, length)
    for key, value in zip(("input_ids", "segment_ids", "input_mask"), expected):
      np.testing.assert_array_equal(features[key][row], value, err_msg=f"{key} row {row}")
  assert len(tokenizer.encode(TEXTS[0])) > length, "a text longer than one segment"
  # A single text longer than S * T keeps its first S * T - 2 tokens.
  single = pack_texts(tokenizer, TEXTS[:1], None, 8, num_segments=3)
  expected = hand_layout(tokenizer, tokenizer.encode(TEXTS[0])[:22], None, 3, 8)
  np.testing.assert_array_equal(single["input_ids"][0], expected[0])
  # S = 1 is today's layout.
  for key, value in pack_texts(tokenizer, TEXTS, PAIRS, length).items():
    np.testing.assert_array_equal(pack_texts(tokenizer, TEXTS, PAIRS, length,
                                             num_segments=1)[key], value)


def test_the_graph_splits_as_the_python_builders(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  packer = TextPacker(InGraphTokenizer(sp_model), 8, num_segments=3)
  for texts_b in (None, PAIRS):  # texts longer than the 3 segments too: truncation
    expected = pack_texts(tokenizer, TEXTS, texts_b, 8, num_segments=3)
    packed = tf.function(packer)(tf.constant(TEXTS),
                                 None if texts_b is None else tf.constant(texts_b))
    for key, value in zip(("input_ids", "segment_ids", "input_mask"), packed):
      np.testing.assert_array_equal(value.numpy(), expected[key], err_msg=key)


@pytest.mark.parametrize("max_segments, mem_len, message", [
    (0, 0, "--max_segments must be at least 1"),
    (3, 0, "--mem_len must be at least 1 with --max_segments=3"),
    (2, -4, "--mem_len must be at least 0; got -4"),
    (1, 16, "--mem_len must be 0 with --max_segments=1"),
])
def test_settings_no_run_can_use_are_refused(max_segments, mem_len, message):
  with pytest.raises(UserInputError, match=f"^{message}"):
    long_documents.run_settings(max_segments, mem_len)


def test_a_run_without_training_reads_the_settings_training_saved(tmp_path):
  best = str(tmp_path / "best")
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", mem_len=12)), 2, max_segments=3)
  checkpoints.save_pretrained(model, best)
  assert long_documents.run_settings(None, None, best) == long_documents.LongDocuments(3, 12)
  assert long_documents.run_settings(3, 12, best) == long_documents.LongDocuments(3, 12)
  assert long_documents.run_settings(None, None) == long_documents.LongDocuments(1, 0)
  with pytest.raises(UserInputError, match=rf"^--max_segments=1: the classifier in {best} was "
                     rf"trained with max_segments=3 \({best}/head.json\); leave --max_segments"):
    long_documents.run_settings(1, None, best)
  with pytest.raises(UserInputError, match=rf"^--mem_len=8: .* mem_len=12 \({best}/xlnet_con"):
    long_documents.run_settings(None, 8, best)


def test_an_attention_too_large_with_the_memory_is_refused():
  config = XLNetConfig.preset("tiny")
  settings = long_documents.LongDocuments(2, 10**8)
  with pytest.raises(UserInputError, match=r"^--mem_len=100000000: the attention scores"):
    long_documents.check_attention_size(settings, config, 128, 32)


def _predictions(path):
  with open(path, encoding="utf-8") as handle:
    return np.array([float(row["prediction"]) for row in csv.DictReader(handle, delimiter="\t")])


def test_a_run_with_segments_predicts_as_the_library(sp_model, tmp_path):
  """Training with max_segments=3, mem_len=32, then a predict-only run that takes both from
  best/: the predicted scores are the library's on features laid out by hand."""
  tokenizer = XLNetTokenizer(sp_model)
  XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size).to_json_file(
      str(tmp_path / "config.json"))
  with open(tmp_path / "train.csv", "w", encoding="utf-8", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["text", "text_b", "label"])
    for index, (text, pair) in enumerate(zip(TEXTS * 2, PAIRS * 2)):
      writer.writerow([text, pair, index / 3])
  options = ClassificationOptions(
      task_name="generic", regression=True, test_file=str(tmp_path / "train.csv"),
      model=ModelSource(model_config=str(tmp_path / "config.json"), sp_path=sp_model),
      max_seq_length=32, do_predict=True, output_dir=str(tmp_path / "out"),
      finetuning=FinetuningOptions(train_steps=2, batch_size=4, learning_rate=1e-3,
                                   progress="none"))
  run_finetuning(ClassificationTask(dataclasses.replace(
      options, train_file=str(tmp_path / "train.csv"), max_segments=3, mem_len=32)))
  predictions = tmp_path / "out" / "generic_test_predictions.tsv"
  trained = _predictions(predictions)
  os.remove(predictions)
  run_finetuning(ClassificationTask(dataclasses.replace(options, do_train=False)))
  model = checkpoints.load_pretrained_head(str(tmp_path / "out" / "best"), XLNetClassifier)
  # The CSV reader reads an empty text_b as no second text (no second <sep>).
  rows = [hand_layout(tokenizer, tokenizer.encode(a), tokenizer.encode(b) if b else None, 3, 32)
          for a, b in zip(TEXTS, PAIRS)]
  features = {key: np.stack([row[index] for row in rows]) for index, key in
              enumerate(("input_ids", "segment_ids", "input_mask"))}
  expected = np.tile(model(features).numpy(), 2)
  np.testing.assert_allclose(trained, expected, atol=2e-6)
  np.testing.assert_allclose(_predictions(predictions), expected, atol=2e-6)
