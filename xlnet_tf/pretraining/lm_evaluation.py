"""Long-context evaluation of a left-to-right LM (objective clm), as Transformer-XL evaluates.

A held-out token stream is read segment by segment; each segment attends to the memory of the
previous ones (each layer's input, the last `mem_len` positions), so a prediction sees up to
mem_len + its position in the segment previous tokens. Relative positions let mem_len (and
tgt_len, clamp_len) differ from training: perplexity against memory length is the paper's
Table 6/8 question (per-token time against a vanilla window, its Table 7, is a study:
studies/evaluation_speed.py).

Shapes: B streams, T segment length (tgt_len), M memory length, D d_model, V vocabulary.
"""

import dataclasses
import math
import time
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.pretrainer import XLNetPretrainer, lm_loss_sum
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.memory import RecurrenceMemory
from xlnet_tf.pretraining.data.rows import token_stream


@dataclasses.dataclass
class LMEvaluation:
  tgt_len: int
  mem_len: int
  loss_sum: float     # nats over every predicted token
  tokens: int
  characters: Optional[int]
  seconds: float

  @property
  def loss(self) -> float:
    return self.loss_sum / max(self.tokens, 1)

  @property
  def perplexity(self) -> float:
    return math.exp(min(self.loss, 50.0))

  @property
  def bits_per_character(self) -> Optional[float]:
    if not self.characters:
      return None
    return self.loss_sum / math.log(2.0) / self.characters

  def as_dict(self) -> Dict[str, float]:
    return {"tgt_len": self.tgt_len, "mem_len": self.mem_len, "loss": self.loss,
            "perplexity": self.perplexity, "bits_per_character": self.bits_per_character,
            "tokens": self.tokens, "characters": self.characters, "seconds": self.seconds}


def with_memory(pretrainer: XLNetPretrainer, mem_len: int,
                clamp_len: Optional[int] = None) -> XLNetPretrainer:
  """A copy of a left-to-right LM that keeps `mem_len` positions of memory (every position of
  a segment enters it: reuse_len 0) and clamps relative distances at `clamp_len`."""
  config = pretrainer.backbone.config
  if config.attn_type != "uni" or not pretrainer.lm_objective.consecutive_segments:
    raise UserInputError("model: left-to-right evaluation needs a clm model (attn_type 'uni'); got "
                     f"objective {pretrainer.objective!r}, attn_type {config.attn_type!r}")
  if mem_len < 0:
    raise UserInputError(f"mem_len must be >= 0, got {mem_len}")
  changes = dict(mem_len=mem_len, reuse_len=0, dropout=0.0, dropatt=0.0, same_length=False)
  if clamp_len is not None:
    changes["clamp_len"] = clamp_len
  copy = XLNetPretrainer(XLNetModel(dataclasses.replace(config, **changes)),
                         objective=pretrainer.objective)
  copy.set_weights(pretrainer.get_weights())
  return copy


def text_stream(documents, tokenizer, use_eod: bool = True):
  """(ids int32 [N], characters): documents as the stage streams them (<eod> after each), and
  the characters they hold, a newline counted after each line."""
  lines = [line for document in documents for line in document]
  flat, line_lengths = tokenizer.encode_to_array(lines)
  eod = tokenizer.special_ids.eod if use_eod else None
  if use_eod and eod < 0:
    raise UserInputError("use_eod needs an <eod> symbol in the SentencePiece model")
  ids, _ = token_stream(flat, line_lengths, [len(d) for d in documents], eod)
  return ids, sum(len(line) + 1 for line in lines)


class SegmentScorer:
  """Scores a stream segment by segment: `score(ids [B, T], targets [B, T])` -> the loss sum,
  each segment attending to the memory of those before (`memory`, a RecurrenceMemory that
  starts empty; `memory.reset()` starts a new stream).

  One compiled step, (ids, targets, memory) -> (loss sum, new memory), traced once for any
  segment and memory length (dynamic shapes), so the first segments (shorter memory) and the
  last (shorter segment) reuse the same function."""

  def __init__(self, pretrainer: XLNetPretrainer, batch_size: int, jit_compile: bool = False):
    self.pretrainer = pretrainer
    self.memory = RecurrenceMemory(pretrainer.backbone.config, batch_size,
                                   pretrainer.compute_dtype, start_length=0)
    ids_spec = tf.TensorSpec([batch_size, None], tf.int32)
    self.step = tf.function(self._step,
                            input_signature=[ids_spec, ids_spec, self.memory.signature()],
                            jit_compile=jit_compile, autograph=False)

  def _step(self, input_ids, targets, memory):
    inputs = {"input_ids": input_ids}
    if memory:
      inputs["mems"] = list(memory)
    outputs = self.pretrainer(inputs, training=False)
    loss_sum, _ = lm_loss_sum(outputs["logits"], targets, tf.ones_like(targets, tf.float32))
    return loss_sum, tuple(outputs.get("new_mems", ()))

  def score(self, input_ids, targets):
    """The loss sum of the next segment, its memory kept for the one after.

    Args:
      input_ids: int32 [B, T], the segment.
      targets: int32 [B, T], the token after each.

    Returns:
      The segment's loss sum, a float32 scalar tensor.
    """
    loss_sum, new_memory = self.step(input_ids, targets, self.memory.state)
    self.memory.update(new_memory)
    return loss_sum


def stream_rows(ids: np.ndarray, batch_size: int, tgt_len: int) -> np.ndarray:
  """The stream as [B, N // B] parallel rows (the remainder dropped), checked to hold at least
  one segment (tgt_len inputs + 1 target) per row."""
  ids = np.asarray(ids, np.int32)
  row_len = len(ids) // batch_size
  if row_len < tgt_len + 1:
    raise UserInputError(f"eval text: {len(ids)} tokens in {batch_size} stream(s) give rows of "
                     f"{row_len}, shorter than one segment (eval_tgt_len={tgt_len} + 1 target);"
                     " use a longer text or a smaller --eval_tgt_len / --eval_batch_size")
  return ids[:row_len * batch_size].reshape(batch_size, row_len)


def evaluate_stream(pretrainer: XLNetPretrainer, ids: Sequence[int], tgt_len: int,
                    mem_len: int, *, batch_size: int = 1, clamp_len: Optional[int] = None,
                    characters: Optional[int] = None) -> LMEvaluation:
  """Loss of every token of `ids` after the first (per row), read in segments of `tgt_len`
  with a memory of `mem_len`. With mem_len 0 the segments are independent. `characters` (of
  the text behind `ids`) gives bits per character."""
  if tgt_len <= 0:
    raise UserInputError(f"eval_tgt_len must be positive, got {tgt_len}")
  rows = stream_rows(ids, batch_size, tgt_len)
  model = with_memory(pretrainer, mem_len, clamp_len)
  scorer = SegmentScorer(model, batch_size)
  loss_sum, tokens = 0.0, 0
  started = time.perf_counter()
  for begin in range(0, rows.shape[1] - 1, tgt_len):
    end = min(begin + tgt_len, rows.shape[1] - 1)
    segment_loss = scorer.score(tf.constant(rows[:, begin:end]),
                                tf.constant(rows[:, begin + 1:end + 1]))
    loss_sum += float(segment_loss)
    tokens += (end - begin) * batch_size
  return LMEvaluation(tgt_len, mem_len, loss_sum, tokens, characters,
                      time.perf_counter() - started)
