"""Inputs for model tests: tiny configs, factorization-order masks, target mappings."""

import numpy as np

from xlnet_tf import XLNetConfig


def tiny_config(**overrides):
  """2 layers, d_model 32, dropout off so outputs are deterministic."""
  values = dict(n_token=50, n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=48,
                dropout=0.0, dropatt=0.0)
  values.update(overrides)
  return XLNetConfig(**values)


def factorization_perm_mask(rng, batch, length, num_targets):
  """perm_mask from a random factorization order, the original's semantics (1 = blocked).

  Non-targets form the context: every position sees them. A target sees the context and the
  targets earlier in the order; nobody outside the targets sees a target. Returns
  (perm_mask [B, T, T], target positions [B, num_targets] in order, ranks [B, T]).
  """
  perm_mask = np.zeros([batch, length, length], np.float32)
  targets = np.zeros([batch, num_targets], np.int64)
  ranks = np.zeros([batch, length], np.int64)
  for b in range(batch):
    order = rng.permutation(length)
    target_positions = order[-num_targets:]  # the last in the order are predicted
    rank = np.empty(length, np.int64)
    rank[order] = np.arange(length)
    is_target = np.zeros(length, bool)
    is_target[target_positions] = True
    for i in range(length):
      for j in range(length):
        if is_target[j] and (not is_target[i] or rank[j] >= rank[i]):
          perm_mask[b, i, j] = 1.0
    targets[b] = target_positions
    ranks[b] = rank
  return perm_mask, targets, ranks


def perm_mask_from_ranks(ranks, is_target, reuse_len: int):
  """NumPy [T, T] perm_mask (1 = may not attend) from ranks [T] and is_target [T].

  The stored form's meaning written out in NumPy (the library builds it batched in TF, in
  permutation.expand_factorization): the reference the data stage and the reader are checked
  against.
  """
  ranks = np.asarray(ranks)
  selected_or_functional = ranks >= 0
  own_rank = np.where(is_target, ranks, ranks + 1)
  local = (own_rank[:, None] <= ranks[None, :]) & selected_or_functional[None, :]
  new_part = np.arange(len(ranks)) >= reuse_len
  same_part = new_part[:, None] == new_part[None, :]
  reuse_sees_new = ~new_part[:, None] & new_part[None, :]
  return np.where(same_part, local, reuse_sees_new).astype(np.float32)


def target_mapping_for(targets, length, padded_slots=0):
  batch, count = targets.shape
  mapping = np.zeros([batch, count + padded_slots, length], np.float32)
  for b in range(batch):
    mapping[b, np.arange(count), targets[b]] = 1.0
  return mapping


def padded_pair_batch(rng, batch, length, n_token, pad_lengths):
  """Left-padded `A <sep> B <sep> <cls>` rows as the original classifier builds them.

  Segment ids A = 0, B = 1, <cls> = 2, padding = 4 (three distinct ids besides padding);
  input_mask 1 = real token. Returns dict(input_ids, segment_ids, input_mask), int32/float32.
  """
  input_ids = rng.integers(10, n_token, size=[batch, length]).astype(np.int32)
  segment_ids = np.zeros([batch, length], np.int32)
  input_mask = np.ones([batch, length], np.float32)
  for b, pad in enumerate(pad_lengths):
    real = length - pad
    first = max(1, (real - 3) // 2)
    second = real - 3 - first
    segments = [4] * pad + [0] * (first + 1) + [1] * (second + 1) + [2]
    segment_ids[b] = segments
    input_mask[b, :pad] = 0.0
    input_ids[b, :pad] = 5
  return dict(input_ids=input_ids, segment_ids=segment_ids, input_mask=input_mask)
