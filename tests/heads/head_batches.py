"""Small batches for the backbone and every head: batch 2 with left padding and three segment
ids, the query stream's inputs, multiple-choice options and question-answering masks."""

import numpy as np

from model_inputs import padded_pair_batch

LENGTH, N_TOKEN = 10, 50


def pair_batch(rng):
  """Two left-padded A <sep> B <sep> <cls> rows: padding and three segment ids."""
  return padded_pair_batch(rng, 2, LENGTH, N_TOKEN, pad_lengths=[0, 3])


def two_stream_batch(rng):
  """A pair batch plus a factorization order's perm_mask and a target_mapping of 3 targets."""
  inputs = pair_batch(rng)
  perm_mask = np.zeros([2, LENGTH, LENGTH], np.float32)
  target_mapping = np.zeros([2, 3, LENGTH], np.float32)
  for row, targets in enumerate(([2, 5, 7], [4, 6, 8])):
    perm_mask[row, :, targets] = 1.0  # nobody sees a target ...
    for rank, position in enumerate(targets):
      perm_mask[row, position, targets[:rank]] = 0.0  # ... but the targets before it
      target_mapping[row, rank, position] = 1.0
  return dict(inputs, perm_mask=perm_mask, target_mapping=target_mapping)


def choices_batch(rng):
  """[B, C, T]: two questions of three options each."""
  rows = [pair_batch(rng) for _ in range(3)]
  return {key: np.stack([row[key] for row in rows], axis=1) for key in rows[0]}


def answer_batch(rng):
  inputs = pair_batch(rng)
  p_mask = (inputs["segment_ids"] != 0).astype(np.float32)  # answers in segment A only
  return dict(inputs, p_mask=p_mask, cls_index=np.full([2], LENGTH - 1, np.int32))
