import numpy as np

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
