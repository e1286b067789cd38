"""Raw strings in the heads: call, fit, evaluate and predict through `head.preprocessor`, equal
to the ids pack_texts gives; pairs, options, the SQuAD window; the clear errors; a pretrained
directory keeps the preprocessor."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import (XLNetClassifier, XLNetConfig, XLNetModel, XLNetMultipleChoice,
                      XLNetPreprocessor, XLNetPretrainer, XLNetQuestionAnswering,
                      XLNetTokenClassifier, XLNetTokenizer)
from xlnet_tf.heads import text_inputs
from xlnet_tf.heads.question_answering import answer_position_mask
from xlnet_tf.text import pack_texts
from xlnet_tf.utils.errors import UserInputError

LENGTH = 16
TEXTS = ["The built-in function len returns the length of an object.", "A module holds values.",
         "Use the break statement to leave a loop.", "Strings are immutable sequences.",
         "Café naïve résumé, 中文", "", "Lists are mutable.", "A class defines new types."] * 2
PAIRS = ["It counts items.", "Import it.", "Or continue.", "Of characters.", "Non-ASCII",
         "Nothing", "Append to them.", "With methods."] * 2
LABELS = np.array([0, 1] * 8)


def same_config():
  return XLNetConfig.preset("tiny", n_token=1000, dropout=0.0, dropatt=0.0)


@pytest.fixture(scope="module")
def tokenizer(sp_model):
  return XLNetTokenizer(sp_model, lower=True)


@pytest.fixture(scope="module")
def preprocessor(tokenizer):
  return XLNetPreprocessor(tokenizer, sequence_length=LENGTH)


@pytest.fixture(scope="module")
def backbone_directory(tokenizer, tmp_path_factory):
  """A pretrained backbone directory holding spiece.model (a lower-casing tokenizer)."""
  keras.utils.set_random_seed(3)
  backbone = XLNetModel(same_config())
  backbone.tokenizer = tokenizer
  return backbone.save_pretrained(str(tmp_path_factory.mktemp("backbone")))


@pytest.fixture(scope="module")
def classifier(backbone_directory):
  """A classifier from the directory, packing 16 tokens (the default 128 would be slower)."""
  head = XLNetClassifier.from_pretrained(backbone_directory, num_classes=2)
  head.preprocessor = XLNetPreprocessor(head.tokenizer, sequence_length=LENGTH)
  return head


def head_over(head_class, preprocessor, **arguments):
  keras.utils.set_random_seed(4)
  head = head_class(XLNetModel(same_config()), **arguments)
  head.preprocessor = preprocessor
  return head


def test_a_directory_with_spiece_model_gives_a_preprocessor(backbone_directory, preprocessor):
  head = XLNetClassifier.from_pretrained(backbone_directory, num_classes=2)
  default = head.preprocessor
  assert isinstance(default, XLNetPreprocessor) and default.sequence_length == 128
  assert default.tokenizer is head.tokenizer and default.tokenizer.lower
  assert head.preprocessor is default  # built once
  layers = [layer.name for layer in head.layers]
  head.preprocessor = preprocessor
  assert head.preprocessor is preprocessor
  assert [layer.name for layer in head.layers] == layers  # no sublayer: no weights, no files
  head.preprocessor = None
  assert head.preprocessor is None
  assert XLNetClassifier(XLNetModel(same_config()), 2).preprocessor is None  # no tokenizer
  with pytest.raises(UserInputError, match="preprocessor must be an XLNetPreprocessor or None"):
    head.preprocessor = preprocessor.tokenizer
  small = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", n_token=500)), 2)
  with pytest.raises(UserInputError, match="1000 SentencePiece pieces, but the model's n_token"):
    small.preprocessor = preprocessor


def test_fit_evaluate_predict_and_call_on_strings(classifier, tokenizer):
  ids = pack_texts(tokenizer, TEXTS, None, LENGTH)
  np.testing.assert_allclose(classifier.predict(TEXTS, batch_size=8, verbose=0),
                             classifier.predict(ids, batch_size=8, verbose=0), atol=1e-6)
  np.testing.assert_allclose(classifier(TEXTS[:3]), classifier(
      {key: value[:3] for key, value in ids.items()}), atol=1e-6)
  np.testing.assert_allclose(classifier(TEXTS[0]), classifier(
      {key: value[:1] for key, value in ids.items()}), atol=1e-6)  # one text: a batch of one
  classifier.compile(optimizer=keras.optimizers.Adam(3e-3), metrics=["accuracy"],
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(8)
  before = classifier.evaluate(dataset, verbose=0, return_dict=True)
  np.testing.assert_allclose(  # evaluate on strings in memory = on the ids
      classifier.evaluate(TEXTS, LABELS, batch_size=8, verbose=0),
      classifier.evaluate(ids, LABELS, batch_size=8, verbose=0), atol=1e-6)
  history = classifier.fit(dataset, epochs=5, verbose=0)
  after = classifier.evaluate(dataset, verbose=0, return_dict=True)
  assert after["loss"] < before["loss"] - 0.01, (before, after, history.history["loss"])
  np.testing.assert_allclose(classifier.predict(dataset, verbose=0),
                             classifier.predict(ids, batch_size=8, verbose=0), atol=1e-6)


def test_pairs_in_memory_and_in_datasets(classifier, tokenizer):
  ids = pack_texts(tokenizer, TEXTS, PAIRS, LENGTH)
  np.testing.assert_allclose(classifier.predict((TEXTS, PAIRS), batch_size=8, verbose=0),
                             classifier.predict(ids, batch_size=8, verbose=0), atol=1e-6)
  pairs_only = tf.data.Dataset.from_tensor_slices((TEXTS, PAIRS)).batch(8)  # no labels
  np.testing.assert_allclose(classifier.predict(pairs_only, verbose=0),
                             classifier.predict(ids, batch_size=8, verbose=0), atol=1e-6)
  classifier.compile(optimizer=keras.optimizers.Adam(1e-3),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  labelled = tf.data.Dataset.from_tensor_slices(((TEXTS, PAIRS), LABELS)).batch(8)
  history = classifier.fit(labelled, epochs=1, verbose=0,
                           validation_data=((TEXTS[:4], PAIRS[:4]), LABELS[:4]))
  assert np.isfinite(history.history["val_loss"][0])
  history = classifier.fit((TEXTS, PAIRS), LABELS, batch_size=8, epochs=1, verbose=0,
                           validation_data=labelled)
  assert np.isfinite(history.history["loss"][0]) and np.isfinite(history.history["val_loss"][0])


def test_the_id_path_is_left_as_it_is(classifier, tokenizer):
  ids = pack_texts(tokenizer, TEXTS, None, LENGTH)
  assert text_inputs.packed(classifier, ids, "fit") is ids
  dataset = tf.data.Dataset.from_tensor_slices((ids, LABELS)).batch(8)
  assert text_inputs.packed(classifier, dataset, "fit") is dataset


def test_multiple_choice_reads_texts_and_their_options(preprocessor, tokenizer):
  chooser = head_over(XLNetMultipleChoice, preprocessor)
  contexts = TEXTS[:4]
  options = [["one", "two", "three"], ["len", "break", "class"], ["a", "b", "c"],
             ["loop", "list", "string"]]
  flat = pack_texts(tokenizer, [c for c in contexts for _ in range(3)],
                    [o for row in options for o in row], LENGTH)
  ids = {key: value.reshape(4, 3, LENGTH) for key, value in flat.items()}
  np.testing.assert_allclose(chooser.predict((contexts, options), verbose=0),
                             chooser.predict(ids, verbose=0), atol=1e-6)
  chooser.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  dataset = tf.data.Dataset.from_tensor_slices(((contexts, options), [0, 1, 2, 0])).batch(2)
  assert np.isfinite(chooser.fit(dataset, epochs=1, verbose=0).history["loss"][0])
  with pytest.raises(UserInputError, match=r"reads raw strings as \(texts \[B\], options "
                     r"\[B, C\]\); got 1 part"):
    chooser.predict(contexts, verbose=0)


def test_the_tagger_reads_strings_with_labels_per_packed_position(preprocessor, tokenizer):
  tagger = head_over(XLNetTokenClassifier, preprocessor, num_labels=3)
  ids = pack_texts(tokenizer, TEXTS, None, LENGTH)
  np.testing.assert_allclose(tagger.predict(TEXTS, batch_size=8, verbose=0),
                             tagger.predict(ids, batch_size=8, verbose=0), atol=1e-6)
  # Labels per position of the packed sequence, -1 where nothing is scored (padding, <cls>).
  label_ids = np.where(ids["input_mask"] > 0, ids["input_ids"] % 3, -1)
  label_ids[:, -1] = -1
  tagger.compile(optimizer=keras.optimizers.Adam(1e-3))
  history = tagger.fit(TEXTS, label_ids, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"][0])
  assert np.isfinite(tagger.evaluate(TEXTS, label_ids, batch_size=8, verbose=0))


def test_question_answering_predicts_on_strings_and_refuses_to_train_on_them(preprocessor,
                                                                             tokenizer):
  reader = head_over(XLNetQuestionAnswering, preprocessor, start_n_top=2, end_n_top=2)
  questions, contexts = PAIRS[:4], TEXTS[:4]
  ids = pack_texts(tokenizer, contexts, questions, LENGTH)  # context <sep> question <sep> <cls>
  ids.update(p_mask=answer_position_mask(ids["input_ids"], ids["segment_ids"],
                                         tokenizer.special_ids.sep).numpy(),
             cls_index=np.full([4], LENGTH - 1))
  from_strings = reader.predict((questions, contexts), verbose=0)
  from_ids = reader.predict(ids, verbose=0)
  for key, value in from_ids.items():
    np.testing.assert_allclose(from_strings[key], value, atol=1e-6, err_msg=key)
  with pytest.raises(UserInputError, match="XLNetQuestionAnswering.fit cannot read raw strings: "
                     "it needs start_positions, end_positions, is_impossible"):
    reader.fit((questions, contexts), np.zeros([4]))


def test_without_a_preprocessor_strings_are_one_clear_error(tokenizer):
  head = XLNetClassifier(XLNetModel(same_config()), 2)
  message = (r"XLNetClassifier got raw strings but has no preprocessor to turn them into ids: "
             r"load it with XLNetClassifier.from_pretrained\(<a directory holding spiece.model>\)"
             r", or set `head.preprocessor = XLNetPreprocessor\(")
  dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(8)
  for run in (lambda: head.predict(TEXTS), lambda: head(TEXTS), lambda: head.fit(dataset),
              lambda: head.evaluate((TEXTS, PAIRS), LABELS)):
    with pytest.raises(UserInputError, match=message):
      run()
  pretrainer = XLNetPretrainer(XLNetModel(same_config()))
  pretrainer.tokenizer = tokenizer
  with pytest.raises(UserInputError, match="XLNetPretrainer reads no raw strings"):
    pretrainer.predict(TEXTS)


def test_save_pretrained_keeps_the_preprocessor(classifier, tokenizer, tmp_path):
  directory = classifier.save_pretrained(str(tmp_path / "classifier"))
  assert "preprocessor.json" in os.listdir(directory)
  reloaded = XLNetClassifier.from_pretrained(directory)
  assert reloaded.preprocessor.sequence_length == LENGTH
  assert reloaded.preprocessor.tokenizer.lower
  np.testing.assert_allclose(reloaded.predict((TEXTS, PAIRS), batch_size=8, verbose=0),
                             classifier.predict((TEXTS, PAIRS), batch_size=8, verbose=0),
                             atol=1e-6)
