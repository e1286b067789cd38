"""XLNetPreprocessor: the export's in-graph packing as a Keras layer, equal to pack_texts (the
Python packing) eagerly, under tf.function and in tf.data; serializable; kept by a directory."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import XLNetPreprocessor, XLNetTokenizer
from xlnet_tf.text import pack_texts
from xlnet_tf.text.preprocessor import PREPROCESSOR_FILE, saved_preprocessor
from xlnet_tf.utils.errors import UserInputError

LENGTH = 16
# Truncated and padded rows, non-ASCII text, digit-comma pieces, an empty text.
TEXTS = ["The built-in function len returns the length of an object, of a list or a string.",
         "Café naïve résumé, 中文 and emoji 😀",
         "",
         "In 2000, 1,234 items"]
PAIRS = ["A second text.", "Ångström STRASSE ß, then a much longer second text that is cut first",
         "only the second", ""]


@pytest.fixture(scope="module")
def tokenizer(sp_model):
  return XLNetTokenizer(sp_model, lower=True)


@pytest.fixture(scope="module")
def preprocessor(tokenizer):
  return XLNetPreprocessor(tokenizer, sequence_length=LENGTH)


def assert_packed_as(features, expected):
  assert set(features) == set(expected)
  for key, value in expected.items():
    array = np.asarray(features[key])
    assert array.dtype == value.dtype, key
    np.testing.assert_array_equal(array, value, err_msg=key)


@pytest.mark.parametrize("pairs", [False, True])
def test_equals_pack_texts_eagerly_and_in_a_graph(preprocessor, tokenizer, pairs):
  expected = pack_texts(tokenizer, TEXTS, PAIRS if pairs else None, LENGTH)
  assert expected["input_mask"].min() == 0 and expected["input_mask"][0].min() == 1  # padded, full
  given = (TEXTS, PAIRS) if pairs else TEXTS
  assert_packed_as(preprocessor(given), expected)  # Python lists
  arrays = (np.array(TEXTS), np.array(PAIRS, dtype=object)) if pairs else np.array(TEXTS)
  assert_packed_as(preprocessor(arrays), expected)  # NumPy arrays, str and object
  tensors = tuple(map(tf.constant, given)) if pairs else tf.constant(given)
  assert_packed_as(tf.function(preprocessor)(tensors), expected)


def test_one_text_has_no_batch_axis(preprocessor, tokenizer):
  expected = pack_texts(tokenizer, TEXTS[1:2], PAIRS[1:2], LENGTH)
  assert_packed_as(preprocessor((TEXTS[1], PAIRS[1])),
                   {key: value[0] for key, value in expected.items()})


def test_in_tf_data_with_labels_pairs_and_unbatched_elements(preprocessor, tokenizer):
  expected = pack_texts(tokenizer, TEXTS, PAIRS, LENGTH)
  labels = np.arange(len(TEXTS))
  batched = tf.data.Dataset.from_tensor_slices(((TEXTS, PAIRS), labels)).batch(3)
  rows = list(batched.map(preprocessor))
  features = {key: np.concatenate([row[0][key] for row in rows]) for key in expected}
  assert_packed_as(features, expected)
  np.testing.assert_array_equal(np.concatenate([row[1] for row in rows]), labels)
  # A dataset of pairs alone: the second strings are texts_b, not labels. Unbatched rows
  # (one string each) are packed one by one, then batched.
  pairs_only = tf.data.Dataset.from_tensor_slices((TEXTS, PAIRS)).map(preprocessor).batch(4)
  assert_packed_as(next(iter(pairs_only)), expected)


def test_a_cleared_kernel_cache_leaves_it_working(tokenizer):
  """tf.random.set_seed clears TensorFlow's kernel cache, and with it the SentencePiece
  resources kernels own: each graph of the preprocessor makes its own."""
  preprocessor = XLNetPreprocessor(tokenizer, sequence_length=LENGTH)
  expected = pack_texts(tokenizer, TEXTS, None, LENGTH)
  dataset = tf.data.Dataset.from_tensor_slices(TEXTS).batch(len(TEXTS)).map(preprocessor)
  assert_packed_as(preprocessor(TEXTS), expected)
  keras.utils.set_random_seed(1)
  assert_packed_as(preprocessor(TEXTS), expected)
  assert_packed_as(next(iter(dataset)), expected)


def test_options_are_packed_after_their_text(preprocessor, tokenizer):
  options = [["first option", "second", "third, 3,"], ["un", "deux", "trois"]]
  features = preprocessor((TEXTS[:2], options))
  assert features["input_ids"].shape == (2, 3, LENGTH)
  for row in range(2):
    expected = pack_texts(tokenizer, [TEXTS[row]] * 3, options[row], LENGTH)
    assert_packed_as({key: value[row] for key, value in features.items()}, expected)


def test_named_inputs_question_and_context_pack_the_squad_window(preprocessor, tokenizer):
  features = preprocessor({"question": PAIRS, "context": TEXTS})
  assert_packed_as(features, pack_texts(tokenizer, TEXTS, PAIRS, LENGTH))


def test_long_documents_are_cut_into_segments(tokenizer):
  preprocessor = XLNetPreprocessor(tokenizer, sequence_length=8, num_segments=3)
  assert_packed_as(preprocessor((TEXTS, PAIRS)),
                   pack_texts(tokenizer, TEXTS, PAIRS, 8, num_segments=3))


def test_config_round_trip_and_a_saved_directory(preprocessor, tokenizer, tmp_path):
  config = preprocessor.get_config()
  assert config["tokenizer"] == {"sp_path": tokenizer.sp_path, "lower": True,
                                 "keep_accents": False}
  assert config["sequence_length"] == LENGTH
  rebuilt = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(preprocessor))
  assert type(rebuilt) is XLNetPreprocessor and rebuilt.tokenizer.lower
  expected = pack_texts(tokenizer, TEXTS, PAIRS, LENGTH)
  assert_packed_as(rebuilt((TEXTS, PAIRS)), expected)
  directory = preprocessor.save_pretrained(str(tmp_path / "saved"))
  loaded = saved_preprocessor(directory, XLNetTokenizer.from_pretrained(directory))
  assert (loaded.sequence_length, loaded.num_segments) == (LENGTH, 1)
  assert_packed_as(loaded((TEXTS, PAIRS)), expected)
  assert saved_preprocessor(str(tmp_path), tokenizer) is None  # no preprocessor.json


def test_bad_settings_and_inputs_are_clear_errors(tokenizer, preprocessor, tmp_path):
  with pytest.raises(UserInputError, match="sequence_length must be an integer of at least 4"):
    XLNetPreprocessor(tokenizer, sequence_length=3)
  with pytest.raises(UserInputError, match="num_segments must be at least 1"):
    XLNetPreprocessor(tokenizer, num_segments=0)
  with pytest.raises(UserInputError, match="tokenizer must be an XLNetTokenizer"):
    XLNetPreprocessor(42)
  with pytest.raises(UserInputError, match=r"tuple of texts must be .*; got 3 parts"):
    preprocessor((TEXTS, TEXTS, TEXTS))
  with pytest.raises(UserInputError, match="text inputs must be one of the layouts"):
    preprocessor({"question": TEXTS})
  with pytest.raises(UserInputError, match=r"texts must be \[B\] strings"):
    preprocessor([[TEXTS]])
  (tmp_path / PREPROCESSOR_FILE).write_text('{"sequence_length": 2}')
  with pytest.raises(UserInputError, match=f"{PREPROCESSOR_FILE}: XLNetPreprocessor"):
    saved_preprocessor(str(tmp_path), tokenizer)
  (tmp_path / PREPROCESSOR_FILE).write_text('{"length": 8}')
  with pytest.raises(UserInputError, match=r"unknown setting\(s\) \['length'\]"):
    saved_preprocessor(str(tmp_path), tokenizer)
