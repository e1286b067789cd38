"""Filling blanks in a text and scoring spans with a pretrained XLNetPretrainer, in any order.

XLNet's case (paper, Section 2.6): for the targets [New, York] of "New York is a city", a
denoising (masked) LM models log p(New | is a city) + log p(York | is a city), the permutation
LM log p(New | is a city) + log p(York | New, is a city): the blanks depend on each other.
`span_log_prob` is that probability, and `fill` predicts blanks one after another in a chosen
factorization order, each from the context and the blanks filled before it.

By the pretrainer's objective (`XLNetPretrainer.objective`):
- perm: the factorization order puts every context position first and the blanks last, in
  `order`; the query stream at a blank predicts it (infilling_steps.perm_mask_for_ranks). With
  a fixed order, `span_log_prob` is the exact chain rule in ONE forward pass: the two streams
  let every blank be predicted from exactly the blanks before it in the order (its query row)
  while the content rows of those blanks are visible to the later ones, all at once.
  `fill` computes the context's states once and reuses them at every step (`use_cache`).
- mlm: `<mask>` (mask_id) at the blanks; the content stream predicts. `independent` fills all
  in one pass; the other orders fill one blank per pass and predict the rest again with it
  in place (mask-predict). `span_log_prob` is the sum of each blank's log-probability given
  the context with every blank masked: what a masked LM's objective defines, NOT a joint
  probability of the span (whatever the order).
- clm: a left-to-right LM sees the left context only: order `left_to_right`, and
  `span_log_prob` is log p(span | the text before each blank), not the text after it.

Orders: left_to_right, right_to_left, random (seeded, per row), confidence (each step fills the
blank whose most likely token is most probable, given the context and the blanks filled so
far; `span_log_prob` picks the same way and conditions on the true tokens), independent (every
blank from the context alone: the masked LM's factorization, J in the paper).

Shapes: B batch, T length, P blanks of the row with the most, V vocabulary.
"""

import dataclasses
import re
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf import objectives
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.inference.infilling_steps import (UNFILLED_RANK, CachedPermSteps,
                                                RecomputedPermSteps, WholeTextSteps)
from xlnet_tf.inference.sampling import Sampling, check_sampling, seed_or_fresh, step_seed
from xlnet_tf.modeling.inputs import check_token_id, checked_token_ids
from xlnet_tf.text.packing import pack_pair
from xlnet_tf.text.tokenizer import STANDARD_SPECIAL_IDS
from xlnet_tf.utils.errors import require

ORDERS = ("left_to_right", "right_to_left", "random", "confidence", "independent")
# The defaults of mask_id, cls_id and sep_id: the original vocabulary's (a tokenizer's own:
# special_id_arguments).
DEFAULT_MASK_ID = STANDARD_SPECIAL_IDS.mask
DEFAULT_CLS_ID = STANDARD_SPECIAL_IDS.cls
DEFAULT_SEP_ID = STANDARD_SPECIAL_IDS.sep


def fill(pretrainer, input_ids, fill_mask, *, input_mask=None, segment_ids=None,
         order: str = "left_to_right", temperature: float = 0.0, top_k: int = 0,
         top_p: float = 1.0, seed: Optional[int] = None, use_cache: bool = True,
         mask_id: int = DEFAULT_MASK_ID, cls_id: int = DEFAULT_CLS_ID,
         sep_id: int = DEFAULT_SEP_ID):
  """Fills the blanks of each text, one after another in a factorization order.

  Args:
    pretrainer: an XLNetPretrainer (checkpoints.load_pretrained_head), objective perm, mlm or
      clm, loaded with bi_data=False.
    input_ids: int [B, T]; the ids under the blanks are ignored.
    fill_mask: [B, T], 1 = a blank to fill. Every row needs a blank and a context token; no
      blank on padding, <cls> or <sep>.
    input_mask: [B, T], 1 = real token, 0 = padding (default: all real).
    segment_ids: int [B, T] or None, as the model was trained with.
    order: one of ORDERS (module docstring).
    temperature: 0 = greedy (argmax); > 0 samples from softmax(logits / temperature), as
      generation.generate samples (inference.sampling).
    top_k: sample among the k most likely tokens only (0: no limit).
    top_p: then among the most likely tokens whose probabilities sum to at least top_p
      (1: no limit).
    seed: makes the draws (and the `random` order) reproducible; None: a fresh seed.
    use_cache: perm only: reuse the context's states between steps (False: the whole backbone
      every step; the same fills).
    mask_id: the id hidden blanks hold (<mask>: what a masked LM was trained to read).
    cls_id: the <cls> id, which no blank may cover.
    sep_id: the <sep> id, which no blank may cover. The ids default to the original
      vocabulary's (text.tokenizer.STANDARD_SPECIAL_IDS); `special_id_arguments(tokenizer)`
      gives a tokenizer's.

  Returns:
    An int32 tensor [B, T]: input_ids with every position where fill_mask == 1 predicted.

  Raises:
    UserInputError: (a ValueError) naming the argument, for bad input.
  """
  check_sampling(temperature, top_k, top_p, seed, "fill")
  text = _checked_text(pretrainer, input_ids, fill_mask, input_mask, segment_ids, order,
                       mask_id, (cls_id, sep_id), "fill")
  require(isinstance(use_cache, bool), "fill: use_cache", "a bool", use_cache)
  seed = seed_or_fresh(seed)
  sample = _Sampler(temperature, top_k, top_p, seed)
  filled, _ = _run_order(_steps_for(pretrainer, text, use_cache), text, order, sample, seed)
  return tf.constant(filled)


def span_log_prob(pretrainer, input_ids, fill_mask, *, input_mask=None, segment_ids=None,
                  order: str = "left_to_right", seed: Optional[int] = None,
                  mask_id: int = DEFAULT_MASK_ID, cls_id: int = DEFAULT_CLS_ID,
                  sep_id: int = DEFAULT_SEP_ID):
  """The log-probability of the tokens under fill_mask given the rest, in nats.

  Exact for perm, in one pass with a fixed order; per blank for mlm; given the left context
  for clm (module docstring).

  Args:
    pretrainer: an XLNetPretrainer, as `fill` takes it.
    input_ids: int [B, T], the true tokens under the blanks included.
    fill_mask: [B, T], 1 = a token scored (a blank), as `fill` takes it.
    input_mask: [B, T], 1 = real token, 0 = padding (default: all real).
    segment_ids: int [B, T] or None, as the model was trained with.
    order: one of ORDERS (module docstring): the factorization order of the blanks.
    seed: draws the `random` order (None: 0).
    mask_id: the id the blanks hold for mlm (<mask>).
    cls_id: the <cls> id, which no blank may cover.
    sep_id: the <sep> id, which no blank may cover.

  Returns:
    A float32 tensor [B]: log p(the tokens under fill_mask | the rest) of each row.

  Raises:
    UserInputError: (a ValueError) naming the argument, for bad input.
  """
  text = _checked_text(pretrainer, input_ids, fill_mask, input_mask, segment_ids, order,
                       mask_id, (cls_id, sep_id), "span_log_prob")
  seed = 0 if seed is None else seed
  objective = pretrainer.lm_objective
  if objective.stream == objectives.QUERY_STREAM and order == "confidence":
    _, log_probs = _run_order(_steps_for(pretrainer, text, use_cache=True), text, order,
                              _Sampler.true_tokens(text), seed)
    return tf.constant(log_probs.sum(axis=1), tf.float32)
  if objective.stream == objectives.QUERY_STREAM:
    ranks = np.where(text.fill_mask, 1 + _blank_ranks(text, order, seed), 0)
  else:  # mlm: every blank masked, all at once; clm: left to right, one pass either way
    ranks = np.where(text.fill_mask, UNFILLED_RANK, 0)
  steps = _steps_for(pretrainer, text, use_cache=False)
  logits = steps(text.true_ids if not objective.needs_mask_id else text.masked_ids, ranks,
                 text.positions, text.valid, None, None)
  log_probs = _at(_log_softmax(logits),
                  np.take_along_axis(text.true_ids, text.positions, axis=1))
  return tf.constant((log_probs * text.valid).sum(axis=1), tf.float32)


def score_candidates(pretrainer, tokenizer, text_with_blank: str, candidates: Sequence[str], *,
                     blank: str = "___", per_piece: bool = False,
                     order: str = "left_to_right") -> List[Tuple[str, float]]:
  """Ranks the candidate completions of a text's one blank by span_log_prob, best first.

  A zero-shot cloze / multiple-choice scorer; the candidates run as one batch.

  Args:
    pretrainer: an XLNetPretrainer, as `fill` takes it.
    tokenizer: the XLNetTokenizer the pretrainer reads (its special ids are used).
    text_with_blank: a text holding `blank` exactly once.
    candidates: one or more strings to put in the blank, each of at least one piece.
    blank: how the blank is written in `text_with_blank`.
    per_piece: divide a candidate's log probability by its number of pieces (else longer
      candidates pay for every piece).
    order: the factorization order of the candidate's pieces (ORDERS).

  Returns:
    [(candidate, score)], the highest score first.

  Raises:
    UserInputError: (a ValueError) for a text without exactly one blank, no candidates, or an
      empty one.
  """
  require(text_with_blank.count(blank) == 1, "score_candidates: text_with_blank",
          f"a text with exactly one blank {blank!r}", repr(text_with_blank))
  require(len(candidates) > 0, "score_candidates: candidates", "one or more strings",
          candidates)
  before, after = (tokenizer.encode(part) for part in text_with_blank.split(blank))
  pieces = [tokenizer.encode(candidate) for candidate in candidates]
  empty = [candidate for candidate, ids in zip(candidates, pieces) if not ids]
  require(not empty, "score_candidates: candidates", "texts with at least one piece", empty)
  batch = packed_with_blanks(
      tokenizer, [[before, len(ids), after] for ids in pieces], fills=pieces)
  scores = span_log_prob(pretrainer, **batch.inputs(), order=order,
                         **special_id_arguments(tokenizer)).numpy()
  if per_piece:
    scores = scores / batch.fill_mask.sum(axis=1)
  ranked = sorted(zip(candidates, scores.tolist()), key=lambda pair: -pair[1])
  return [(candidate, float(score)) for candidate, score in ranked]


@dataclasses.dataclass
class BlankBatch:
  """Texts with blanks, packed as the pretraining examples are (`A <sep> <cls>`, segment ids
  0 ... 0 2) and left-padded to one length: what `fill` and `span_log_prob` take."""
  input_ids: np.ndarray
  segment_ids: np.ndarray
  input_mask: np.ndarray
  fill_mask: np.ndarray

  def inputs(self):
    return dataclasses.asdict(self)


def packed_with_blanks(tokenizer, texts: Sequence[Sequence], fills=None,
                       length: int = 0) -> BlankBatch:
  """Each text is a list of parts: token-id lists (text) and ints (a blank of that many
  pieces); `fills` (one id list per text, or None) gives the blanks' ids (else <mask>). Rows
  are left-padded to the longest, or to `length` if longer (batches of one shape)."""
  special = tokenizer.special_ids
  rows = []
  for index, parts in enumerate(texts):
    ids, blank, given = [], [], list(fills[index]) if fills is not None else []
    for part in parts:
      if isinstance(part, int):
        ids += [given.pop(0) if given else special.mask for _ in range(part)]
        blank += [1] * part
      else:
        ids += list(part)
        blank += [0] * len(part)
    packed, segments = pack_pair(ids, None, special.sep, special.cls)
    rows.append((packed, segments, blank + [0, 0]))
  length = max([length] + [len(packed) for packed, _, _ in rows])
  batch = BlankBatch(*(np.zeros([len(rows), length], dtype)
                       for dtype in (np.int32, np.int32, np.float32, np.float32)))
  batch.input_ids[:] = max(special.pad, 0)
  for row, (packed, segments, blank) in enumerate(rows):
    start = length - len(packed)  # left padding, as the fine-tuning features
    batch.input_ids[row, start:], batch.segment_ids[row, start:] = packed, segments
    batch.input_mask[row, start:], batch.fill_mask[row, start:] = 1, blank
  return batch


def text_with_blanks(tokenizer, text: str, blank_pieces: int = 1,
                     markers: Sequence[str] = ("<mask>", "___")) -> list:
  """The parts of a text for `packed_with_blanks`: each marker is a blank of `blank_pieces`
  pieces, the text between markers its pieces."""
  pattern = "(" + "|".join(re.escape(marker) for marker in markers) + ")"
  return [blank_pieces if part in markers else tokenizer.encode(part)
          for part in re.split(pattern, text) if part.strip()]


def filled_texts(tokenizer, filled, batch: BlankBatch, brackets=("[", "]")) -> List[str]:
  """The texts of `filled` ids [B, T] (no padding, <sep>, <cls>), each run of filled blanks
  in brackets."""
  special = tokenizer.special_ids
  texts = []
  for ids, real, blank in zip(np.asarray(filled), batch.input_mask, batch.fill_mask):
    keep = (real > 0) & ~np.isin(ids, [special.sep, special.cls])
    ids, blank = ids[keep].tolist(), (blank[keep] > 0).tolist()
    text, start = "", 0
    for end in range(1, len(ids) + 1):
      if end < len(ids) and blank[end] == blank[start]:
        continue
      run = tokenizer.decode(ids[start:end])
      if blank[start]:
        run = brackets[0] + run + brackets[1]
      # A run that starts a word gets the space its decoding dropped.
      text += (" " if text and tokenizer.word_start[ids[start]] else "") + run
      start = end
    texts.append(text)
  return texts


def special_id_arguments(tokenizer):
  """mask_id, cls_id, sep_id of `tokenizer`'s vocabulary: keyword arguments of fill and
  span_log_prob."""
  special = tokenizer.special_ids
  return dict(mask_id=special.mask, cls_id=special.cls, sep_id=special.sep)


# ---- the text and its blanks -------------------------------------------------------------------

@dataclasses.dataclass
class _Text:
  """A checked batch: ids as given (true_ids) and with mask_id at the blanks (masked_ids);
  the blanks' positions [B, P] in text order, valid [B, P] (0 pads rows with fewer)."""
  true_ids: np.ndarray
  masked_ids: np.ndarray
  fill_mask: np.ndarray
  input_mask: np.ndarray
  segment_ids: Optional[np.ndarray]
  positions: np.ndarray
  valid: np.ndarray

  @property
  def batch(self) -> int:
    return self.true_ids.shape[0]

  @property
  def length(self) -> int:
    return self.true_ids.shape[1]

  @property
  def counts(self) -> np.ndarray:
    return self.valid.sum(axis=1).astype(np.int64)


def _blank_positions(fill_mask):
  counts = fill_mask.sum(axis=1).astype(np.int64)
  slots = int(counts.max())
  positions = np.zeros([fill_mask.shape[0], slots], np.int64)
  valid = np.zeros([fill_mask.shape[0], slots], np.float32)
  for row, count in enumerate(counts):
    positions[row, :count] = np.flatnonzero(fill_mask[row])
    valid[row, :count] = 1
  return positions, valid


def _blank_ranks(text: _Text, order: str, seed: int):
  """int [B, T]: each blank's place (0-based) in a fixed order; independent: all 0."""
  places = np.zeros([text.batch, text.length], np.int64)
  rng = np.random.default_rng(seed)
  for row, count in enumerate(text.counts):
    sequence = np.arange(count)
    if order == "right_to_left":
      sequence = sequence[::-1]
    elif order == "random":
      sequence = rng.permutation(count)
    if order != "independent":  # independent: every blank in place 0
      places[row, text.positions[row, :count]] = np.argsort(sequence)
  return places


# ---- filling ---------------------------------------------------------------------------------

class _Sampler:
  """Chooses the token of each query row: Sampling.choose (greedy or sampled), or the true
  tokens (scoring in the confidence order)."""

  def __init__(self, temperature, top_k, top_p, seed, true_ids=None):
    self.sampling = Sampling(temperature, top_k, top_p)
    self.seed, self.true_ids = seed, true_ids

  @classmethod
  def true_tokens(cls, text):
    return cls(0.0, 0, 1.0, 0, true_ids=text.true_ids)

  def __call__(self, logits, positions, step):
    """int32 [B, Q] tokens for logits [B, Q, V] at positions [B, Q]."""
    if self.true_ids is not None:
      return np.take_along_axis(self.true_ids, positions, axis=1).astype(np.int32)
    batch, queries, vocabulary = logits.shape
    tokens = self.sampling.choose(logits.reshape(batch * queries, vocabulary),
                                  step_seed(self.seed, step))
    return tokens.numpy().reshape(batch, queries)


def _steps_for(pretrainer, text: _Text, use_cache: bool):
  if pretrainer.lm_objective.stream != objectives.QUERY_STREAM:
    return WholeTextSteps(pretrainer, text)
  return (CachedPermSteps if use_cache else RecomputedPermSteps)(pretrainer, text)


def _run_order(steps, text: _Text, order: str, choose, seed: int):
  """(filled ids [B, T], log-probabilities [B, P] of the chosen tokens, by blank slot).

  One call of `steps` (infilling_steps) per blank (independent: one for all): its query rows
  are the next blank of a fixed order, or every blank not yet filled (confidence,
  independent); `choose(logits, positions, step)` picks their tokens."""
  ids = text.masked_ids.copy()
  ranks = np.where(text.fill_mask, UNFILLED_RANK, 0)
  log_probs = np.zeros(text.valid.shape, np.float32)
  filled = np.zeros(text.valid.shape, bool)
  all_at_once = order in ("confidence", "independent")
  if not all_at_once:
    place = np.take_along_axis(_blank_ranks(text, order, seed), text.positions, axis=1)
    place = np.where(text.valid > 0, place, text.valid.shape[1])
  rows = np.arange(text.batch)
  new_positions, has_new = np.zeros(text.batch, np.int64), np.zeros(text.batch, np.float32)
  for step in range(1 if order == "independent" else text.valid.shape[1]):
    slots = (np.tile(np.arange(text.valid.shape[1]), [text.batch, 1]) if all_at_once
             else np.argmax(place == step, axis=1)[:, None])  # [B, Q]
    open_slots = (np.take_along_axis(text.valid > 0, slots, axis=1)
                  & ~np.take_along_axis(filled, slots, axis=1))
    query_positions = np.take_along_axis(text.positions, slots, axis=1)
    logits = steps(ids, ranks, query_positions, open_slots.astype(np.float32), new_positions,
                   has_new)
    tokens = choose(logits, query_positions, step)
    log_softmax = _log_softmax(logits)
    chosen_log_probs = _at(log_softmax, tokens)
    if order == "independent":
      pick = open_slots
    else:  # one slot per row: the fixed order's, or the most confident open one
      confidence = np.where(open_slots, log_softmax.max(axis=-1), -np.inf)
      pick = np.zeros_like(open_slots)
      pick[rows, np.argmax(confidence, axis=1)] = True
      pick &= open_slots
    for row, query in zip(*np.nonzero(pick)):
      slot, position = slots[row, query], query_positions[row, query]
      ids[row, position] = tokens[row, query]
      ranks[row, position] = step + 1
      log_probs[row, slot] = chosen_log_probs[row, query]
      filled[row, slot] = True
    has_new = pick.any(axis=1).astype(np.float32)
    new_positions = np.where(has_new > 0, (query_positions * pick).sum(axis=1), 0)
  return ids, log_probs


def _log_softmax(logits):
  """float32 [B, Q, V] log-probabilities of logits [B, Q, V]."""
  return tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()


def _at(values, tokens):
  """values [B, Q, V] at tokens [B, Q]: [B, Q]."""
  return np.take_along_axis(values, tokens[..., None].astype(np.int64), axis=-1)[..., 0]


# ---- input checks ----------------------------------------------------------------------------

def _checked_text(pretrainer, input_ids, fill_mask, input_mask, segment_ids, order, mask_id,
                  functional_ids, caller) -> _Text:
  require(isinstance(pretrainer, XLNetPretrainer), f"{caller}: pretrainer",
          "an XLNetPretrainer (checkpoints.load_pretrained_head)", type(pretrainer).__name__)
  config = pretrainer.backbone.config
  require(not config.bi_data, f"{caller}: pretrainer", "loaded with bi_data=False (bi_data "
          "reads half of a batch backwards)", "config.bi_data=True")
  require(order in ORDERS, f"{caller}: order", "one of " + ", ".join(ORDERS), repr(order))
  objective = pretrainer.lm_objective
  if objective.predicts_next_token and objective.stream != objectives.QUERY_STREAM:
    require(order == "left_to_right", f"{caller}: order", "'left_to_right' for a "
            f"{objective.name} model (it reads the left context only)", repr(order))
  ids = checked_token_ids(input_ids, config.n_token, f"{caller}: input_ids")
  shape = ids.shape
  blanks = _checked_01(fill_mask, shape, f"{caller}: fill_mask")
  real = (np.ones(shape, np.float32) if input_mask is None
          else _checked_01(input_mask, shape, f"{caller}: input_mask"))
  segments = None
  if segment_ids is not None:
    segments = np.asarray(segment_ids)
    require(np.issubdtype(segments.dtype, np.integer) and segments.shape == shape,
            f"{caller}: segment_ids", f"integers of shape [B, T] = {list(shape)}",
            f"{segments.dtype} of shape {list(segments.shape)}")
  _check_blank_places(blanks, real, ids, functional_ids, objective, caller)
  check_token_id(mask_id, config.n_token, f"{caller}: mask_id")
  bool_blanks = blanks.astype(bool)
  positions, valid = _blank_positions(blanks)
  return _Text(true_ids=ids, masked_ids=np.where(bool_blanks, mask_id, ids).astype(np.int32),
               fill_mask=bool_blanks, input_mask=real, segment_ids=segments,
               positions=positions, valid=valid)


def _checked_01(values, shape, argument):
  array = np.asarray(values.numpy() if isinstance(values, tf.Tensor) else values)
  require(array.shape == shape, argument, f"of shape [B, T] = {list(shape)}",
          f"shape {list(array.shape)}")
  require(np.isin(array, (0, 1)).all(), argument, "0 or 1", f"values {np.unique(array)[:5]}")
  return array.astype(np.float32)


def _rows(flags) -> list:
  return np.flatnonzero(flags).tolist()


def _check_blank_places(blanks, real, ids, functional_ids, objective, caller):
  argument = f"{caller}: fill_mask"
  counts, context = blanks.sum(axis=1), (real * (1 - blanks)).sum(axis=1)
  require((counts > 0).all(), argument, "a blank (1) in every row",
          f"rows {_rows(counts == 0)} without one")
  require((context > 0).all(), argument, "a context token in every row (not all blanks)",
          f"rows {_rows(context == 0)} all blanks")
  on_padding = (blanks > 0) & (real == 0)
  require(not on_padding.any(), argument, "0 on padding (input_mask 0)",
          f"blanks on padding at [row, position] {np.argwhere(on_padding)[:3].tolist()}")
  functional = (blanks > 0) & np.isin(ids, functional_ids)
  require(not functional.any(), argument, f"0 at <cls>/<sep> (ids {list(functional_ids)})",
          f"blanks on them at [row, position] {np.argwhere(functional)[:3].tolist()}")
  if objective.predicts_next_token and objective.stream != objectives.QUERY_STREAM:
    first_real = np.argmax(real > 0, axis=1)
    at_start = blanks[np.arange(len(blanks)), first_real] > 0
    require(not at_start.any(), argument, f"no blank on a row's first token for a "
            f"{objective.name} model (it predicts a token from the tokens before it)",
            f"rows {_rows(at_start)}")
