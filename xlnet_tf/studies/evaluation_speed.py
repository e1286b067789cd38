"""Transformer-XL's Table 7: per-token evaluation time with memory against a vanilla model that
re-runs a whole window for every prediction (Al-Rfou et al., the paper's baseline).

A study over `pretraining.lm_evaluation` (a left-to-right LM, objective clm): it times, it
does not train. `run/evaluate_lm.py` prints its table after the perplexities.

Shapes: T segment length (tgt_len), L attention length, V vocabulary; batch 1 throughout.
"""

import dataclasses
import time
from typing import List, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.pretraining.lm_evaluation import SegmentScorer, with_memory


@dataclasses.dataclass
class SpeedRow:
  attention_length: int
  memory_seconds_per_token: float   # segments of tgt_len over a memory of attention_length
  vanilla_seconds_per_token: float  # a window of attention_length tokens per prediction

  @property
  def speedup(self) -> float:
    return self.vanilla_seconds_per_token / self.memory_seconds_per_token


def evaluation_speed(pretrainer: XLNetPretrainer, attention_lengths: Sequence[int],
                     tgt_len: int = 128, timed_segments: int = 3, timed_windows: int = 4,
                     seed: int = 0, jit_compile: bool = False) -> List[SpeedRow]:
  """Per-token evaluation time at each attention length L, batch 1, on random ids:

  - with memory: segments of tgt_len over a memory of L (filled first, untimed), so every
    prediction sees at least L previous tokens; time per segment / tgt_len.
  - vanilla (Al-Rfou et al., the paper's baseline): for each prediction a window of the last
    L tokens is run from scratch and only its last position predicted; timed on
    `timed_windows` positions.
  Both compiled and warmed up first.
  """
  config = pretrainer.backbone.config
  rng = np.random.default_rng(seed)
  rows = []
  for length in attention_lengths:
    ids = rng.integers(0, config.n_token, size=[1, length + (timed_segments + 2) * tgt_len + 1])
    ids = ids.astype(np.int32)
    memory_time = _seconds_per_token_with_memory(pretrainer, ids, length, tgt_len,
                                                 timed_segments, jit_compile)
    vanilla_time = _seconds_per_token_vanilla(pretrainer, ids, length, timed_windows,
                                              jit_compile)
    rows.append(SpeedRow(length, memory_time, vanilla_time))
  return rows


def memory_evaluation(pretrainer: XLNetPretrainer, ids: np.ndarray, length: int, tgt_len: int,
                      segments: int, jit_compile: bool):
  """A callable scoring the next `segments` segments of tgt_len over a memory of `length`
  (filled first, with one more step at its full length so that every compiled shape is
  compiled here); each call reads on from where the last stopped. `ids` must hold
  length + tgt_len + calls * segments * tgt_len + 1 tokens."""
  scorer = SegmentScorer(with_memory(pretrainer, length), 1, jit_compile)
  state = {"filled": 0}

  def score(count):
    loss = None
    for _ in range(count):
      begin = state["filled"]
      loss = scorer.score(tf.constant(ids[:, begin:begin + tgt_len]),
                          tf.constant(ids[:, begin + 1:begin + tgt_len + 1]))
      state["filled"] += tgt_len
    return float(loss)

  score(-(-(length + tgt_len) // tgt_len))
  return lambda: score(segments)


def vanilla_evaluation(pretrainer: XLNetPretrainer, ids: np.ndarray, length: int, windows: int,
                       jit_compile: bool):
  """A callable predicting `windows` tokens the vanilla way: each re-runs a window of the last
  `length` tokens from scratch and reads only its last position (compiled here)."""
  window_model = with_memory(pretrainer, 0)

  @tf.function(input_signature=[tf.TensorSpec([1, length], tf.int32)], jit_compile=jit_compile)
  def last_position_logits(window, model=window_model):
    hidden = model.backbone({"input_ids": window}, training=False)["sequence_output"]
    return model.lm_logits(hidden[:, -1])  # [1, V]: only the last position is predicted

  last_position_logits(tf.constant(ids[:, :length]))  # compile

  def predict():
    for index in range(windows):
      logits = last_position_logits(tf.constant(ids[:, index + 1:index + 1 + length]))
    return float(logits[0, 0])

  return predict


def _seconds_per_token_with_memory(pretrainer: XLNetPretrainer, ids: np.ndarray, length: int,
                                   tgt_len: int, timed_segments: int, jit_compile: bool) -> float:
  """Seconds per token of `timed_segments` segments read over a memory of `length`."""
  score = memory_evaluation(pretrainer, ids, length, tgt_len, timed_segments, jit_compile)
  started = time.perf_counter()
  score()
  return (time.perf_counter() - started) / (timed_segments * tgt_len)


def _seconds_per_token_vanilla(pretrainer: XLNetPretrainer, ids: np.ndarray, length: int,
                               timed_windows: int, jit_compile: bool) -> float:
  """Seconds per prediction when each one re-runs a window of the last `length` tokens."""
  predict = vanilla_evaluation(pretrainer, ids, length, timed_windows, jit_compile)
  started = time.perf_counter()
  predict()
  return (time.perf_counter() - started) / timed_windows
