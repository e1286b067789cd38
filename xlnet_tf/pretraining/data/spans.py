"""Target sampling for partial prediction: spans of whole words, as the XLNet paper describes.

Span length L (in words) is drawn with P(L) proportional to 1/L for L in 1..max_words; each
span sits in a context of L * mask_alpha / mask_beta tokens (a random left margin, the rest to
the right), left to right until `goal` tokens are selected. The original counted pieces instead
of words (it tested the span's first piece for a word start at every step); here a span runs
from a word start to the start of the (L+1)-th word. Tokens still missing at the end are picked
at random among the unselected ones, as in the original.

A "word" of more than `max_word_pieces` pieces is predicted as pieces (`words`: text written
without spaces has sentence-long "words"). Text whose words are all within the limit samples
exactly as before.
"""

import bisect
import functools
import random

import numpy as np

from xlnet_tf.pretraining.data.words import split_long_words


@functools.lru_cache(maxsize=None)
def span_length_cdf(max_words: int):
  """Cumulative P(L) for L = 1..max_words, P(L) proportional to 1/L."""
  weights = 1.0 / np.arange(1, max_words + 1)
  return np.cumsum(weights / weights.sum()).tolist()


def sample_word_spans(draw: random.Random, word_start, goal: int, mask_alpha: int,
                      mask_beta: int, max_words: int = 5, max_word_pieces: int = 0):
  """bool [len(word_start)] with exactly `goal` True, in reading order.

  Args:
    draw: the random source (Python's generator: the draws here are scalars, where NumPy's
      per-call overhead would dominate).
    word_start: bool [L], True where a token begins a word (reading order).
    goal: tokens to select; must be <= L (checked by the settings).
    max_word_pieces: longer words are predicted as pieces (`split_long_words`); 0: no limit.
  """
  length = len(word_start)
  selected = np.zeros(length, bool)
  if goal <= 0:
    return selected
  word_start = split_long_words(word_start, max_word_pieces)
  # Python lists and bisect: a handful of spans per call, so per-span work must be cheap.
  starts = np.flatnonzero(word_start).tolist()
  boundaries = starts + [length]  # word k covers [boundaries[k], boundaries[k + 1])
  cdf = span_length_cdf(max_words)
  count, cursor = 0, 0
  while count < goal:
    span_words = min(bisect.bisect_right(cdf, draw.random()) + 1, max_words, goal - count)
    margin = draw.random()
    context = span_words * mask_alpha // mask_beta
    left = int(margin * context)
    first_word = bisect.bisect_left(starts, cursor + left)
    # The span must end before the segment does (its end is the next word's start).
    span_words = min(span_words, len(starts) - 1 - first_word)
    begin = boundaries[first_word] if span_words > 0 else 0
    # Shorten to whole words that still fit in the goal.
    while span_words > 0 and boundaries[first_word + span_words] - begin > goal - count:
      span_words -= 1
    if span_words <= 0:
      break
    end = boundaries[first_word + span_words]
    selected[begin:end] = True
    count += end - begin
    cursor = end + (context - left)
  if count < goal:
    free = np.flatnonzero(~selected).tolist()
    selected[draw.sample(free, goal - count)] = True
  return selected


def sample_tokens(draw: random.Random, length: int, goal: int):
  """bool [length] with `goal` True at uniformly random positions: token-level prediction
  (the span sampler's ablation)."""
  selected = np.zeros(length, bool)
  selected[draw.sample(range(length), min(goal, length))] = True
  return selected
