"""In-graph XLNet tokenization on tensorflow-text, equal to `XLNetTokenizer` (for serving).

The preprocessing runs as string ops: whitespace collapse with the exact set of characters
Python's str.split() treats as whitespace, `` and '' -> ", NFKD and removal of the characters
`unicodedata.combining` flags (both sets are read from Python's unicodedata at construction),
lower-casing; then SentencePiece (tensorflow-text) and the digit-comma re-split as a ragged
per-id replacement table. A SavedModel holding it needs `import tensorflow_text` where it loads.
"""

import functools
import sys
import unicodedata
from typing import Iterable

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.utils import files


def _character_class(code_points: Iterable[int]) -> str:
  """An RE2 character class of the given code points, as ranges."""
  ranges = []
  for code in sorted(code_points):
    if ranges and code == ranges[-1][1] + 1:
      ranges[-1][1] = code
    else:
      ranges.append([code, code])
  parts = [f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}" for lo, hi in ranges]
  return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)  # a pass over every code point: once per process
def _python_whitespace() -> str:
  return _character_class(c for c in range(sys.maxunicode + 1) if chr(c).isspace())


@functools.lru_cache(maxsize=None)
def _combining_marks() -> str:
  return _character_class(c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c)))


class InGraphTokenizer(tf.Module):
  """Strings [N] -> ragged ids [N, None] (int32), as `XLNetTokenizer.encode_batch`.

  The SentencePiece model is a tensorflow-text resource, which belongs to the kernel that
  created it: TensorFlow drops it when it clears its kernel cache (tf.random.set_seed and
  keras.utils.set_random_seed do). By default it is created here, once, for a SavedModel to
  track (loading recreates it). `graph_owned=True` creates it in each graph that tokenizes
  instead (a tf.function, a tf.data map), so a graph never holds a dropped one: for a tokenizer
  that lives on in the process (XLNetPreprocessor).
  """

  def __init__(self, sp_path: str, lower: bool = False, keep_accents: bool = False,
               name: str = "xlnet_tokenizer", graph_owned: bool = False):
    super().__init__(name=name)
    python_tokenizer = XLNetTokenizer(sp_path, lower=lower, keep_accents=keep_accents)
    self.lower = lower
    self.keep_accents = keep_accents
    self.special_ids = python_tokenizer.special_ids
    self._model_bytes = files.read_bytes(sp_path)
    self._sentencepiece = None if graph_owned else self._new_sentencepiece()
    whitespace = _python_whitespace()
    self._whitespace_run = whitespace + "+"
    self._edge_whitespace = f"^{whitespace}+|{whitespace}+$"
    self._combining = _combining_marks()
    vocab_size = python_tokenizer.vocab_size
    rows = [python_tokenizer.replacements.get(i, [i]) for i in range(vocab_size)]
    self._replacement_values = tf.constant(np.concatenate(rows).astype(np.int32))
    self._replacement_lengths = tf.constant(np.array([len(r) for r in rows], np.int64))

  def preprocess(self, texts):
    texts = tf.strings.regex_replace(texts, self._edge_whitespace, "")
    texts = tf.strings.regex_replace(texts, self._whitespace_run, " ")
    texts = tf.strings.regex_replace(texts, "``|''", '"')
    if not self.keep_accents:
      texts = tf_text.normalize_utf8(texts, "NFKD")
      texts = tf.strings.regex_replace(texts, self._combining, "")
    if self.lower:
      texts = tf.strings.lower(texts, encoding="utf-8")
    return texts

  def _new_sentencepiece(self):
    return tf_text.SentencepieceTokenizer(model=self._model_bytes, out_type=tf.int32)

  def __call__(self, texts):
    texts = tf.convert_to_tensor(texts, tf.string)
    sentencepiece = self._sentencepiece or self._new_sentencepiece()
    ids = sentencepiece.tokenize(self.preprocess(texts))  # ragged [N, None]
    replacements = tf.RaggedTensor.from_row_lengths(self._replacement_values,
                                                    self._replacement_lengths)
    return tf.gather(replacements, ids).merge_dims(1, 2)  # [N, None]
