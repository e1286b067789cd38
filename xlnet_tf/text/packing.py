"""The original input layout `A <sep> B <sep> <cls>`, in Python and in the graph.

zihangdai/xlnet classifier_utils: the pair truncated longest-first (from the end of the longer
side) to max_seq_length - 3 (- 2 without B), left-padded so that <cls> is the last position;
segment ids A = 0, B = 1, <cls> = 2, padding = 4; input_mask 1 = real token (the original's is
inverted; converted at this boundary). Single texts are `A <sep> <cls>`.

Example, max_seq_length 8, A = [a1 a2 a3], B = [b1 b2] (room 8 - 3 = 5, both fit):
  input_ids    a1 a2 a3 <sep> b1 b2 <sep> <cls>
  segment_ids  0  0  0  0     1  1  1     2
A alone: input_ids pad pad pad a1 a2 a3 <sep> <cls>, segment_ids 4 4 4 0 0 0 0 2,
input_mask 0 0 0 1 1 1 1 1.

Long documents (num_segments S > 1, read by XLNetClassifier with memory): the text or pair is
packed exactly as above into S * T positions (truncation, left padding, one <sep> after each
text, one <cls> at the very end), then cut into S consecutive segments of T
(`fold_into_segments`, the one split of the Python builders and the exported graph). So the
last segment always ends the document with its <cls> (what the "last" summary reads), a short
document's padding comes first (whole padding segments, then the left padding of its first
segment; XLNetClassifier masks it in the memory too), and S = 1 is the layout above exactly.
Example, T = 4, S = 2, A = [a1 a2 a3 a4] (8 positions, 6 used):
  packed       pad pad a1 a2 a3 a4 <sep> <cls>
  segments     [pad pad a1 a2] [a3 a4 <sep> <cls>]   (segment_ids [4 4 0 0] [0 0 0 2])
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import require

SEG_A, SEG_B, SEG_CLS, SEG_PAD = 0, 1, 2, 4
# The text inputs of each head's layout, by the SavedModel signature's names, in the order a
# tuple of texts gives them (XLNetPreprocessor, the heads' raw strings): single texts or pairs,
# a text and its options (multiple choice), a question and its context (SQuAD).
TEXT_INPUT_LAYOUTS = (("text",), ("text", "text_b"), ("text", "options"), ("question", "context"))
_SORTED_LAYOUTS = {tuple(sorted(names)) for names in TEXT_INPUT_LAYOUTS}


def truncate_pair(tokens_a: List[int], tokens_b: List[int], max_length: int) -> None:
  """The original's longest-first truncation, from the end, in place.

  Args:
    tokens_a: the first text's tokens, a list shortened in place.
    tokens_b: the second text's tokens, a list shortened in place ([] for none).
    max_length: the most tokens the two may keep together.
  """
  while len(tokens_a) + len(tokens_b) > max_length:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    longer.pop()


def pack_pair(tokens_a: Sequence[int], tokens_b: Optional[Sequence[int]], sep: int,
              cls: int) -> Tuple[List[int], List[int]]:
  """The tokens and segment ids of `A <sep> B <sep> <cls>`, unpadded (truncate first).

  Args:
    tokens_a: the first text's token ids.
    tokens_b: the second text's, or None for `A <sep> <cls>`.
    sep: the <sep> id.
    cls: the <cls> id.

  Returns:
    (tokens, segment ids): lists of equal length; segment ids SEG_A for A and its <sep>,
    SEG_B for B and its <sep>, SEG_CLS for <cls>.
  """
  tokens = list(tokens_a) + [sep]
  segments = [SEG_A] * (len(tokens_a) + 1)
  if tokens_b is not None:
    tokens += list(tokens_b) + [sep]
    segments += [SEG_B] * (len(tokens_b) + 1)
  return tokens + [cls], segments + [SEG_CLS]


def fold_into_segments(values, num_segments: int, segment_length: int):
  """[N, S * T] packed inputs -> [N, S, T]: S consecutive segments of T (S = num_segments,
  T = segment_length). The one split of long documents: pack_texts (NumPy in, a tensor out)
  and TextPacker (in the graph) both call it."""
  return tf.reshape(values, [-1, num_segments, segment_length])


def check_text_inputs(names) -> None:
  """The names of a call's texts form one of TEXT_INPUT_LAYOUTS (in any order)."""
  require(tuple(sorted(names)) in _SORTED_LAYOUTS, "the text inputs",
          f"one of the layouts {list(TEXT_INPUT_LAYOUTS)}", sorted(names))


def check_segments(max_segments: int, argument: str = "max_segments") -> None:
  require(isinstance(max_segments, int) and max_segments >= 1, argument,
          "at least 1 (the segments of max_seq_length tokens a document is read as)",
          max_segments)


def pack_texts(tokenizer, texts: Sequence[str], texts_b: Optional[Sequence[Optional[str]]] = None,
               max_seq_length: int = 128, *, report=None,
               where: Optional[Sequence[str]] = None,
               num_segments: int = 1) -> Dict[str, np.ndarray]:
  """Raw texts (and optional second texts) -> the packed model inputs, in NumPy.

  Each row is `A <sep> B <sep> <cls>` (`A <sep> <cls>` without a second text), truncated
  longest-first and left-padded: the module docstring's layout, the same ids as the exported
  graph's and XLNetPreprocessor's.

  Args:
    tokenizer: the XLNetTokenizer.
    texts: N texts.
    texts_b: N second texts (None where a row has none), or None for none at all.
    max_seq_length: T, the packed length of a row (of a segment with num_segments > 1).
    report: a ReadReport, if given, noting truncated rows and empty texts at `where[i]`.
    where: how the report names each row (default "row i").
    num_segments: S > 1 packs each row into S * T positions cut into S segments (long
      documents).

  Returns:
    {"input_ids", "segment_ids": int32, "input_mask": float32 (1 = real token)}, each
    [N, T], or [N, S, T] with num_segments > 1.

  Raises:
    UserInputError: for max_seq_length < 4 or num_segments < 1.
  """
  require(max_seq_length >= 4, "max_seq_length", "at least 4 (A <sep> <sep> <cls>)",
          max_seq_length)
  check_segments(num_segments, "num_segments")
  segment_length, max_seq_length = max_seq_length, max_seq_length * num_segments
  limit = (f"max_seq_length={segment_length}" if num_segments == 1 else
           f"{num_segments} segments x max_seq_length={segment_length}")
  sep, cls = tokenizer.special_ids.sep, tokenizer.special_ids.cls
  pad = max(tokenizer.special_ids.pad, 0)
  texts_b = list(texts_b) if texts_b is not None else [None] * len(texts)
  ids_a = tokenizer.encode_batch(list(texts))
  ids_b = tokenizer.encode_batch([text or "" for text in texts_b])
  where = list(where) if where is not None else [f"row {i}" for i in range(len(texts))]
  count = len(texts)
  input_ids = np.full([count, max_seq_length], pad, np.int32)
  segment_ids = np.full([count, max_seq_length], SEG_PAD, np.int32)
  input_mask = np.zeros([count, max_seq_length], np.float32)
  for row, (text_b, tokens_a, tokens_b) in enumerate(zip(texts_b, ids_a, ids_b)):
    if not tokens_a and report is not None:
      report.note("with an empty text (an empty segment)", where[row])
    has_b = text_b is not None
    room = max_seq_length - (3 if has_b else 2)
    if len(tokens_a) + len(tokens_b) > room and report is not None:
      report.note(f"truncated to {limit} (the longer text cut from its end)", where[row])
    truncate_pair(tokens_a, tokens_b, room)
    tokens, segments = pack_pair(tokens_a, tokens_b if has_b else None, sep, cls)
    start = max_seq_length - len(tokens)
    input_ids[row, start:] = tokens
    segment_ids[row, start:] = segments
    input_mask[row, start:] = 1.0
  features = {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": input_mask}
  if num_segments == 1:
    return features
  return {key: fold_into_segments(value, num_segments, segment_length).numpy()
          for key, value in features.items()}


# ---- the same in the graph (SavedModels) ---------------------------------------------------

def _keep_lengths(length_a, length_b, room):
  """Lengths after the original longest-first truncation (see truncate_pair), in closed form."""
  fits = length_a + length_b <= room
  keep_a = tf.minimum(length_a, tf.maximum(room - length_b, (room + 1) // 2))
  return (tf.where(fits, length_a, keep_a), tf.where(fits, length_b, room - keep_a))


def _packed_positions(ids_a, keep_a, ids_b, keep_b, length: int, sep: int, cls: int, pad: int):
  """(input_ids, segment_ids, input_mask) [B, length] of `A <sep> [B <sep>] <cls>`, left-padded,
  from ragged ids [B, None] and the lengths kept of each (ids_b, keep_b None: no B).

  Dense: every output position reads its token by a gather at its offset in the packed row, so
  the graph holds no ragged validation (each a branch function to build when tf.data or a
  SavedModel instantiates the graph)."""
  used = keep_a + 2 if ids_b is None else keep_a + keep_b + 3  # [B]
  offset = tf.range(length, dtype=tf.int64)[None, :] - (length - used)[:, None]  # [B, T]
  end_a = keep_a[:, None]  # A's <sep>
  in_a = tf.logical_and(offset >= 0, offset < end_a)
  separator = tf.equal(offset, end_a)
  in_b = tf.zeros_like(in_a)
  tokens = tf.where(in_a, _gather_at(ids_a, offset), tf.cast(pad, tf.int64))
  if ids_b is not None:
    start_b = end_a + 1
    end_b = start_b + keep_b[:, None]  # B's <sep>
    in_b = tf.logical_and(offset >= start_b, offset < end_b)
    tokens = tf.where(in_b, _gather_at(ids_b, offset - start_b), tokens)
    separator = tf.logical_or(separator, tf.equal(offset, end_b))
  is_cls = tf.equal(offset, (used - 1)[:, None])
  tokens = tf.where(separator, tf.cast(sep, tf.int64), tokens)
  tokens = tf.where(is_cls, tf.cast(cls, tf.int64), tokens)
  segment_b = tf.logical_or(in_b, tf.logical_and(separator, offset > end_a))
  segments = tf.where(tf.logical_or(in_a, tf.equal(offset, end_a)), SEG_A,
                      tf.where(segment_b, SEG_B, tf.where(is_cls, SEG_CLS, SEG_PAD)))
  return (tf.cast(tokens, tf.int32), tf.cast(segments, tf.int32),
          tf.cast(offset >= 0, tf.float32))


def _gather_at(ragged, positions):
  """ragged [B, None] read at positions [B, T] (clipped into each row; callers mask)."""
  dense = tf.pad(ragged.to_tensor(), [[0, 0], [0, 1]])  # >= 1 column, even for empty rows
  return tf.gather(dense, tf.clip_by_value(positions, 0, tf.shape(dense, tf.int64)[1] - 1),
                   batch_dims=1)


class TextPacker(tf.Module):
  """Strings -> (input_ids, segment_ids, input_mask) [B, max_seq_length], in the graph;
  [B, num_segments, max_seq_length] with num_segments > 1 (pack_texts' layout). The one
  packing of the SavedModel's text signature and of XLNetPreprocessor (text.preprocessor)."""

  def __init__(self, tokenizer, max_seq_length: int, num_segments: int = 1):
    super().__init__(name="text_packer")
    check_segments(num_segments, "num_segments")
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length
    self.num_segments = num_segments
    ids = tokenizer.special_ids
    self.sep, self.cls, self.pad = ids.sep, ids.cls, max(ids.pad, 0)

  def _tokenize(self, texts):
    # Invalid UTF-8 becomes U+FFFD (as bytes.decode(errors="replace")) instead of failing.
    texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace")
    return tf.cast(self.tokenizer(texts), tf.int64)

  def __call__(self, text_a, text_b=None):
    ids_a = self._tokenize(text_a)
    length = self.max_seq_length * self.num_segments
    if text_b is None:
      ids_b = keep_b = None
      keep_a = tf.minimum(ids_a.row_lengths(), length - 2)
    else:
      ids_b = self._tokenize(text_b)
      keep_a, keep_b = _keep_lengths(ids_a.row_lengths(), ids_b.row_lengths(), length - 3)
    input_ids, segment_ids, input_mask = _packed_positions(ids_a, keep_a, ids_b, keep_b, length,
                                                           self.sep, self.cls, self.pad)
    packed = (input_ids, segment_ids, input_mask)
    if self.num_segments == 1:
      return packed
    return tuple(fold_into_segments(value, self.num_segments, self.max_seq_length)
                 for value in packed)

  def pack_named(self, texts: Dict[str, tf.Tensor]):
    """(input_ids, segment_ids, input_mask) of texts by the SavedModel's text input names
    (TEXT_INPUT_LAYOUTS): {text[, text_b]} [B]; {text [B], options [B, C]}: each option packed
    after its text, [B, C, max_seq_length]; {question, context} [B]: the SQuAD window
    `context <sep> question <sep> <cls>`."""
    check_text_inputs(texts)
    if "options" in texts:
      require(self.num_segments == 1, "options", "packed into one segment (num_segments 1)",
              self.num_segments)
      options = texts["options"]
      count = tf.shape(options)[1]
      flat = self(tf.repeat(texts["text"], count), tf.reshape(options, [-1]))
      return tuple(tf.reshape(t, tf.stack([-1, count, self.max_seq_length])) for t in flat)
    if "question" in texts:
      return self(texts["context"], texts["question"])
    return self(texts["text"], texts.get("text_b"))
