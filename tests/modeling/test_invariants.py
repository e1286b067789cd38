"""Invariants of the XLNet factorization that hold for any weights."""

import numpy as np
import pytest

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetModel

LENGTH = 8


def make_model(seed=3, **overrides):
  model = XLNetModel(tiny_config(**overrides))
  randomize_weights(model, seed)
  return model


def test_query_output_ignores_the_token_it_predicts(rng):
  model = make_model()
  inputs = padded_pair_batch(rng, 3, LENGTH, 50, pad_lengths=[0, 1, 2])
  perm_mask, targets, _ = factorization_perm_mask(rng, 3, LENGTH, num_targets=3)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, LENGTH))
  before = model(inputs)
  for slot in range(targets.shape[1]):
    changed = {key: value.copy() for key, value in inputs.items()}
    rows = np.arange(3)
    changed["input_ids"][rows, targets[:, slot]] = (inputs["input_ids"][rows, targets[:, slot]]
                                                    + 7) % 40 + 10
    after = model(changed)
    np.testing.assert_allclose(after["query_output"].numpy()[:, slot],
                               before["query_output"].numpy()[:, slot], atol=1e-6, rtol=0)
    # The content stream at that position does see its own token: the change is real.
    moved = np.abs(after["sequence_output"].numpy()[rows, targets[:, slot]]
                   - before["sequence_output"].numpy()[rows, targets[:, slot]]).max()
    assert moved > 1e-3


def test_earlier_positions_in_the_order_ignore_later_tokens(rng):
  batch = 3
  model = make_model()
  inputs = padded_pair_batch(rng, batch, LENGTH, 50, pad_lengths=[0, 0, 0])
  perm_mask, _, ranks = factorization_perm_mask(rng, batch, LENGTH, num_targets=LENGTH)
  order = np.argsort(ranks, axis=1)  # positions by factorization rank
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(order, LENGTH))
  before = model(inputs)
  cut = 4  # change the tokens at ranks >= cut
  changed = {key: value.copy() for key, value in inputs.items()}
  for b in range(batch):
    later = order[b, cut:]
    changed["input_ids"][b, later] = (inputs["input_ids"][b, later] + 11) % 40 + 10
  after = model(changed)
  for b in range(batch):
    earlier = order[b, :cut]
    np.testing.assert_allclose(after["sequence_output"].numpy()[b, earlier],
                               before["sequence_output"].numpy()[b, earlier], atol=1e-6, rtol=0)
    # Query slots are in rank order: slot r sees content of ranks < r, so slots <= cut hold.
    # Slot 0 sees nothing; a row with every key masked attends uniformly (as the original's
    # `score - 1e30 * mask` does), so it is left out.
    np.testing.assert_allclose(after["query_output"].numpy()[b, 1:cut + 1],
                               before["query_output"].numpy()[b, 1:cut + 1], atol=1e-6, rtol=0)
    assert np.abs(after["query_output"].numpy()[b, cut + 1:]
                  - before["query_output"].numpy()[b, cut + 1:]).max() > 1e-3


def _two_segments(rng, batch, first_length, second_length):
  first = rng.integers(10, 50, size=[batch, first_length]).astype(np.int32)
  second = rng.integers(10, 50, size=[batch, second_length]).astype(np.int32)
  # Memory counts as segment 0, so the first segment is segment 0 in the direct run too.
  second_segments = np.zeros([batch, second_length], np.int32)
  second_segments[:, second_length // 2:] = 1
  return first, second, second_segments


def test_memory_equals_direct_computation_bidirectional(rng):
  batch, first_length, second_length = 2, 6, 5
  model = make_model(mem_len=first_length)
  first, second, second_segments = _two_segments(rng, batch, first_length, second_length)
  first_out = model({"input_ids": first, "segment_ids": np.zeros_like(first)})
  with_memory = model({"input_ids": second, "segment_ids": second_segments,
                       "mems": first_out["new_mems"]})["sequence_output"].numpy()
  # Direct: one run over both segments where the first cannot see the second.
  total = first_length + second_length
  perm_mask = np.zeros([batch, total, total], np.float32)
  perm_mask[:, :first_length, first_length:] = 1.0
  direct = model({"input_ids": np.concatenate([first, second], 1),
                  "segment_ids": np.concatenate([np.zeros_like(first), second_segments], 1),
                  "perm_mask": perm_mask})["sequence_output"].numpy()
  np.testing.assert_allclose(with_memory, direct[:, first_length:], atol=1e-5, rtol=0)


def test_memory_equals_direct_computation_causal(rng):
  batch, first_length, second_length = 2, 4, 6
  model = make_model(mem_len=first_length, attn_type="uni")
  first, second, second_segments = _two_segments(rng, batch, first_length, second_length)
  first_out = model({"input_ids": first, "segment_ids": np.zeros_like(first)})
  with_memory = model({"input_ids": second, "segment_ids": second_segments,
                       "mems": first_out["new_mems"]})["sequence_output"].numpy()
  direct = model({"input_ids": np.concatenate([first, second], 1),
                  "segment_ids": np.concatenate([np.zeros_like(first), second_segments], 1)})
  np.testing.assert_allclose(with_memory, direct["sequence_output"].numpy()[:, first_length:],
                             atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn_type", ["bi", "uni"])
def test_left_padded_memory_with_memory_mask_equals_direct_computation(rng, attn_type):
  """Memory holding left-padded rows (as generation caches prompts): with memory_mask the
  second segment's outputs equal one run over both segments with input_mask; without it they
  do not. The same memory as each layer's keys and values (memory_keys_values) and with
  position keys computed beforehand gives the same outputs."""
  import tensorflow as tf
  batch, first_length, second_length, pads = 3, 6, 4, [0, 2, 5]
  model = make_model(attn_type=attn_type, mem_len=first_length)
  first, second, second_segments = _two_segments(rng, batch, first_length, second_length)
  first_mask = np.ones([batch, first_length], np.float32)
  for row, pad in enumerate(pads):
    first_mask[row, :pad] = 0.0
  memory = model({"input_ids": first, "input_mask": first_mask})["new_mems"]
  second_inputs = {"input_ids": second, "segment_ids": second_segments}
  with_mask = model(dict(second_inputs, mems=memory, memory_mask=first_mask))
  without_mask = model(dict(second_inputs, mems=memory))["sequence_output"].numpy()
  keys_values = [block.attention.project_keys_values(tf.constant(layer_memory))
                 for block, layer_memory in zip(model.blocks, memory)]
  position_keys = model.layer_position_keys(second_length, first_length + second_length)
  projected = model(dict(second_inputs, memory_mask=first_mask), memory_keys_values=keys_values,
                    position_keys=position_keys)
  total = first_length + second_length
  perm_mask = np.zeros([batch, total, total], np.float32)
  perm_mask[:, :first_length, first_length:] = 1.0  # the first segment cannot see the second
  direct = model({"input_ids": np.concatenate([first, second], 1),
                  "segment_ids": np.concatenate([np.zeros_like(first), second_segments], 1),
                  "input_mask": np.concatenate([first_mask, np.ones_like(second)], 1),
                  "perm_mask": perm_mask})["sequence_output"].numpy()[:, first_length:]
  np.testing.assert_allclose(with_mask["sequence_output"].numpy(), direct, atol=1e-5, rtol=0)
  np.testing.assert_allclose(projected["sequence_output"].numpy(), direct, atol=1e-5, rtol=0)
  np.testing.assert_allclose(without_mask[0], direct[0], atol=1e-5, rtol=0)  # no padding
  assert np.abs(without_mask[1:] - direct[1:]).max() > 1e-3
  # keys_values: this call's tokens as each layer projects its input (the next memory).
  for block, pair, layer_memory in zip(model.blocks, projected["keys_values"],
                                       with_mask["new_mems"]):
    expected = block.attention.project_keys_values(layer_memory[:, -second_length:])
    for got, want in zip(pair, expected):
      np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=0)


def test_padding_does_not_leak_into_real_positions(rng):
  model = make_model()
  inputs = padded_pair_batch(rng, 2, LENGTH, 50, pad_lengths=[3, 2])
  before = model(inputs)["sequence_output"].numpy()
  changed = {key: value.copy() for key, value in inputs.items()}
  changed["input_ids"][0, :3] = 17
  changed["input_ids"][1, :2] = 23
  after = model(changed)["sequence_output"].numpy()
  np.testing.assert_allclose(after[0, 3:], before[0, 3:], atol=1e-6, rtol=0)
  np.testing.assert_allclose(after[1, 2:], before[1, 2:], atol=1e-6, rtol=0)


def test_position_scores_in_row_blocks_equal_one_block(rng, monkeypatch):
  """The content stream's position scores computed in row blocks (each block only the
  positions its rows read) give the one-block outputs and gradients: with memory, padding,
  two segments, a factorization-order mask and the query stream."""
  import tensorflow as tf
  from xlnet_tf.modeling.ops import relative_shift as attention
  batch, memory_length, length, num_targets = 2, 3, 6, 2
  model = make_model(mem_len=memory_length)
  inputs = padded_pair_batch(rng, batch, length, 50, pad_lengths=[2, 0])
  perm_mask, targets, _ = factorization_perm_mask(rng, batch, length, num_targets)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, length),
                mems=[tf.constant(rng.standard_normal([batch, memory_length, 32]), tf.float32)
                      for _ in range(2)])

  def outputs_and_gradients():
    with tf.GradientTape() as tape:
      outputs = model(inputs)
      total = (tf.reduce_sum(outputs["sequence_output"] ** 2)
               + tf.reduce_sum(outputs["query_output"] ** 2))
    gradients = tape.gradient(total, model.trainable_variables)
    return [outputs["sequence_output"], outputs["query_output"],
            *[tf.convert_to_tensor(gradient) for gradient in gradients]]

  monkeypatch.setattr(attention, "POSITION_BLOCK_ROWS", 1000)
  assert attention.position_row_blocks(length, memory_length + length,
                                       memory_length + 2 * length) == 1
  one_block = outputs_and_gradients()
  monkeypatch.setattr(attention, "POSITION_BLOCK_ROWS", 2)
  assert attention.position_row_blocks(length, memory_length + length,
                                       memory_length + 2 * length) == 3
  assert attention.position_row_blocks(length, memory_length + length,  # 'uni': R = K + 1
                                       memory_length + length + 1) == 1
  blocked = outputs_and_gradients()
  assert len(blocked) == len(one_block) > 2
  for want, have in zip(one_block, blocked):  # two summation orders in float32 (a wrong
    # block is off by the scores' size, ~1): gradient entries measured 1.2e-6 apart, 4.3e-6 on
    # a CPU without AVX-512 (its vector width orders the sums otherwise): a few ulps of the
    # largest values summed
    np.testing.assert_allclose(np.asarray(have), np.asarray(want), rtol=1e-5,
                               atol=4e-6 * np.abs(np.asarray(want)).max())
