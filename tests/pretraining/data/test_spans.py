import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.spans import sample_word_spans


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.floats(0.0, 1.0), st.integers(0, 10 ** 6), st.integers(1, 8),
       st.integers(1, 3))
def test_selects_exactly_goal_tokens_and_terminates(length, fraction, seed, alpha, beta):
  rng = np.random.default_rng(seed)
  word_start = rng.random(length) < 0.6
  goal = int(round(fraction * length))  # up to every token: no hang
  selected = sample_word_spans(random.Random(seed), word_start, goal, alpha, beta)
  assert selected.sum() == goal


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 4))
def test_spans_are_whole_words(seed, word_pieces):
  # Words of `word_pieces` pieces, goal a multiple of it and room to spare: every selected run
  # starts at a word start and ends at one, and runs hold at most 5 words.
  length = 1200 * word_pieces
  word_start = np.arange(length) % word_pieces == 0
  goal = 6 * word_pieces
  selected = sample_word_spans(random.Random(seed), word_start, goal, 6, 1)
  padded = np.concatenate([[False], selected, [False]])
  begins = np.flatnonzero(padded[1:] & ~padded[:-1])
  ends = np.flatnonzero(~padded[1:] & padded[:-1])
  assert selected.sum() == goal
  for begin, end in zip(begins, ends):
    assert begin % word_pieces == 0 and end % word_pieces == 0


def test_span_lengths_follow_one_over_l():
  draw = random.Random(0)
  word_start = np.ones(300000, bool)  # room for every span: no random fill
  selected = sample_word_spans(draw, word_start, 20000, 6, 1)
  padded = np.concatenate([[False], selected, [False]])
  runs = np.flatnonzero(~padded[1:] & padded[:-1]) - np.flatnonzero(padded[1:] & ~padded[:-1])
  counts = np.bincount(runs, minlength=6)[1:6] / len(runs)
  expected = (1 / np.arange(1, 6)) / (1 / np.arange(1, 6)).sum()
  # Runs can merge when a margin is 0, so compare loosely.
  np.testing.assert_allclose(counts, expected, atol=0.05)


def test_num_predict_that_cannot_fit_is_an_error():
  with pytest.raises(ValueError, match=r"num_predict must be small enough .*; got 100"):
    PretrainingDataConfig(seq_len=64, reuse_len=32, num_predict=100)
  with pytest.raises(ValueError, match=r"perm_size must be a divisor of the .*; got 5"):
    PretrainingDataConfig(seq_len=64, reuse_len=32, perm_size=5)
  with pytest.raises(ValueError, match="bsz_per_host must be divisible by 2"):
    PretrainingDataConfig(bsz_per_host=3)
  with pytest.raises(ValueError, match="reuse_len must be in"):
    PretrainingDataConfig(seq_len=16, reuse_len=14)
