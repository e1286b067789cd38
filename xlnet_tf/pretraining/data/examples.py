"""Pretraining examples: rows of the token stream (`rows`) cut into `[reuse] A <sep> B <sep>
<cls>`.

As the original create_tfrecords: step t of row r starts at t * reuse_len, so the memory of
step t is the context of step t + 1. Each example is stored compactly: token ids, segment ids,
target positions, the A/B label, and the objective's own features (`objectives`: the
factorization ranks for perm, the ids shown at the targets for mlm).

The prediction targets are the same for every A/B objective: whole-word spans (the paper's
span-based prediction) or, with `span_prediction=False`, single tokens (Table 6's ablation).
"""

import dataclasses
import random
from typing import Iterator, List, Optional, Tuple

import numpy as np

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.objectives import StoredFeature
from xlnet_tf.pretraining.data.rows import StreamRow, batch_count, is_backward_row, row_step
from xlnet_tf.pretraining.data.settings import FUNCTIONAL_TOKENS, PretrainingDataConfig
from xlnet_tf.pretraining.data.spans import sample_tokens, sample_word_spans


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
  # The objective's own features (Objective.stored_extras), e.g. perm's ranks int16 [T].
  extras: Tuple[Tuple[StoredFeature, np.ndarray], ...] = ()

  def feature(self, name: str) -> np.ndarray:
    """The stored values called `name` (input_ids, ..., or one of the extras, e.g. ranks)."""
    extras = {feature.name: values for feature, values in self.extras}
    return extras[name] if name in extras else getattr(self, name)


class ExampleBuilder:
  """Builds the examples of one token stream, batch after batch."""

  def __init__(self, settings: PretrainingDataConfig, word_start_table, sep_id: int, cls_id: int,
               rng: Optional[np.random.Generator], mask_id: int = -1, ordinary_ids=None):
    """rng: the random source, or None when `batches` seeds each batch; mask_id and
    ordinary_ids (the ids a random replacement is drawn from) serve objectives that need a
    <mask> (mlm)."""
    self.settings = settings
    self.word_start_table = np.asarray(word_start_table, bool)
    self.sep_id, self.cls_id = sep_id, cls_id
    self.objective = settings.lm_objective
    if self.objective.needs_mask_id and (mask_id < 0 or ordinary_ids is None or
                                         len(ordinary_ids) == 0):
      raise UserInputError(f"objective {self.objective.name} needs a <mask> symbol and ordinary "
                           "ids to draw random replacements from")
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
                                 self.settings.max_span_words, self.settings.max_word_pieces)
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
    extras = self.objective.stored_extras(self, tokens, selected, functional, targets)
    return StoredExample(tokens, segment_ids, target_positions, label, extras)

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
