"""Left-to-right LM data in the Transformer-XL layout (objective "clm").

The corpus stream (documents closed by <eod>) is cut into `bsz_per_host` parallel rows, and
each row into consecutive segments of seq_len tokens: step t of row r is
`row[t * seq_len : (t + 1) * seq_len]`, so the memory of step t is exactly the context of step
t + 1. Every position predicts the next token; a stored segment holds seq_len + 1 ids (the
inputs and, shifted by one, the targets).

Worked example, seq_len 3, one row [a b c d e f g h]: step 0 stores [a b c d] (inputs a b c,
targets b c d), step 1 [d e f g] (inputs d e f, targets e f g); h is left over.
"""

from typing import Iterator, Optional

import numpy as np


def lm_batch_count(row_len: int, seq_len: int) -> int:
  """Segments (batches) that rows of row_len tokens hold: each needs seq_len + 1 tokens."""
  return max(row_len - 1, 0) // seq_len


def lm_segment_batches(rows, seq_len: int, first: int = 0,
                       stop: Optional[int] = None) -> Iterator[np.ndarray]:
  """Yields [R, seq_len + 1] int32 blocks of `rows` (R sliceable rows of equal length: an
  array [R, N] or the stage's StreamRows), steps [first, stop)."""
  steps = lm_batch_count(len(rows[0]), seq_len)
  stop = steps if stop is None else min(stop, steps)
  for step in range(first, stop):
    begin = step * seq_len
    yield np.stack([np.asarray(row[begin:begin + seq_len + 1], np.int32) for row in rows])


def split_lm_segment(stored):
  """[..., seq_len + 1] stored ids -> (inputs, targets), each [..., seq_len]."""
  return stored[..., :-1], stored[..., 1:]
