import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.modeling.layers import masks


def test_causal_mask_docstring_example():
  np.testing.assert_array_equal(masks.causal_mask(3, 2).numpy().astype(int),
                                [[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(masks.causal_mask(3, 2, same_length=True).numpy().astype(int),
                                [[0, 0, 0, 1, 1], [1, 0, 0, 0, 1], [1, 1, 0, 0, 0]])


def test_attention_masks_docstring_example_with_padding_and_batch():
  # Example 0: order 2 -> 0 -> 1, no padding. Example 1: no perm mask, first token padding.
  perm_mask = np.array([[[1, 1, 0], [0, 1, 0], [1, 1, 1]], [[0] * 3] * 3], np.float32)
  input_mask = np.array([[1, 1, 1], [0, 1, 1]], np.float32)
  content, query = masks.attention_masks(3, 1, "bi", input_mask=input_mask, perm_mask=perm_mask)
  assert content.shape == (2, 3, 4) and query.shape == (2, 3, 4)
  np.testing.assert_array_equal(query.numpy()[0, :, 1:].astype(int),
                                [[1, 1, 0], [0, 1, 0], [1, 1, 1]])
  np.testing.assert_array_equal(content.numpy()[0, :, 1:].astype(int),
                                [[0, 1, 0], [0, 0, 0], [1, 1, 0]])
  np.testing.assert_array_equal(query.numpy()[1, :, 1:].astype(int), [[1, 0, 0]] * 3)
  np.testing.assert_array_equal(content.numpy()[1, :, 1:].astype(int),
                                [[0, 0, 0], [1, 0, 0], [1, 0, 0]])
  assert not content.numpy()[:, :, 0].any()  # memory is always visible


def test_memory_mask_blocks_padded_memory_slots_for_every_query():
  # Example 0: the docstring's (M = 2, first slot padding). Example 1: no memory padding,
  # last token padding. 'uni': the causal mask still applies to the current tokens.
  memory_mask = np.array([[0, 1], [1, 1]], np.float32)
  input_mask = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
  content, query = masks.attention_masks(3, 2, "uni", input_mask=input_mask,
                                         memory_mask=memory_mask)
  causal = masks.causal_mask(3, 2).numpy()
  expected = causal | np.array([[[1, 0, 0, 0, 0]], [[0, 0, 0, 0, 1]]], bool)
  np.testing.assert_array_equal(query.numpy(), expected)
  np.testing.assert_array_equal(content.numpy(), expected & ~np.eye(3, 5, 2, dtype=bool))
  content_only, query_only = masks.attention_masks(3, 2, "bi", memory_mask=memory_mask)
  np.testing.assert_array_equal(query_only.numpy()[:, 0].astype(int), [[1, 0, 0, 0, 0],
                                                                       [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(content_only.numpy(), query_only.numpy())


def test_nothing_masked_returns_none():
  assert masks.attention_masks(4, 0, "bi") == (None, None)


def test_segment_mismatch_counts_memory_as_segment_zero():
  segment_ids = np.array([[0, 1], [2, 2]], np.int32)
  mismatch = masks.segment_mismatch(segment_ids, 1).numpy().astype(int)
  np.testing.assert_array_equal(mismatch[0], [[0, 0, 1], [1, 1, 0]])
  np.testing.assert_array_equal(mismatch[1], [[1, 0, 0], [1, 0, 0]])


def test_prediction_positions_marks_padded_slots():
  mapping = np.array([[[0, 0, 1], [1, 0, 0], [0, 0, 0]]], np.float32)
  positions, valid = masks.prediction_positions(mapping)
  np.testing.assert_array_equal(positions.numpy(), [[2, 0, 0]])
  np.testing.assert_array_equal(valid.numpy(), [[1, 1, 0]])


def test_row_masks_hold_tensors_and_compare_by_identity():
  rows = masks.RowMasks(blocked=np.array([[[True, False]]]), positions=[[1]])
  assert isinstance(rows.blocked, tf.Tensor) and rows.blocked.dtype == tf.bool
  assert rows.positions.dtype == tf.int32 and rows.segment_mismatch is None
  assert rows.valid is None
  assert rows == rows and rows != masks.RowMasks(blocked=rows.blocked, positions=rows.positions)
  with pytest.raises(dataclasses.FrozenInstanceError):
    rows.blocked = None


def test_attention_masks_default_to_nothing_blocked_and_know_the_segment_term():
  plain = masks.AttentionMasks()
  assert plain.content.blocked is None and plain.query is None and not plain.with_segments
  mismatch = masks.segment_mismatch(tf.constant([[0, 1]]), 0)
  assert masks.AttentionMasks(masks.RowMasks(segment_mismatch=mismatch)).with_segments


def test_the_backbone_builds_one_masks_object_that_every_block_gets(rng):
  """Both streams' masks are built once per call: every block receives the same object, the
  query stream's rows at the positions target_mapping names."""
  model = XLNetModel(XLNetConfig.preset("tiny", dropout=0.0, dropatt=0.0))
  received = []
  for block in model.blocks:
    original = block.call

    def recording(*args, original=original, **kwargs):
      received.append(kwargs["masks"])
      return original(*args, **kwargs)

    block.call = recording
  target_mapping = np.zeros([2, 2, 5], np.float32)
  target_mapping[0, 0, 3] = target_mapping[0, 1, 1] = target_mapping[1, 0, 4] = 1
  model({"input_ids": rng.integers(10, 100, size=(2, 5)),
         "segment_ids": np.array([[0, 0, 1, 1, 1]] * 2),
         "perm_mask": np.zeros([2, 5, 5], np.float32), "target_mapping": target_mapping})
  assert len(received) == model.config.n_layer
  assert all(call_masks is received[0] for call_masks in received)
  call_masks = received[0]
  assert call_masks.with_segments and call_masks.content.positions is None
  np.testing.assert_array_equal(call_masks.query.positions.numpy(), [[3, 1], [4, 0]])
  np.testing.assert_array_equal(call_masks.query.valid.numpy(), [[1, 1], [1, 0]])
  assert call_masks.query.blocked.shape == (2, 2, 5)
  assert call_masks.query.segment_mismatch.shape == (2, 2, 5)
