"""The recurrence memory (modeling.memory): the update rule against NumPy, segments carried by
RecurrenceMemory against the float64 reference carrying its own memory, and the memory's
forms: tensors per replica, a variable (Model.fit), a worker's rows, the projected zeros.

Every numeric case: batch 3, left padding, three segment ids, several segments."""

import numpy as np
import pytest
import tensorflow as tf

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_reference import model_weights_by_original_name, randomize_weights, xlnet_forward
from xlnet_tf import XLNetModel
from xlnet_tf.modeling.memory import RecurrenceMemory, next_memory

LENGTH = 8
BATCH = 3
TOLERANCE = 1e-5


def reference_next_memory(layer_input, memory, reuse_len, mem_len):
  """The original's _cache_mem in NumPy: the reused part after the old memory, the newest
  mem_len kept."""
  current = layer_input[:, :reuse_len] if reuse_len > 0 else layer_input
  if memory is not None:
    current = np.concatenate([memory, current], axis=1)
  return current[:, max(current.shape[1] - mem_len, 0):]


@pytest.mark.parametrize("mem_len,reuse_len", [(5, 0), (12, 0), (6, 5), (12, 5)])
@pytest.mark.parametrize("old_length", [None, 0, 4])
def test_next_memory_keeps_the_newest_of_the_reused_part_and_stops_the_gradient(
    mem_len, reuse_len, old_length, rng):
  layer_input = tf.constant(rng.normal(size=[BATCH, LENGTH, 4]), tf.float32)
  old = None if old_length is None else rng.normal(size=[BATCH, old_length, 4]).astype(np.float32)
  with tf.GradientTape() as tape:
    tape.watch(layer_input)
    new = next_memory(layer_input, None if old is None else tf.constant(old), reuse_len, mem_len)
    total = tf.reduce_sum(new * new)
  expected = reference_next_memory(layer_input.numpy(), old, reuse_len, mem_len)
  kept = min((old_length or 0) + (reuse_len or LENGTH), mem_len)
  assert expected.shape == (BATCH, kept, 4)
  np.testing.assert_array_equal(new.numpy(), expected)
  assert tape.gradient(total, layer_input) is None


def test_next_memory_also_carries_a_mask():
  """[B, T] masks (long documents keep their memory's padding this way)."""
  mask = tf.constant([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], tf.float32)
  old = tf.constant([[1, 1], [0, 1], [0, 0]], tf.float32)
  np.testing.assert_array_equal(next_memory(mask, old, 0, 4).numpy(),
                                [[0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]])


def _segment(rng, config, pad_lengths, with_query):
  inputs = padded_pair_batch(rng, BATCH, LENGTH, config.n_token, pad_lengths)
  if with_query:
    perm_mask, targets, _ = factorization_perm_mask(rng, BATCH, LENGTH, 3)
    inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, LENGTH))
  return inputs


# mem_len below and above the segment length, with and without reuse_len; pretraining's zeros
# to start from, or LM evaluation's empty memory that grows.
CASES = {"short": dict(mem_len=6, reuse_len=0, start_length=None),
         "long": dict(mem_len=20, reuse_len=0, start_length=None),
         "short_reuse": dict(mem_len=6, reuse_len=5, start_length=None),
         "long_reuse_grows": dict(mem_len=12, reuse_len=5, start_length=0),
         "long_grows": dict(mem_len=20, reuse_len=0, start_length=0)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_segments_carried_by_the_memory_match_the_reference(case, rng):
  """Three segments: each attends to the memory RecurrenceMemory kept, equal to the reference
  that keeps its own (NumPy, from zeros of start_length)."""
  settings = dict(CASES[case])
  start_length = settings.pop("start_length")
  config = tiny_config(**settings)
  model = XLNetModel(config)
  randomize_weights(model, seed=5)
  weights = model_weights_by_original_name(model)
  memory = RecurrenceMemory(config, BATCH, model.compute_dtype, start_length=start_length)
  start = config.mem_len if start_length is None else start_length
  reference_memory = [np.zeros([BATCH, start, config.d_model]) for _ in range(config.n_layer)]
  for index, pad_lengths in enumerate(([0, 2, 3], [1, 0, 0], [0, 0, 2])):
    inputs = _segment(rng, config, pad_lengths, with_query=index == 1)
    assert [tuple(layer.shape) for layer in memory.state] == (
        [(BATCH, reference_memory[0].shape[1], config.d_model)] * config.n_layer)
    outputs = model(dict(inputs, mems=list(memory.state)), training=False)
    memory.update(outputs["new_mems"])
    reference = xlnet_forward(weights, config, mems=reference_memory, **inputs)
    reference_memory = reference["new_mems"]
    np.testing.assert_allclose(outputs["sequence_output"].numpy(), reference["sequence_output"],
                               atol=TOLERANCE, rtol=0)
    if "target_mapping" in inputs:
      np.testing.assert_allclose(outputs["query_output"].numpy(), reference["query_output"],
                                 atol=TOLERANCE, rtol=0)
    for ours, theirs in zip(memory.state, reference_memory):
      np.testing.assert_allclose(ours.numpy(), theirs, atol=TOLERANCE, rtol=0)
    reused = config.reuse_len or LENGTH
    assert memory.state[0].shape[1] == min(start + (index + 1) * reused, config.mem_len)
  memory.reset()
  assert [tuple(layer.shape) for layer in memory.state] == (
      [(BATCH, start, config.d_model)] * config.n_layer)
  assert not any(np.any(layer.numpy()) for layer in memory.state)


def test_a_traced_step_reuses_its_trace_with_the_kept_memory(rng):
  config = tiny_config(mem_len=6, reuse_len=4)
  model = XLNetModel(config)
  memory = RecurrenceMemory(config, BATCH, model.compute_dtype)
  step = tf.function(lambda inputs, mems: tuple(model(dict(inputs, mems=list(mems)))["new_mems"]))
  for pad_lengths in ([0, 1, 2], [0, 0, 0], [2, 0, 1]):
    inputs = {key: tf.constant(value) for key, value in
              padded_pair_batch(rng, BATCH, LENGTH, config.n_token, pad_lengths).items()}
    memory.update(step(inputs, memory.state))
  assert step.experimental_get_tracing_count() == 1
  assert memory.signature() == tuple(
      tf.TensorSpec([BATCH, None, config.d_model], tf.float32) for _ in range(config.n_layer))


def test_no_memory_without_mem_len():
  memory = RecurrenceMemory(tiny_config(mem_len=0), BATCH)
  assert not memory.enabled
  assert memory.state == () and memory.zeros() == () and memory.signature() == ()
  assert memory.local_rows() == []


def test_a_variable_holds_the_memory_of_a_traced_step(rng):
  """Model.fit's form: read and assigned inside the step, kept in float32 under bfloat16."""
  config = tiny_config(mem_len=5, reuse_len=3)
  memory = RecurrenceMemory(config, BATCH, "bfloat16")
  with pytest.raises(ValueError, match=r"a variable of shape \[2, 3, 5, 32\] holds the memory"):
    memory.keep_in(tf.Variable(tf.zeros([2, 3, 4, 32])))
  memory.keep_in(tf.Variable(tf.zeros(memory.stacked_shape), trainable=False))
  segments = [rng.normal(size=[BATCH, LENGTH, config.d_model]).astype(np.float32)
              for _ in range(3)]

  @tf.function
  def step(layer_input):
    state = memory.state
    memory.update([next_memory(tf.cast(layer_input, state[0].dtype) * (index + 1), old,
                               config.reuse_len, config.mem_len)
                   for index, old in enumerate(state)])

  expected = [np.zeros([BATCH, 5, config.d_model]) for _ in range(config.n_layer)]
  for segment in segments:
    step(tf.constant(segment))
    as_bfloat16 = tf.cast(segment, tf.bfloat16).numpy().astype(np.float64)
    expected = [reference_next_memory(as_bfloat16 * (index + 1), old, 3, 5)
                for index, old in enumerate(expected)]
  assert memory.variable.dtype == tf.float32
  assert [layer.dtype for layer in memory.state] == [tf.bfloat16] * config.n_layer
  np.testing.assert_array_equal(memory.variable.numpy(), np.stack(expected))
  memory.reset()
  assert not np.any(memory.variable.numpy())


class _TwoReplicas:
  """A strategy's distributed values as TensorFlow lays them out (a tuple per layer of each
  replica's value), for two replicas on this worker."""

  def experimental_distribute_values_from_function(self, function):
    contexts = [type("Context", (), {"replica_id_in_sync_group": r})() for r in range(2)]
    return tuple(zip(*[function(context) for context in contexts]))

  def experimental_local_results(self, value):
    return tuple(value)


def test_each_replica_holds_its_rows_and_a_worker_saves_them_in_order(rng):
  config = tiny_config(mem_len=4)
  memory = RecurrenceMemory(config, 2, strategy=_TwoReplicas(), local_replicas=2)
  assert [[tuple(replica.shape) for replica in layer] for layer in memory.state] == (
      [[(2, 4, 32)] * 2] * config.n_layer)
  rows = [rng.normal(size=[4, 4, 32]).astype(np.float32) for _ in range(config.n_layer)]
  memory.load_rows(rows)
  for layer, saved in zip(memory.state, rows):
    np.testing.assert_array_equal(layer[0].numpy(), saved[:2])  # replica 0: rows 0, 1
    np.testing.assert_array_equal(layer[1].numpy(), saved[2:])  # replica 1: rows 2, 3
  for got, saved in zip(memory.local_rows(), rows):
    np.testing.assert_array_equal(got, saved)
  with pytest.raises(ValueError, match="2 layers of memory; got 1"):
    memory.load_rows(rows[:1])


def test_rows_round_trip_under_a_real_strategy(rng):
  config = tiny_config(mem_len=4)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  memory = RecurrenceMemory(config, BATCH, "bfloat16", strategy=strategy)
  assert not any(np.any(rows) for rows in memory.local_rows())
  rows = [tf.cast(rng.normal(size=[BATCH, 4, 32]), tf.bfloat16).numpy().astype(np.float32)
          for _ in range(config.n_layer)]
  memory.load_rows(rows)
  assert memory.state[0].dtype == tf.bfloat16
  for got, saved in zip(memory.local_rows(), rows):
    np.testing.assert_array_equal(got, saved)
  memory.reset()
  assert not any(np.any(rows) for rows in memory.local_rows())


def test_the_projected_memory_starts_as_zero_slots():
  config = tiny_config(mem_len=0)
  keys_values = RecurrenceMemory(config, BATCH).zero_keys_values(7)
  assert len(keys_values) == config.n_layer
  for keys, values in keys_values:
    assert keys.shape == values.shape == (BATCH, config.n_head, 7, config.d_head)
    assert not np.any(keys.numpy()) and not np.any(values.numpy())

  @tf.function(input_signature=[tf.TensorSpec([None, LENGTH], tf.int32)])
  def empty_shape(ids):
    memory = RecurrenceMemory(config, tf.shape(ids)[0], "bfloat16")
    keys, _ = memory.zero_keys_values(0)[0]
    return tf.shape(keys), keys.dtype == tf.bfloat16

  shape, is_bfloat16 = empty_shape(tf.zeros([5, LENGTH], tf.int32))
  assert shape.numpy().tolist() == [5, config.n_head, 0, config.d_head] and bool(is_bfloat16)
