"""Pretraining examples: streams of token rows cut into `[reuse] A <sep> B <sep> <cls>`.

As the original create_tfrecords: the corpus becomes one token stream (sentences alternate
sentence ids; <eod> closes a document), cut into `bsz_per_host` parallel rows (with bi_data,
half the rows and their reversals, per core); step t of row r starts at t * reuse_len, so the
memory of step t is the context of step t + 1. Each example is stored compactly: token ids,
segment ids, target positions, the A/B label, and per objective the factorization ranks
(`perm`, see `permutation`) or the ids shown at the targets (`mlm`, see `masked_lm`).

The prediction targets are the same for both objectives: whole-word spans (the paper's
span-based prediction) or, with `span_prediction=False`, single tokens (Table 6's ablation).
"""

import dataclasses
import random
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from xlnet_tf.errors import UserInputError
from xlnet_tf.pretraining.lm_streams import lm_batch_count
from xlnet_tf.pretraining.masked_lm import draw_replacements
from xlnet_tf.pretraining.permutation import factorization_ranks
from xlnet_tf.pretraining.spans import sample_tokens, sample_word_spans
from xlnet_tf.pretraining.token_files import BoundaryIndex, SortedBoundaries

FUNCTIONAL_TOKENS = 3  # <sep> after A, <sep> after B, <cls>
# perm: XLNet's permutation LM (query stream); mlm: BERT's masked LM (content stream);
# clm: Transformer-XL's left-to-right LM (contiguous segments, see lm_streams).
OBJECTIVES = ("perm", "mlm", "clm")


@dataclasses.dataclass
class PretrainingSettings:
  """Settings of the data stage; written to record_info.json and checked by readers."""
  seq_len: int = 128
  reuse_len: int = 64
  num_predict: int = 21
  perm_size: Optional[int] = None  # default: reuse_len (or seq_len without reuse)
  bsz_per_host: int = 16
  num_core_per_host: int = 1
  bi_data: bool = True
  mask_alpha: int = 6
  mask_beta: int = 1
  max_span_words: int = 5
  uncased: bool = False
  use_eod: bool = True
  objective: str = "perm"
  span_prediction: bool = True  # False: single-token targets

  def __post_init__(self):
    if self.perm_size is None:
      self.perm_size = self.reuse_len or self.seq_len
    self.validate()

  @property
  def new_len(self) -> int:
    return self.seq_len - self.reuse_len

  @property
  def predictions_per_part(self) -> Tuple[int, int]:
    """(reuse part, new part): the original gives the reuse part the larger half."""
    if self.reuse_len == 0:
      return 0, self.num_predict
    return self.num_predict - self.num_predict // 2, self.num_predict // 2

  def validate(self) -> None:
    def require(ok, message):
      if not ok:
        raise UserInputError(f"Pretraining settings: {message}")
    for name in ("seq_len", "num_predict", "bsz_per_host", "num_core_per_host", "mask_alpha",
                 "mask_beta", "max_span_words", "perm_size"):
      require(isinstance(getattr(self, name), int) and getattr(self, name) > 0,
              f"{name} must be a positive integer, got {getattr(self, name)!r}")
    require(self.objective in OBJECTIVES,
            f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
    require(self.bsz_per_host % self.num_core_per_host == 0,
            "bsz_per_host must be divisible by num_core_per_host")
    if self.objective == "clm":
      # Consecutive segments follow each other; every position is a target.
      require(self.reuse_len == 0, "objective clm reads consecutive segments: reuse_len must "
              f"be 0 (the whole segment becomes memory), got {self.reuse_len}")
      require(not self.bi_data, "objective clm reads left to right: bi_data must be False")
      return
    require(0 <= self.reuse_len < self.seq_len - FUNCTIONAL_TOKENS,
            f"reuse_len must be in [0, seq_len - 3) so A and B get a token each; got reuse_len="
            f"{self.reuse_len}, seq_len={self.seq_len}")
    for part, length in (("reuse", self.reuse_len), ("new", self.new_len)):
      if length:
        require(length % self.perm_size == 0 and self.perm_size <= length,
                f"perm_size={self.perm_size} must divide the {part} part's length {length}")
    in_reuse, in_new = self.predictions_per_part
    require(in_reuse <= self.reuse_len and in_new <= self.new_len - FUNCTIONAL_TOKENS,
            f"num_predict={self.num_predict} does not fit: the reuse part (length "
            f"{self.reuse_len}) gets {in_reuse} predictions and the new part (length "
            f"{self.new_len}, 3 functional tokens) {in_new}")
    require(self.seq_len < 32768, "seq_len must be < 32768 (ranks are stored as int16)")
    if self.bi_data:
      require(self.bsz_per_host % (2 * self.num_core_per_host) == 0,
              "with bi_data, bsz_per_host must be divisible by 2 * num_core_per_host (each "
              "core holds forward and backward halves)")

  def to_dict(self) -> Dict:
    return dataclasses.asdict(self)


def token_stream(flat_ids, line_lengths, document_lengths, eod_id: Optional[int]):
  """(ids int32 [N], sentence_ids bool [N]) of a corpus, the original's layout.

  Args:
    flat_ids: ids of all lines, concatenated; line_lengths: tokens per line;
    document_lengths: lines per document; eod_id: appended to each document's last line
      (it shares that line's sentence id, as in the original), or None.
  """
  line_lengths = np.asarray(line_lengths, np.int64)
  sentence_flags = (np.arange(len(line_lengths)) % 2 == 0)
  if eod_id is None or len(document_lengths) == 0:
    return (np.asarray(flat_ids, np.int32),
            np.repeat(sentence_flags, line_lengths))
  last_lines = np.cumsum(np.asarray(document_lengths, np.int64)) - 1
  token_ends = np.cumsum(line_lengths)
  ids = np.insert(np.asarray(flat_ids, np.int32), token_ends[last_lines], eod_id)
  lengths = line_lengths.copy()
  lengths[last_lines] += 1
  return ids.astype(np.int32), np.repeat(sentence_flags, lengths)


def row_layout(settings: PretrainingSettings) -> List[Tuple[int, bool]]:
  """(stream, reversed) of each of the bsz_per_host rows, where stream s is the s-th of the
  equal slices the token stream is cut into. With bi_data each core's block holds its forward
  streams followed by their reversals, like the original."""
  if not settings.bi_data:
    return [(row, False) for row in range(settings.bsz_per_host)]
  per_core = settings.bsz_per_host // 2 // settings.num_core_per_host
  return [(core * per_core + index, backward) for core in range(settings.num_core_per_host)
          for backward in (False, True) for index in range(per_core)]


def stream_count(settings: PretrainingSettings) -> int:
  """The slices the token stream is cut into (with bi_data the other rows are reversals)."""
  return settings.bsz_per_host // 2 if settings.bi_data else settings.bsz_per_host


def batchify(ids, sentence_ids, settings: PretrainingSettings):
  """Rows [bsz_per_host, L] of the stream laid out by `row_layout`. Returns (rows, sentence
  rows, dropped)."""
  streams = stream_count(settings)
  row_len = len(ids) // streams
  dropped = len(ids) - row_len * streams
  forward_ids = ids[:row_len * streams].reshape(streams, row_len)
  forward_sentences = sentence_ids[:row_len * streams].reshape(streams, row_len)
  layout = row_layout(settings)

  def arrange(forward):
    return np.stack([forward[stream, ::-1] if backward else forward[stream]
                     for stream, backward in layout]).reshape(len(layout), row_len)

  return arrange(forward_ids), arrange(forward_sentences), dropped


def stream_rows(read, length: int, settings: PretrainingSettings,
                boundaries: Optional[BoundaryIndex] = None):
  """The rows of a token stream that is read piece by piece, laid out as `batchify` lays out
  arrays. `read(begin, end)` gives (ids, sentence flags) of positions [begin, end) of the
  stream of `length` tokens; `boundaries` searches its sentence boundaries (a `TokenStream`;
  default: found by reading the whole stream). Returns (rows: StreamRow, dropped)."""
  streams = stream_count(settings)
  row_len = length // streams
  if boundaries is None:
    boundaries = SortedBoundaries.of_flags(read(0, length)[1])
  return ([StreamRow(read, boundaries, stream * row_len, row_len, backward)
           for stream, backward in row_layout(settings)], length - row_len * streams)


def is_backward_row(row: int, settings: PretrainingSettings) -> bool:
  return row_layout(settings)[row][1]


def batch_count(row_len: int, settings: PretrainingSettings) -> int:
  """Batches that rows of row_len tokens hold at most (step t starts at t * row_step)."""
  if settings.objective == "clm":
    return lm_batch_count(row_len, settings.seq_len)
  if row_len < settings.seq_len:
    return 0
  return (row_len - settings.seq_len) // row_step(settings) + 1


def row_step(settings: PretrainingSettings) -> int:
  if settings.objective == "clm":
    return settings.seq_len  # consecutive segments
  return settings.reuse_len or (settings.seq_len - FUNCTIONAL_TOKENS)


class _Window:
  """Positions [begin, end) of a row in memory."""
  __slots__ = ("begin", "end", "ids")

  def __init__(self, read, begin: int, end: int):
    self.begin, self.end = begin, end
    self.ids = read(begin, end)[0]

  def holds(self, begin: int, end: int) -> bool:
    return self.begin <= begin and end <= self.end


class StreamRow:
  """One row of the token stream: positions [offset, offset + length) of the stream, read
  forward or backward (bi_data). Gives ids by slice, and the sentence boundaries (positions
  whose sentence id differs from the previous position's) near any position.

  The stage keeps the positions of its batches in memory (`load`), reads other positions
  through the stream's `read(begin, end) -> (ids, sentence flags)` from disk a few hundred at a
  time (a random B segment: one read), and so never holds a whole row, which can span
  gigabytes. Boundaries come from the stream's sorted index (`BoundaryIndex`): finding the
  nearest one costs the same however far it is (on a long line, it can be the row's end).
  """

  NEARBY = 256  # positions read on each side of a position outside the loaded ones

  def __init__(self, read, boundaries: BoundaryIndex, offset: int, length: int,
               backward: bool = False):
    self.length = length
    self._stream_read, self._index = read, boundaries
    self._offset, self._backward = offset, backward
    self._loaded = self._nearby = _Window(self._read, 0, 0)

  @classmethod
  def in_memory(cls, ids, sentence_ids) -> "StreamRow":
    row = cls(lambda begin, end: (ids[begin:end], sentence_ids[begin:end]),
              SortedBoundaries.of_flags(sentence_ids), 0, len(ids))
    row.load(0, len(ids))
    return row

  def __len__(self) -> int:
    return self.length

  def _read(self, begin: int, end: int):
    """(ids, sentence flags) of row positions [begin, end)."""
    if not self._backward:
      return self._stream_read(self._offset + begin, self._offset + end)
    ids, flags = self._stream_read(self._to_stream(end), self._to_stream(begin))
    return ids[::-1], flags[::-1]

  def _to_stream(self, position: int) -> int:
    """The stream position of a row boundary or slice end: a backward row's boundary at q is
    the forward boundary at length - q."""
    return self._offset + (self.length - position if self._backward else position)

  def load(self, begin: int, end: int) -> None:
    """Keeps positions [begin, end) in memory (nothing to do if they already are)."""
    begin, end = max(begin, 0), min(end, self.length)
    if not self._loaded.holds(begin, end):
      self._loaded = _Window(self._read, begin, end)

  def _window(self, begin: int, end: int) -> _Window:
    """A window holding [begin, end): the loaded one, the last nearby one, or a new nearby
    one around it."""
    for window in (self._loaded, self._nearby):
      if window.holds(begin, end):
        return window
    self._nearby = _Window(self._read, max(begin - self.NEARBY, 0),
                           min(end + self.NEARBY, self.length))
    return self._nearby

  def __getitem__(self, span: slice) -> np.ndarray:
    window = self._window(span.start, span.stop)
    return window.ids[span.start - window.begin:span.stop - window.begin]

  def boundaries_between(self, low: int, high: int) -> List[int]:
    """Boundaries b with low < b < high (a row's boundaries lie in (0, length))."""
    low, high = max(low, 0), min(high, self.length)
    if low + 1 >= high:
      return []
    if not self._backward:
      return [b - self._offset for b in self._index.between(self._to_stream(low),
                                                            self._to_stream(high))]
    found = self._index.between(self._to_stream(high), self._to_stream(low))
    return [self._offset + self.length - b for b in reversed(found)]

  def _forward_at_or_after(self, position: int) -> int:
    """In forward positions of the row: the first boundary >= position, or length."""
    start = self._offset
    return self._index.at_or_after(start + max(position, 1), start + self.length) - start

  def _forward_at_or_before(self, position: int) -> int:
    """In forward positions of the row: the last boundary <= position, or 0."""
    start = self._offset
    return self._index.at_or_before(start + min(position, self.length - 1), start) - start

  def boundary_at_or_after(self, position: int) -> int:
    """The first boundary >= position, or the row's length if there is none."""
    if self._backward:
      return self.length - self._forward_at_or_before(self.length - position)
    return self._forward_at_or_after(position)

  def boundary_at_or_before(self, position: int) -> int:
    """The last boundary <= position, or 0 if there is none."""
    if self._backward:
      return self.length - self._forward_at_or_after(self.length - position)
    return self._forward_at_or_before(position)


def trim_to_total(a_len: int, b_len: int, total: int) -> Tuple[int, int]:
  """The original removes one token at a time from the end of the longer side (B on ties)
  until a_len + b_len <= total; this is its closed form."""
  excess = a_len + b_len - total
  if excess <= 0:
    return a_len, b_len
  if a_len > b_len:
    step = min(excess, a_len - b_len)
    a_len, excess = a_len - step, excess - step
  elif b_len > a_len:
    step = min(excess, b_len - a_len)
    b_len, excess = b_len - step, excess - step
  return a_len - excess // 2, b_len - (excess + 1) // 2


def split_a_and_b(draw: random.Random, row: StreamRow, begin: int, total: int):
  """(a_begin, a_end, b_begin, b_end, label) of the original `_split_a_and_b`, or None.

  Sentence boundaries are the positions where the row's sentence id changes. Label 1: B
  continues A (both end at sentence boundaries); label 0: B is a random span of whole sentences
  from anywhere in the row. The longer side is trimmed from its end until A + B = total. The
  original's loops over tokens become searches over the boundaries.
  """
  data_len = len(row)
  if begin + total >= data_len:
    return None
  cut_points = row.boundaries_between(begin, begin + total)
  if not cut_points or draw.random() < 0.5:
    label = 0
    a_end = draw.choice(cut_points) if cut_points else row.boundary_at_or_after(begin + total)
    b_len = max(1, total - (a_end - begin))
    b_begin = draw.randint(0, data_len - 1 - b_len)
    b_end = b_begin + b_len
    b_begin = row.boundary_at_or_before(b_begin)
    if b_end < data_len - 1:
      b_end = min(row.boundary_at_or_after(b_end), data_len - 1)
  else:
    label = 1
    a_end = draw.choice(cut_points)
    b_begin, b_end = a_end, row.boundary_at_or_after(begin + total)
  a_len, b_len = trim_to_total(a_end - begin, b_end - b_begin, total)
  a_end, b_end = begin + a_len, b_begin + b_len
  if a_end >= data_len or b_end >= data_len:
    return None
  return begin, a_end, b_begin, b_end, label


@dataclasses.dataclass
class StoredExample:
  """The compact form written to TFRecords (see `records.serialize_example`)."""
  input_ids: np.ndarray        # int32 [T]
  segment_ids: np.ndarray      # uint8 [T]
  target_positions: np.ndarray  # int16 [num_predict], -1 = padded slot
  label: int
  ranks: Optional[np.ndarray] = None         # perm: int16 [T], -1 = context
  replacements: Optional[np.ndarray] = None  # mlm: int32 [num_predict], ids shown at targets


class ExampleBuilder:
  """Builds the examples of one token stream, batch after batch."""

  def __init__(self, settings: PretrainingSettings, word_start_table, sep_id: int, cls_id: int,
               rng: Optional[np.random.Generator], mask_id: int = -1, ordinary_ids=None):
    """rng: the random source, or None when `batches` seeds each batch; mask_id and
    ordinary_ids (the ids a random replacement is drawn from) serve mlm."""
    self.settings = settings
    self.word_start_table = np.asarray(word_start_table, bool)
    self.sep_id, self.cls_id = sep_id, cls_id
    if settings.objective == "mlm" and (mask_id < 0 or ordinary_ids is None or
                                        len(ordinary_ids) == 0):
      raise UserInputError("objective mlm needs a <mask> symbol and ordinary ids to draw random "
                           "replacements from")
    self.mask_id, self.ordinary_ids = mask_id, ordinary_ids
    if rng is not None:
      self._draw_from(rng)

  def _draw_from(self, rng: np.random.Generator) -> None:
    self.rng = rng  # permutations, replacements
    self.draw = random.Random(int(rng.integers(2 ** 63)))  # scalar draws: spans, A/B split

  def _select(self, tokens, goal, backward):
    """Targets in reading order (backward rows are flipped to read forward)."""
    if not self.settings.span_prediction:
      return sample_tokens(self.draw, len(tokens), goal)
    if backward:
      tokens = tokens[::-1]
    selected = sample_word_spans(self.draw, self.word_start_table[tokens], goal,
                                 self.settings.mask_alpha, self.settings.mask_beta,
                                 self.settings.max_span_words)
    return selected[::-1] if backward else selected

  def example(self, row_ids: StreamRow, start: int, backward: bool) -> Optional[StoredExample]:
    s = self.settings
    split = split_a_and_b(self.draw, row_ids, start + s.reuse_len,
                          s.seq_len - s.reuse_len - FUNCTIONAL_TOKENS)
    if split is None:
      return None
    a_begin, a_end, b_begin, b_end, label = split
    reuse = row_ids[start:start + s.reuse_len]
    tokens = np.concatenate([reuse, row_ids[a_begin:a_end], [self.sep_id],
                             row_ids[b_begin:b_end], [self.sep_id, self.cls_id]]).astype(np.int32)
    a_part = s.reuse_len + (a_end - a_begin) + 1
    segment_ids = np.full(s.seq_len, 1, np.uint8)
    segment_ids[:a_part] = 0
    segment_ids[-1] = 2
    in_reuse, in_new = s.predictions_per_part
    selected = np.concatenate([self._select(tokens[:s.reuse_len], in_reuse, backward),
                               self._select(tokens[s.reuse_len:], in_new, backward)])
    functional = (tokens == self.sep_id) | (tokens == self.cls_id)
    targets = np.flatnonzero(selected & ~functional)
    target_positions = np.full(s.num_predict, -1, np.int16)
    target_positions[:len(targets)] = targets
    if s.objective == "mlm":
      replacements = np.zeros(s.num_predict, np.int32)
      replacements[:len(targets)] = draw_replacements(self.rng, tokens[targets], self.mask_id,
                                                      self.ordinary_ids)
      return StoredExample(tokens, segment_ids, target_positions, label,
                           replacements=replacements)
    ranks = np.concatenate([
        factorization_ranks(self.rng, selected[:s.reuse_len], functional[:s.reuse_len],
                            s.perm_size) if s.reuse_len else np.zeros([0], np.int32),
        factorization_ranks(self.rng, selected[s.reuse_len:], functional[s.reuse_len:],
                            s.perm_size)])
    return StoredExample(tokens, segment_ids, target_positions, label,
                         ranks=ranks.astype(np.int16))

  def batches(self, rows: List[StreamRow], first: int = 0, stop: Optional[int] = None,
              seed: Optional[Tuple[int, ...]] = None) -> Iterator[list]:
    """Yields batches first, first + 1, ... (lists of bsz_per_host examples) until `stop` or
    until a row runs out (like the original).

    With `seed`, batch t draws from generators seeded with (*seed, t): a range of batches comes
    out the same whichever process builds it, so ranges can be built in parallel.
    """
    s = self.settings
    step = row_step(s)
    stop = min(batch_count(len(rows[0]), s), stop if stop is not None else first + 2 ** 62)
    if first >= stop:
      return
    for row in rows:
      row.load(first * step, (stop - 1) * step + s.seq_len)
    backward = [is_backward_row(row, s) for row in range(len(rows))]
    for batch_index in range(first, stop):
      if seed is not None:
        self._draw_from(np.random.default_rng([*seed, batch_index]))
      batch = []
      for row in range(len(rows)):
        example = self.example(rows[row], batch_index * step, backward[row])
        if example is None:
          return
        batch.append(example)
      yield batch
