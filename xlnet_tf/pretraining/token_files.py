"""The token stream of one input file, kept on disk so that no process holds a whole corpus.

The tokenizing workers write one part per document-aligned byte range of the file; the example
workers read any span of the stream by position. A part stores int32 little-endian values
`2 * id + sentence flag`, the flag counted from the part's first line (see
`examples.token_stream`); a reader flips a part's flags when an odd number of lines precede it
in the file, so the sentence ids alternate over the whole file as if it had been read at once.
"""

import bisect
import dataclasses
import os
from typing import List, Sequence, Tuple

import numpy as np

_DTYPE = np.dtype("<i4")


@dataclasses.dataclass(frozen=True)
class StreamPart:
  path: str
  tokens: int
  lines: int  # the lines the part's tokens come from (their parity sets the next part's flags)


def write_part(path: str, ids: np.ndarray, sentence_ids: np.ndarray, lines: int) -> StreamPart:
  values = np.asarray(ids, np.int64) * 2 + np.asarray(sentence_ids, bool)
  with open(path, "wb") as handle:
    handle.write(values.astype(_DTYPE).tobytes())
  return StreamPart(path, len(values), lines)


class TokenStream:
  """The concatenated parts of one file: `read(begin, end)` -> (ids, sentence flags 0/1), both
  int32, of the positions [begin, end). Opens the part files lazily; `close` when done."""

  def __init__(self, parts: Sequence[StreamPart]):
    self.parts = list(parts)
    self.starts = np.concatenate([[0], np.cumsum([p.tokens for p in self.parts])]).tolist()
    lines_before = np.concatenate([[0], np.cumsum([p.lines for p in self.parts])])
    self.flips = (lines_before % 2 == 1).tolist()
    self._handles = {}

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

  def close(self) -> None:
    for handle in self._handles.values():
      os.close(handle)
    self._handles = {}

  def __enter__(self) -> "TokenStream":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
