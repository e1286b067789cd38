"""The rows of a token stream: the corpus as the original's one stream (`token_stream`), cut
into `bsz_per_host` parallel rows (with bi_data, half of them reversed, per core:
`row_layout`), step t of a row starting at t * `row_step`; `StreamRow` reads a row from disk a
window at a time, so no process holds a whole row.
"""

from typing import List, Optional, Tuple

import numpy as np

from xlnet_tf.pretraining.data.settings import FUNCTIONAL_TOKENS, PretrainingDataConfig
from xlnet_tf.pretraining.data.token_files import BoundaryIndex, SortedBoundaries


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


def row_layout(settings: PretrainingDataConfig) -> List[Tuple[int, bool]]:
  """(stream, reversed) of each of the bsz_per_host rows, where stream s is the s-th of the
  equal slices the token stream is cut into. With bi_data each core's block holds its forward
  streams followed by their reversals, like the original."""
  if not settings.bi_data:
    return [(row, False) for row in range(settings.bsz_per_host)]
  per_core = settings.bsz_per_host // 2 // settings.num_core_per_host
  return [(core * per_core + index, backward) for core in range(settings.num_core_per_host)
          for backward in (False, True) for index in range(per_core)]


def stream_count(settings: PretrainingDataConfig) -> int:
  """The slices the token stream is cut into (with bi_data the other rows are reversals)."""
  return settings.bsz_per_host // 2 if settings.bi_data else settings.bsz_per_host


def batchify(ids, sentence_ids, settings: PretrainingDataConfig):
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


def stream_rows(read, length: int, settings: PretrainingDataConfig,
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


def is_backward_row(row: int, settings: PretrainingDataConfig) -> bool:
  return row_layout(settings)[row][1]


def row_step(settings: PretrainingDataConfig) -> int:
  """Tokens from the start of one batch's example in a row to the next batch's."""
  if settings.lm_objective.consecutive_segments:
    return settings.seq_len
  return settings.reuse_len or (settings.seq_len - FUNCTIONAL_TOKENS)


def example_span(settings: PretrainingDataConfig) -> int:
  """Tokens of its row an example reads (consecutive segments: and the last target after)."""
  return settings.seq_len + 1 if settings.lm_objective.consecutive_segments else settings.seq_len


def batch_count(row_len: int, settings: PretrainingDataConfig) -> int:
  """Batches that rows of row_len tokens hold at most (step t starts at t * row_step)."""
  span = example_span(settings)
  if row_len < span:
    return 0
  return (row_len - span) // row_step(settings) + 1


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

