"""XLNetPreprocessor: raw strings -> the packed model inputs, as a Keras layer.

It runs the SavedModel export's graph (the in-graph tokenizer and TextPacker), so its ids are
those of the export's serving_default and of `pack_texts` in Python: `A <sep> B <sep> <cls>`,
longest-first truncation, left padding, input_mask 1 = real token. It works eagerly (Python
lists, NumPy arrays), under tf.function and in tf.data (`dataset.map(preprocessor)`); a
`(texts, labels)` dataset maps to `(features, labels)`, as keras-hub's preprocessors do.

A pretrained directory keeps it as spiece.model + tokenizer_config.json (the tokenizer) and
preprocessor.json (sequence_length, num_segments).
"""

import os
from typing import Optional, Union

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.text.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf.text.packing import TextPacker, check_segments, check_text_inputs
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError, is_int, require
from xlnet_tf.utils.json_files import read_json_object, write_json
from xlnet_tf.utils.tracing import TracedAlone

PREPROCESSOR_FILE = "preprocessor.json"
DEFAULT_SEQUENCE_LENGTH = 128
_SETTINGS = ("sequence_length", "num_segments")


def holds_strings(value) -> bool:
  """Whether `value` is text: a str or bytes, a list of them (or of lists of them), a NumPy
  array, tensor or TensorSpec of strings. Reads one element at most: cheap enough for every
  call of a model."""
  if isinstance(value, (str, bytes)):
    return True
  if isinstance(value, list):
    return bool(value) and holds_strings(value[0])
  if isinstance(value, np.ndarray):
    kind = value.dtype.kind
    return kind in "US" or (kind == "O" and value.size > 0
                            and isinstance(value.flat[0], (str, bytes)))
  dtype = getattr(value, "dtype", None)  # a tensor, TensorSpec or KerasTensor
  return dtype is not None and getattr(dtype, "name", dtype) == "string"


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetPreprocessor(keras.layers.Layer):
  """Strings -> {"input_ids" int32, "segment_ids" int32, "input_mask" float32}.

  Args:
    tokenizer: an XLNetTokenizer (or the path of its spiece.model); its lower-casing and
      accent setting apply.
    sequence_length: T, the packed length (texts are truncated longest-first to fit).
    num_segments: S > 1 packs each text into S * T positions cut into S segments (a
      classifier reading long documents with memory, text.packing's layout).
    **kwargs: Keras Layer arguments (name).

  Inputs, each [B] strings (or one string: outputs without the batch axis):
    texts                      A <sep> <cls>                          -> [B, T]
    (texts_a, texts_b)         A <sep> B <sep> <cls>                  -> [B, T]
    (texts, options)           options [B, C]: each packed after its text -> [B, C, T]
    a dict by the SavedModel's text input names (text.packing.TEXT_INPUT_LAYOUTS), e.g.
    {"question", "context"}    the SQuAD window context <sep> question <sep> <cls>
  [B, S, T] with num_segments S > 1. Called with two arguments, the second is texts_b when it
  holds strings and labels otherwise (labels are never strings): `(texts, labels)` gives
  `(features, labels)`, `(texts, labels, sample_weight)` likewise.

  Raises:
    UserInputError: for a tokenizer that is neither, sequence_length < 4 or num_segments < 1.

  >>> import os, tempfile
  >>> from xlnet_tf.text.sentencepiece_training import train_sentencepiece
  >>> folder = tempfile.TemporaryDirectory()
  >>> corpus = os.path.join(folder.name, "corpus.txt")
  >>> with open(corpus, "w") as text:
  ...   _ = text.write("the cat sat on the mat.\\nthe dog sat on the log.\\n" * 50)
  >>> sp_path = train_sentencepiece([corpus], os.path.join(folder.name, "spiece"), vocab_size=30)
  >>> preprocessor = XLNetPreprocessor(XLNetTokenizer(sp_path), sequence_length=12)
  >>> features = preprocessor((["the cat sat.", "cat"], ["on the mat.", "dog"]))  # A, B
  >>> {key: tuple(value.shape) for key, value in features.items()}
  {'input_ids': (2, 12), 'segment_ids': (2, 12), 'input_mask': (2, 12)}
  >>> features["segment_ids"][1].numpy().tolist()  # padding (4), A <sep>, B <sep>, <cls> (2)
  [4, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2]
  >>> folder.cleanup()
  """

  def __init__(self, tokenizer: Union[XLNetTokenizer, str],
               sequence_length: int = DEFAULT_SEQUENCE_LENGTH, num_segments: int = 1, **kwargs):
    super().__init__(**kwargs)
    # Strings and Python lists reach call() as given (Keras would convert them as numbers).
    self._convert_input_args = False
    self._allow_non_tensor_positional_args = True
    if isinstance(tokenizer, str):
      tokenizer = XLNetTokenizer(tokenizer)
    require(isinstance(tokenizer, XLNetTokenizer), "XLNetPreprocessor's tokenizer",
            "an XLNetTokenizer or the path of a SentencePiece model", type(tokenizer).__name__)
    require(is_int(sequence_length) and sequence_length >= 4, "XLNetPreprocessor.sequence_length",
            "an integer of at least 4 (A <sep> <sep> <cls>)", sequence_length)
    check_segments(num_segments, "XLNetPreprocessor.num_segments")
    self.tokenizer = tokenizer
    self.sequence_length = sequence_length
    self.num_segments = num_segments
    self.packer = TextPacker(InGraphTokenizer(tokenizer.sp_path, lower=tokenizer.lower,
                                              keep_accents=tokenizer.keep_accents,
                                              graph_owned=True),
                             sequence_length, num_segments)
    # Eager calls run as one graph (op by op they take 50x as long); its traces counted apart
    # from other preprocessors' (utils.tracing), which run the same method.
    self._pack_eagerly = tf.function(TracedAlone(self.packer.pack_named), reduce_retracing=True,
                                     autograph=False)
    self.built = True  # no weights; Keras never needs to trace it on placeholders

  def call(self, x, y=None, sample_weight=None):
    """Packs strings into the model's inputs (the class docstring lists the layouts).

    Args:
      x: texts [B] (or one string), a tuple (texts_a, texts_b) or (texts, options [B, C]), or
        a dict by the SavedModel's text input names.
      y: labels, passed through; strings here are texts_b instead (`preprocessor(texts_a,
        texts_b)`, as tf.data passes a pair).
      sample_weight: passed through.

    Returns:
      {"input_ids" int32, "segment_ids" int32, "input_mask" float32}, each [B, T] ([B, C, T]
      with options, [B, S, T] with num_segments S > 1; [T] for one string); with labels,
      (features, y) or (features, y, sample_weight).

    Raises:
      UserInputError: for texts in none of the layouts, or of the wrong ranks.
    """
    if y is not None and sample_weight is None and holds_strings(y):
      x, y = (x, y), None  # preprocessor(texts_a, texts_b), as tf.data passes a pair
    texts = _named_texts(x)
    one = texts[next(iter(texts))].shape.rank == 0
    if one:
      texts = {name: value[None] for name, value in texts.items()}
    pack = self._pack_eagerly if tf.executing_eagerly() else self.packer.pack_named
    input_ids, segment_ids, input_mask = pack(texts)
    features = {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": input_mask}
    if one:
      features = {name: value[0] for name, value in features.items()}
    return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

  def get_config(self):
    """The layer's settings, for Keras' serialization (.keras files).

    Returns:
      Keras' layer config with sequence_length, num_segments and the tokenizer's sp_path,
      lower and keep_accents.
    """
    tokenizer = self.tokenizer
    return {**super().get_config(), "sequence_length": self.sequence_length,
            "num_segments": self.num_segments,
            "tokenizer": {"sp_path": tokenizer.sp_path, "lower": tokenizer.lower,
                          "keep_accents": tokenizer.keep_accents}}

  @classmethod
  def from_config(cls, config):
    """The preprocessor a `get_config` dict describes.

    Args:
      config: a dict `get_config` returned (its sp_path must still be readable).

    Returns:
      A new XLNetPreprocessor over a new XLNetTokenizer.
    """
    config = dict(config)
    return cls(XLNetTokenizer(**config.pop("tokenizer")), **config)

  def save_pretrained(self, directory: str) -> str:
    """Writes the tokenizer and the packing settings into `directory`.

    The files: spiece.model and tokenizer_config.json (XLNetTokenizer.save_pretrained) and
    preprocessor.json (sequence_length, num_segments), which the heads' from_pretrained read
    back (`saved_preprocessor`).

    Args:
      directory: where to write, local or remote; created if needed.

    Returns:
      `directory`.
    """
    self.tokenizer.save_pretrained(directory)
    write_json(os.path.join(directory, PREPROCESSOR_FILE),
               {name: getattr(self, name) for name in _SETTINGS})
    return directory


def saved_preprocessor(directory: str, tokenizer: XLNetTokenizer
                       ) -> Optional[XLNetPreprocessor]:
  """The preprocessor `XLNetPreprocessor.save_pretrained` wrote into `directory`, over
  `tokenizer` (the directory's); None without preprocessor.json. Errors name the file."""
  path = os.path.join(directory, PREPROCESSOR_FILE)
  if not files.exists(path):
    return None
  settings = read_json_object(path)
  unknown = sorted(set(settings) - set(_SETTINGS))
  if unknown:
    raise UserInputError(f"{path}: unknown setting(s) {unknown}; known: {list(_SETTINGS)}")
  try:
    return XLNetPreprocessor(tokenizer, **settings)
  except UserInputError as error:
    raise UserInputError(f"{path}: {error}") from None


def _named_texts(x):
  """{text input name: string tensor} of a call's texts (see XLNetPreprocessor)."""
  if isinstance(x, dict):
    texts = {name: tf.convert_to_tensor(value, tf.string) for name, value in x.items()}
  elif isinstance(x, tuple):
    require(len(x) in (1, 2), "XLNetPreprocessor's tuple of texts",
            "(texts,), (texts_a, texts_b) or (texts, options)", f"{len(x)} parts")
    parts = [tf.convert_to_tensor(part, tf.string) for part in x]
    options = len(parts) == 2 and parts[1].shape.rank == parts[0].shape.rank + 1
    texts = dict(zip(("text", "options" if options else "text_b"), parts))
  else:
    texts = {"text": tf.convert_to_tensor(x, tf.string)}
  check_text_inputs(texts)
  ranks = {name: value.shape.rank for name, value in texts.items()}
  text_rank = min(ranks.values())
  require(text_rank in (0, 1) and all(rank == text_rank + (name == "options")
                                      for name, rank in ranks.items()),
          "XLNetPreprocessor's texts", "[B] strings or one string each (options [B, C])",
          f"ranks {ranks}")
  return texts
