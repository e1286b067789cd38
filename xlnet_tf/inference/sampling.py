"""How decoding chooses a token from logits, for generation and infilling alike: greedy
(argmax) at temperature 0, else a draw from softmax(logits / temperature) among the top-k and
top-p tokens. Draws take stateless seeds (`step_seed`), so a seed gives the same tokens on
every path (cached or recomputed steps, with or without XLA).

Shapes: B rows, V vocabulary.
"""

import dataclasses
import numbers
from typing import Optional

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import is_int, require


@dataclasses.dataclass(frozen=True)
class Sampling:
  """The token choice of a decoding call (arguments as `check_sampling` accepts them). Hashable,
  with the numbers as float, int, float: compiled steps are kept per setting."""
  temperature: float = 0.0
  top_k: int = 0
  top_p: float = 1.0

  def __post_init__(self):
    # One key per setting: top_p=1 and top_p=1.0 (or NumPy numbers) share compiled steps.
    object.__setattr__(self, "temperature", float(self.temperature))
    object.__setattr__(self, "top_k", int(self.top_k))
    object.__setattr__(self, "top_p", float(self.top_p))

  def choose(self, logits, seed):
    """`choose_tokens` with these settings: int32 [B]."""
    return choose_tokens(logits, seed, self.temperature, self.top_k, self.top_p)


def check_sampling(temperature, top_k, top_p, seed, caller: str) -> None:
  """The sampling arguments of `caller` (generate, fill); UserInputError naming the first
  invalid one."""
  require(isinstance(temperature, numbers.Real) and np.isfinite(temperature)
          and temperature >= 0, f"{caller}: temperature", "a number >= 0 (0 = greedy)",
          temperature)
  require(is_int(top_k) and top_k >= 0, f"{caller}: top_k", "an integer >= 0 (0 = no limit)",
          top_k)
  require(isinstance(top_p, numbers.Real) and 0 < top_p <= 1, f"{caller}: top_p",
          "a number in (0, 1] (1 = no limit)", top_p)
  require(seed is None or is_int(seed), f"{caller}: seed", "an integer or None", seed)


def filter_logits(logits, top_k: int = 0, top_p: float = 1.0):
  """Logits [B, V] with every token outside the sampling set at -inf.

  top_k > 0 keeps the k largest logits of a row (and any tied with the k-th). Then top_p < 1
  keeps the largest logits whose probabilities (softmax over those still kept) sum to at least
  top_p: a token stays if the tokens more likely than it hold less than top_p (so the most
  likely always stays; ties with the last one kept stay too).
  """
  logits = tf.convert_to_tensor(logits)
  removed = tf.constant(-np.inf, logits.dtype)
  if top_k > 0:
    kth_largest = tf.math.top_k(logits, k=min(top_k, logits.shape[-1])).values[:, -1:]
    logits = tf.where(logits < kth_largest, removed, logits)
  if top_p < 1.0:
    descending = tf.sort(logits, axis=-1, direction="DESCENDING")
    probability_before = tf.cumsum(tf.nn.softmax(descending), axis=-1, exclusive=True)
    smallest_kept = tf.reduce_min(
        tf.where(probability_before < top_p, descending, tf.constant(np.inf, logits.dtype)),
        axis=-1, keepdims=True)
    logits = tf.where(logits < smallest_kept, removed, logits)
  return logits


def choose_tokens(logits, seed, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0):
  """int32 [B]: argmax of logits [B, V] when temperature is 0, else a draw from
  softmax(filter_logits(logits / temperature)) with the stateless seed int [2]."""
  logits = tf.cast(logits, tf.float32)
  if temperature == 0:
    return tf.argmax(logits, axis=-1, output_type=tf.int32)
  filtered = filter_logits(logits / temperature, top_k, top_p)
  return tf.cast(tf.random.stateless_categorical(filtered, 1, seed)[:, 0], tf.int32)


def seed_or_fresh(seed: Optional[int]) -> int:
  """`seed`, or a fresh one drawn from the operating system when None."""
  if seed is None:
    return int(np.random.SeedSequence().generate_state(1)[0])
  return seed


def step_seed(seed: int, step: int):
  """int32 [2]: the stateless seed of decoding step `step` of a call seeded with `seed`."""
  return tf.constant([seed % 2 ** 31, step])
