"""Factorization orders and the masks of permutation language modelling.

An example is stored as one small integer per position, its factorization rank (-1 for
context tokens), plus the target positions; the [T, T] perm_mask is then one comparison. The
semantics are the original's (`_local_perm` in zihangdai/xlnet data_utils.py):

- context tokens (neither selected for prediction nor functional <sep>/<cls>) come first in
  the order: everybody sees them, and they see no selected or functional token;
- a target (selected and not functional) sees the context and the selected/functional tokens
  earlier in the order, not itself;
- a functional token sees the context, the earlier ones and itself; it is never predicted;
- orders are drawn separately for the reuse part [0, R) and the new part [R, T); the reuse
  part never sees the new part, the new part sees all of the reuse part.

Example, T = 4, R = 0, order 2 -> 0 -> 3, position 1 context, targets {0, 2}, position 3 <cls>
(ranks [1, -1, 0, 2]); 1 = blocked:

    0: 1 0 0 1      target 0 sees 1 (context) and 2 (earlier)
    1: 1 0 1 1      context sees only context
    2: 1 0 1 1      target 2 is first in the order
    3: 0 0 0 0      <cls> sees everything earlier and itself
"""

import functools

import numpy as np
import tensorflow as tf


def factorization_ranks(rng: np.random.Generator, is_selected, is_functional, perm_size: int):
  """int32 ranks of one part: -1 for context, else the position's rank in the order.

  Like the original, one random permutation of `perm_size` offsets is applied in every chunk of
  `perm_size` positions and the chunks follow each other; perm_size = part length gives a
  uniformly random order.
  """
  offsets = rng.permutation(perm_size)
  if len(is_selected) == perm_size:
    ranks = offsets
  else:
    chunk_starts, offset_index = _chunks(len(is_selected), perm_size)
    ranks = chunk_starts + offsets[offset_index]
  context = ~is_selected & ~is_functional
  return np.where(context, -1, ranks).astype(np.int32)


@functools.lru_cache(maxsize=8)
def _chunks(length: int, perm_size: int):
  """(first position of each position's chunk, its index in the chunk), for every position."""
  positions = np.arange(length)
  return (positions // perm_size) * perm_size, positions % perm_size


def expand_factorization(input_ids, ranks, target_positions, reuse_len: int):
  """TF, batched: the model's permutation-LM inputs from the stored form.

  Args:
    input_ids: int32 [B, T]; ranks: int32 [B, T] (-1 = context);
    target_positions: int32 [B, P], -1 for padded slots; reuse_len: R.

  Returns dict: perm_mask float32 [B, T, T]; target_mapping float32 [B, P, T]; target int32
  [B, P] (0 in padded slots); target_mask float32 [B, P]; input_q float32 [B, T] (1 at targets).
  """
  length = tf.shape(input_ids)[1]
  target_mapping = tf.one_hot(target_positions, length, dtype=tf.float32)  # -1 -> zero row
  is_target = tf.reduce_max(target_mapping, axis=1) > 0  # [B, T]
  selected_or_functional = ranks >= 0
  own_rank = tf.where(is_target, ranks, ranks + 1)
  local = tf.logical_and(own_rank[:, :, None] <= ranks[:, None, :],
                         selected_or_functional[:, None, :])  # [B, T, T]
  new_part = tf.range(length) >= reuse_len
  same_part = tf.equal(new_part[:, None], new_part[None, :])
  reuse_sees_new = tf.logical_and(tf.logical_not(new_part)[:, None], new_part[None, :])
  perm_mask = tf.where(same_part[None], local, reuse_sees_new[None])
  valid = target_positions >= 0
  target = tf.gather(input_ids, tf.maximum(target_positions, 0), batch_dims=1)
  return {
      "perm_mask": tf.cast(perm_mask, tf.float32),
      "target_mapping": target_mapping,
      "target": tf.where(valid, target, tf.zeros_like(target)),
      "target_mask": tf.cast(valid, tf.float32),
      "input_q": tf.cast(is_target, tf.float32),
  }
