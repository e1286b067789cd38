"""What a "word" is for span prediction and whole-word masking (`spans`).

SentencePiece marks a word start with U+2581 where the text had a space, so in scripts written
without spaces between words (Chinese, Japanese, Thai, ...) a "word" runs to the next space or
ASCII punctuation: often a whole sentence, which no span budget of a few words can hold (the
sampler then ends its spans and picks scattered single pieces). Two settings fix it, and leave
text whose words are spaced and of ordinary length sampled exactly as before:

- `unspaced_pieces_as_words`: a piece of such a script is a word of its own. SentencePiece
  learns frequent character sequences of those scripts as single pieces, and never lets a piece
  cross a script boundary, so its pieces there are the closest thing to words it knows.
- `max_word_pieces`: a "word" of more pieces than this (in any script: a URL, a hash, a script
  not listed here) is predicted as pieces (`split_long_words`).
"""

import functools

import numpy as np

# First code points of the blocks of scripts written without spaces between words, and their
# punctuation (CJK's 。「」 start words as ASCII punctuation does); ends exclusive.
UNSPACED_SCRIPT_BLOCKS = (
    (0x0E00, 0x0F00),    # Thai, Lao
    (0x0F00, 0x1000),    # Tibetan
    (0x1000, 0x10A0),    # Myanmar
    (0x1780, 0x1800),    # Khmer
    (0x3000, 0x3100),    # CJK symbols and punctuation, Hiragana, Katakana
    (0x3100, 0x3130),    # Bopomofo
    (0x31F0, 0x3200),    # Katakana phonetic extensions
    (0x3400, 0x4DC0),    # CJK unified ideographs extension A
    (0x4E00, 0xA000),    # CJK unified ideographs
    (0xF900, 0xFB00),    # CJK compatibility ideographs
    (0xFF61, 0xFFA0),    # halfwidth CJK punctuation and Katakana
    (0x20000, 0x32000),  # CJK extensions B-H
)


def is_unspaced_script(character: str) -> bool:
  code = ord(character)
  return any(first <= code < end for first, end in UNSPACED_SCRIPT_BLOCKS)


def unspaced_script_pieces(pieces) -> np.ndarray:
  """bool [V]: pieces whose text (after the word-start marker) begins with a character of a
  script written without spaces.

  >>> unspaced_script_pieces(["\u2581the", "\u2581\u4eca\u5929", "\u5929", "\u0e44\u0e17\u0e22",
  ...                         "ing", "\u3002"]).tolist()
  [False, True, True, True, False, True]
  """
  text = [piece.lstrip("\u2581") for piece in pieces]
  return np.array([bool(piece) and is_unspaced_script(piece[0]) for piece in text], bool)


@functools.lru_cache(maxsize=8)  # per tokenizer (the stage keeps one per process and file)
def word_start_table(tokenizer, unspaced_pieces_as_words: bool) -> np.ndarray:
  """bool [V]: the ids that start a word for span prediction: the tokenizer's word starts
  (marker, '<' symbols, punctuation), and with `unspaced_pieces_as_words` every piece of a
  script written without spaces."""
  if not unspaced_pieces_as_words:
    return tokenizer.word_start
  pieces = [tokenizer.processor.IdToPiece(i) for i in range(tokenizer.vocab_size)]
  return tokenizer.word_start | unspaced_script_pieces(pieces)


def split_long_words(word_start, max_word_pieces: int):
  """bool [L]: `word_start` with every piece of a word longer than `max_word_pieces` pieces
  made a word start (0: no limit). The pieces before the first word start (a segment that
  begins inside a word) count as a word too.

  >>> split_long_words(np.array([1, 0, 1, 0, 0, 0, 1], bool), 3).astype(int).tolist()
  [1, 0, 1, 1, 1, 1, 1]
  """
  word_start = np.asarray(word_start, bool)
  if max_word_pieces <= 0 or len(word_start) <= max_word_pieces:
    return word_start
  word_index = np.cumsum(word_start)  # the pieces before the first start: word 0
  too_long = np.bincount(word_index) > max_word_pieces
  return word_start | too_long[word_index]
