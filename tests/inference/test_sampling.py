"""Choosing tokens (xlnet_tf.inference.sampling), what generation and infilling share: the
top-k / top-p filter against a NumPy version, draws against the filtered softmax, the settings'
checks and keys, the seeds."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.inference import sampling
from xlnet_tf.utils.errors import UserInputError


def numpy_filter(logits, top_k, top_p):
  """The sampling set, written independently: top-k by rank (ties with the k-th kept), then
  the smallest prefix of the sorted survivors whose softmax mass reaches top_p."""
  out = logits.astype(np.float64).copy()
  for row in out:
    if top_k:
      row[row < np.sort(row)[::-1][min(top_k, len(row)) - 1]] = -np.inf
    if top_p < 1:
      kept = np.sort(row[np.isfinite(row)])[::-1]
      probabilities = np.exp(kept - kept.max())
      probabilities /= probabilities.sum()
      before = np.concatenate([[0.0], np.cumsum(probabilities)[:-1]])
      row[row < kept[before < top_p].min()] = -np.inf
  return out


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (5, 1.0), (0, 0.5), (0, 0.9), (8, 0.7),
                                         (1, 1.0), (50, 0.3)])
def test_filter_logits_against_numpy(top_k, top_p, rng):
  logits = rng.normal(size=(6, 40)).astype(np.float32) * 2
  logits[0, :4] = logits[0, 4]  # ties
  filtered = sampling.filter_logits(logits, top_k, top_p).numpy()
  expected = numpy_filter(logits, top_k, top_p)
  np.testing.assert_array_equal(np.isfinite(filtered), np.isfinite(expected))
  np.testing.assert_array_equal(filtered[np.isfinite(filtered)], logits[np.isfinite(expected)])


def test_draws_follow_the_filtered_softmax(rng):
  logits = rng.normal(size=(1, 12)).astype(np.float32) * 2
  draws = sampling.choose_tokens(np.repeat(logits, 20000, axis=0), tf.constant([3, 4]),
                                 temperature=0.7, top_k=6, top_p=0.95).numpy()
  filtered = numpy_filter(logits / 0.7, 6, 0.95)[0]
  expected = np.exp(filtered - filtered.max())
  expected /= expected.sum()
  frequencies = np.bincount(draws, minlength=12) / len(draws)
  assert (frequencies[expected == 0] == 0).all()
  np.testing.assert_allclose(frequencies, expected, atol=0.015)


def test_settings_are_one_key_whatever_number_types_they_come_in():
  settings = sampling.Sampling(1, np.int64(5), np.float32(0.5))
  assert (settings.temperature, settings.top_k, settings.top_p) == (1.0, 5, 0.5)
  assert [type(value) for value in (settings.temperature, settings.top_k, settings.top_p)] == [
      float, int, float]
  assert settings == sampling.Sampling(1.0, 5, 0.5)
  assert len({settings, sampling.Sampling(1.0, 5, 0.5), sampling.Sampling()}) == 2


def test_greedy_settings_choose_the_argmax(rng):
  logits = rng.normal(size=(5, 30)).astype(np.float32)
  np.testing.assert_array_equal(sampling.Sampling().choose(logits, tf.constant([1, 2])).numpy(),
                                logits.argmax(-1))


@pytest.mark.parametrize("arguments,message", [
    (dict(temperature=-0.5), "fill: temperature"),
    (dict(temperature=float("inf")), "fill: temperature"),
    (dict(top_k=2.0), "fill: top_k"),
    (dict(top_k=True), "fill: top_k"),
    (dict(top_p=0.0), "fill: top_p"),
    (dict(seed=1.5), "fill: seed"),
])
def test_bad_settings_name_the_caller_and_argument(arguments, message):
  settings = dict(dict(temperature=1.0, top_k=0, top_p=1.0, seed=None), **arguments)
  with pytest.raises(UserInputError, match=message):
    sampling.check_sampling(**settings, caller="fill")


def test_good_settings_pass_numpy_integers_included():
  sampling.check_sampling(0.7, np.int64(3), 0.9, np.int32(11), caller="generate")
  sampling.check_sampling(0, 0, 1, None, caller="generate")


def test_step_seeds_are_reproducible_and_differ_by_step():
  assert sampling.step_seed(7, 3).numpy().tolist() == [7, 3]
  assert sampling.step_seed(2 ** 31 + 5, 0).numpy().tolist() == [5, 0]  # fits int32
  assert sampling.seed_or_fresh(12) == 12
  fresh = {sampling.seed_or_fresh(None) for _ in range(4)}
  assert len(fresh) > 1 and all(isinstance(seed, int) for seed in fresh)
