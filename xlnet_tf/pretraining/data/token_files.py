"""The token stream of one input file, kept on disk so that no process holds a whole corpus.

The tokenizing workers write one part per document-aligned byte range of the file; the example
workers read any span of the stream by position. A part stores int32 little-endian values
`2 * id + sentence flag`, the flag counted from the part's first line (see
`examples.token_stream`); a reader flips a part's flags when an odd number of lines precede it
in the file, so the sentence ids alternate over the whole file as if it had been read at once.

Beside each part, `<part>.boundaries` holds its sentence boundaries (int64 positions p where the
sentence flag of p differs from that of p - 1): the example builder looks for the boundary
nearest a position, which on a long line may be far away; a search in these sorted arrays
costs the same whatever the distance, where scanning the tokens cost the distance (and a
stage over one 200 KB line, quadratic in the line's length, took minutes).
"""

import abc
import bisect
import dataclasses
import os
from typing import Iterator, List, Sequence, Tuple

import numpy as np

_DTYPE = np.dtype("<i4")
_BOUNDARY_DTYPE = np.dtype("<i8")
_BOUNDARIES_SUFFIX = ".boundaries"


def flag_changes(flags: np.ndarray) -> np.ndarray:
  """Positions p >= 1 of `flags` whose value differs from that of p - 1 (int64, sorted)."""
  flags = np.asarray(flags)
  return (np.flatnonzero(flags[1:] != flags[:-1]) + 1).astype(np.int64)


class BoundaryIndex(abc.ABC):
  """Sorted sentence boundaries, searched without reading the tokens between them.

  Subclasses give `_chunks(low, high, descending)`: the boundaries b with low < b < high as
  sorted arrays, in ascending (or descending) order of position; the searches only take the
  first chunk they need.
  """

  @abc.abstractmethod
  def _chunks(self, low: int, high: int, descending: bool) -> Iterator[np.ndarray]:
    """The boundaries in (low, high), as sorted arrays in the asked order."""

  def between(self, low: int, high: int) -> List[int]:
    """Boundaries b with low < b < high, ascending."""
    chunks = list(self._chunks(low, high, False))
    return np.concatenate(chunks).tolist() if chunks else []

  def at_or_after(self, position: int, end: int) -> int:
    """The first boundary b with position <= b < end, or end if there is none."""
    for chunk in self._chunks(position - 1, end, False):
      if len(chunk):
        return int(chunk[0])
    return end

  def at_or_before(self, position: int, begin: int) -> int:
    """The last boundary b with begin < b <= position, or begin if there is none."""
    for chunk in self._chunks(begin, position + 1, True):
      if len(chunk):
        return int(chunk[-1])
    return begin


class SortedBoundaries(BoundaryIndex):
  """The boundaries of a sequence held in memory."""

  def __init__(self, positions: np.ndarray):
    self.positions = np.asarray(positions, np.int64)

  @classmethod
  def of_flags(cls, flags: np.ndarray) -> "SortedBoundaries":
    return cls(flag_changes(flags))

  def _chunks(self, low, high, descending):
    del descending  # one chunk
    positions = self.positions
    yield positions[np.searchsorted(positions, low, "right"):
                    np.searchsorted(positions, high, "left")]


@dataclasses.dataclass(frozen=True)
class StreamPart:
  path: str
  tokens: int
  lines: int  # the lines the part's tokens come from (their parity sets the next part's flags)


def write_part(path: str, ids: np.ndarray, sentence_ids: np.ndarray, lines: int) -> StreamPart:
  values = np.asarray(ids, np.int64) * 2 + np.asarray(sentence_ids, bool)
  with open(path, "wb") as handle:
    handle.write(values.astype(_DTYPE).tobytes())
  with open(path + _BOUNDARIES_SUFFIX, "wb") as handle:
    handle.write(flag_changes(sentence_ids).astype(_BOUNDARY_DTYPE).tobytes())
  return StreamPart(path, len(values), lines)


class TokenStream(BoundaryIndex):
  """The concatenated parts of one file: `read(begin, end)` -> (ids, sentence flags 0/1), both
  int32, of the positions [begin, end), and the searches of its sentence boundaries (a
  `BoundaryIndex`). Opens the part files lazily; `close` when done."""

  def __init__(self, parts: Sequence[StreamPart]):
    self.parts = list(parts)
    self.starts = np.concatenate([[0], np.cumsum([p.tokens for p in self.parts])]).tolist()
    lines_before = np.concatenate([[0], np.cumsum([p.lines for p in self.parts])])
    self.flips = (lines_before % 2 == 1).tolist()
    self._handles = {}
    self._boundaries = {}  # part -> its boundaries after its first position
    self._starts_sentence = {}  # part -> whether its first position is a boundary

  def __len__(self) -> int:
    return self.starts[-1]

  def _handle(self, part: int) -> int:
    if part not in self._handles:
      self._handles[part] = os.open(self.parts[part].path, os.O_RDONLY)
    return self._handles[part]

  def read(self, begin: int, end: int) -> Tuple[np.ndarray, np.ndarray]:
    if not 0 <= begin <= end <= len(self):
      raise IndexError(f"positions [{begin}, {end}) outside the stream of {len(self)} tokens")
    pieces: List[np.ndarray] = []
    part = bisect.bisect_right(self.starts, begin) - 1
    while begin < end:
      stop = min(end, self.starts[part + 1])
      raw = os.pread(self._handle(part), (stop - begin) * _DTYPE.itemsize,
                     (begin - self.starts[part]) * _DTYPE.itemsize)
      values = np.frombuffer(raw, _DTYPE)
      pieces.append(values ^ 1 if self.flips[part] else values)
      begin, part = stop, part + 1
    values = (pieces[0] if len(pieces) == 1 else np.concatenate(pieces)) if pieces else \
        np.zeros([0], _DTYPE)
    return values >> 1, values & 1

  def _part_boundaries(self, part: int) -> np.ndarray:
    """The part's boundaries after its first position, in part positions (memory-mapped)."""
    if part not in self._boundaries:
      path = self.parts[part].path + _BOUNDARIES_SUFFIX
      self._boundaries[part] = (np.memmap(path, _BOUNDARY_DTYPE, mode="r")
                                if os.path.getsize(path) else np.zeros([0], _BOUNDARY_DTYPE))
    return self._boundaries[part]

  def _starts_a_sentence(self, part: int) -> bool:
    """Whether the part's first position is a boundary: its flag differs from the last one
    of the parts before it."""
    if part not in self._starts_sentence:
      start = self.starts[part]
      _, flags = self.read(start - 1, start + 1) if 0 < start < len(self) else (None, [0])
      self._starts_sentence[part] = bool(len(flags) == 2 and flags[0] != flags[1])
    return self._starts_sentence[part]

  def _chunks(self, low, high, descending):
    """Part by part from the one holding `low + 1` up (descending: `high - 1` down); each
    searched in part positions, so that a query costs the log of a part's size."""
    if low + 1 >= high or not self.parts:
      return
    last_part = len(self.parts) - 1
    first = min(max(bisect.bisect_right(self.starts, low + 1) - 1, 0), last_part)
    last = min(max(bisect.bisect_right(self.starts, high - 1) - 1, 0), last_part)
    for part in (range(last, first - 1, -1) if descending else range(first, last + 1)):
      if self.parts[part].tokens == 0:
        continue
      start = self.starts[part]
      inside = self._part_boundaries(part)
      chunk = inside[np.searchsorted(inside, low - start, "right"):
                     np.searchsorted(inside, high - start, "left")] + start
      if low < start < high and self._starts_a_sentence(part):
        chunk = np.concatenate([[start], chunk])
      yield chunk

  def close(self) -> None:
    for handle in self._handles.values():
      os.close(handle)
    self._handles = {}
    self._boundaries = {}

  def __enter__(self) -> "TokenStream":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
