"""Dropout's random bits as one cheap element-wise kernel (SplitMix64), with or without XLA.

keras.layers.Dropout draws with the generator's "auto_select" algorithm, which XLA's CPU
backend runs very slowly (measured here: 790 ms for 5.3M draws against 3.7 ms with ThreeFry;
see docs/benchmarks.md); under XLA it was the largest cost of a training step. `keep_mask`
draws 32-bit words from a counter-based generator (SplitMix64) in a function that XLA always
compiles (inside an XLA step it is inlined; in a plain TensorFlow graph, e.g. bfloat16 on CPU,
it becomes one fused cluster), keeps an element when its word is >= round(rate * 2^32), and
`apply_keep_mask` scales kept elements by the exact inverse of that keep probability.

Inside `seeds_derived_from(seed)` the dropout layers take seeds derived from one given seed
instead of their own generators: a recomputed pass draws the same masks, and a training step
whose seed is a function of (run seed, step, replica) draws the same masks when a killed run is
resumed (the generators' state is not in any checkpoint).
"""

import contextlib

import tensorflow as tf

from xlnet_tf.modeling.ops.compile import compiled
from xlnet_tf.utils.thread_settings import ThreadSetting

LEVELS = 1 << 32  # thresholds are out of 2^32


_derivation = ThreadSetting()  # [base seed, draws so far] inside seeds_derived_from


@contextlib.contextmanager
def seeds_derived_from(seed):
  """Inside, each FastDropout draw takes the seed derived from `seed` (int64 [2]) and the number
  of draws before it, not the next seed of its own generator (which would advance).

  Code traced twice under the same seed therefore draws the same masks: the forward and the
  recomputed pass of tf.recompute_grad (XLNetModel's recompute_blocks).
  """
  with _derivation.set([seed, 0]):
    yield


def next_seed(generator):
  """The next dropout seed (int64 [2]): derived inside `seeds_derived_from`, else the next of
  `generator` (a keras.random.SeedGenerator)."""
  derived = next_derived_seed()
  return derived if derived is not None else tf.cast(generator.next(), tf.int64)


def step_seed(run_seed: int, step, replica, replicas):
  """The base seed of one training step on one replica (int64 [2]): a function of the run's
  seed, the global step and the replica alone, so a resumed run draws the masks that an
  uninterrupted one drew, and no two replicas or steps share masks."""
  position = (tf.cast(step, tf.int64) * tf.cast(replicas, tf.int64)
              + tf.cast(replica, tf.int64))
  return tf.stack([tf.constant(run_seed, tf.int64), position])


def next_derived_seed():
  """Inside `seeds_derived_from`, the seed of the next draw; None outside."""
  state = _derivation.value()
  if state is None:
    return None
  state[1] += 1
  return _derived_seed(state[0], tf.constant(state[1], tf.int64))


@compiled  # uint64 arithmetic, as in keep_mask
def _derived_seed(base, draw):
  """[key of `base`, draw]: keep_mask mixes both halves again, so each draw starts its own
  stream."""
  return tf.stack([tf.bitcast(_stream_key(base), tf.int64), draw])


_GOLDEN_GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's counter increment


def _mix64(z):
  """SplitMix64's output function (Stafford's Mix13), a bijection of uint64 with full avalanche."""
  shift = lambda x, bits: tf.bitwise.right_shift(x, tf.constant(bits, tf.uint64))
  z = (z ^ shift(z, 30)) * tf.constant(0xBF58476D1CE4E5B9, tf.uint64)
  z = (z ^ shift(z, 27)) * tf.constant(0x94D049BB133111EB, tf.uint64)
  return z ^ shift(z, 31)


def _stream_key(seed):
  """The uint64 key of an int64 [2] seed, both halves mixed."""
  seed = tf.bitcast(tf.cast(seed, tf.int64), tf.uint64)
  return _mix64(seed[0] ^ _mix64(seed[1] + tf.constant(_GOLDEN_GAMMA, tf.uint64)))


@compiled
def keep_mask(shape, seed, threshold: int):
  """bool mask of `shape`, each element False with probability threshold / 2^32.

  seed: int64 [2]. Element i draws the upper 32 bits of the SplitMix64 sequence at i + 1, from a
  key mixing both seed halves (Keras' SeedGenerator counts up the second half; one step gives
  an unrelated stream). One element-wise expression that XLA fuses with the mask's consumers;
  ThreeFry's generator, written out and compared in separate passes, made the attention
  dropout 1.4x slower (measured: [2, 12, 512, 512] probabilities, 15 ms -> 11 ms per call).
  """
  gamma = tf.constant(_GOLDEN_GAMMA, tf.uint64)
  key = _stream_key(seed)
  index = tf.reshape(tf.bitcast(tf.range(tf.reduce_prod(shape), dtype=tf.int64), tf.uint64),
                     shape)
  words = tf.bitwise.right_shift(_mix64(key + (index + 1) * gamma), tf.constant(32, tf.uint64))
  return words >= tf.constant(threshold, tf.uint64)


def keep_scale(threshold: int, dtype):
  """The factor that keeps the mean: 1 / keep probability."""
  return tf.cast(LEVELS / (LEVELS - threshold), dtype)


def apply_keep_mask(inputs, keep, threshold: int, scale_dtype=None):
  """inputs scaled by keep_scale (rounded to scale_dtype, default the inputs' dtype) where
  `keep`, zero elsewhere: the forward of dropout, and its gradient given the same mask."""
  scale = tf.cast(keep_scale(threshold, scale_dtype or inputs.dtype), inputs.dtype)
  return tf.where(keep, inputs * scale, tf.zeros_like(inputs))


@compiled
def dropout(inputs, seed, threshold: int):
  """Zeroes each element with probability threshold / 2^32 and scales the rest to keep the
  mean. seed: int64 [2] (see keep_mask)."""
  return apply_keep_mask(inputs, keep_mask(tf.shape(inputs), seed, threshold), threshold)
