"""Rows at positions over a key/value cache written in place: the step behind cached generation
(xlnet_tf.inference.generation) and cached infilling (xlnet_tf.inference.infilling_steps).

A text's slots 0..C-1 each hold, per layer, the keys and values of a content state. A step
runs a few rows through the layers, each standing at its own slot
(TwoStreamBlock.rows_at_positions: the query stream's relative attention): one new content
row per text, whose keys and values the step enters into the cache at its slot (later rows
attend to it), and query rows that predict (XLNet's query stream; none for a 'uni' model,
whose content row predicts the next token).

Generation's cache (KeyValueCache) lives in variables and a step writes only its new entries,
[B, N, 1, H] per layer. Passing the cache in and out as tensors, as the previous generation
step did, copies the whole cache at every write, and attending over "the cache followed by
this step's keys" concatenated it again: at base size, batch 8, those copies were half of a
step (docs/performance.md). The entries go in through one XLA-compiled dynamic-update-slice
per variable (`_enter`), in place, even in a step the graph executor runs: the graph
executor's own strided-slice (or scatter) assignment puts the variable in copy-on-read mode,
and every later read copies it (24 writes and reads of batch-8 caches: 12.7 ms, against 0.46
ms compiled). Infilling's blanks sit at different slots per text: its cache (BlendedCache) is
tensors, blended.

Both caches keep the keys transposed, [B, N, H, C] (`cache_layout`), the values as the
backbone makes them, [B, N, C, H]: the step's score product then reads the keys as stored,
where XLA's CPU dot transposed [B, N, C, H] keys first at every step
(ops.attention_probabilities.attended_rows).

Shapes: B batch, C slots, P rows (1 content row + Q query rows), L layers, N heads, H head
size, D d_model.
"""

from typing import Sequence

import tensorflow as tf
from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice  # as Keras' TF backend

from xlnet_tf.modeling.layers import masks as mask_lib
from xlnet_tf.modeling.memory import RecurrenceMemory


def cache_layout(keys_values: Sequence):
  """L (keys, values) [B, N, T, H] as the backbone makes them -> the caches' layout, L (keys
  [B, N, H, T], values [B, N, T, H]) (module docstring)."""
  return [(tf.linalg.matrix_transpose(keys), values) for keys, values in keys_values]


@tf.function(autograph=False, reduce_retracing=True)  # one trace for prompts of any size
def _padded_cache_layout(keys_values, capacity: int, dtype):
  """cache_layout of keys_values [B, N, T, H] with C - T zero slots after the T, in `dtype`."""
  def padded(tensor, slot_axis):
    padding = [[0, 0]] * 4
    padding[slot_axis] = [0, capacity - tf.shape(tensor)[slot_axis]]
    return tf.pad(tf.cast(tensor, dtype), padding)
  return [(padded(keys, 3), padded(values, 2)) for keys, values in cache_layout(keys_values)]


@tf.function(jit_compile=True, autograph=False)
def _enter(variable, entries, slot, slot_axis: int):
  """Slots slot..slot + T - 1 along `slot_axis` (2 or 3) of variable [B, N, ., .] = entries,
  in place (module docstring)."""
  start = [0, 0, 0, 0]
  start[slot_axis] = slot
  variable.assign(dynamic_update_slice(variable.read_value(), tf.cast(entries, variable.dtype),
                                       tf.stack(start)))


class KeyValueCache:
  """Each layer's (keys [B, N, H, C], values [B, N, C, H]) in variables of the model's
  compute dtype (`cache_layout`): the recurrence memory in the form attention reads it, made
  from a prompt's entries (`with_prefix`), written a slot at a time."""

  def __init__(self, layers: Sequence):
    """`layers`: L (keys, values) in the cache's layout."""
    self.layers = [tuple(tf.Variable(tensor, trainable=False) for tensor in pair)
                   for pair in layers]

  @classmethod
  def of_variables(cls, layers: Sequence):
    """The cache over existing variables (inside a tf.function that takes `layers`)."""
    cache = cls.__new__(cls)
    cache.layers = [tuple(pair) for pair in layers]
    return cache

  @classmethod
  def with_prefix(cls, keys_values: Sequence, capacity: int, dtype):
    """C slots per layer: slots 0..T-1 from keys_values, L (keys, values) [B, N, T, H], the
    rest zeros (a step's mask must hide the slots not yet written). Each variable is made
    from its padded entries: one pass over the cache (zeros first, then the prefix entered,
    took 2.7x as long: 50 against 18 ms at base, batch 8, 192 slots)."""
    return cls(_padded_cache_layout(keys_values, capacity, dtype))

  @property
  def capacity(self) -> int:
    return int(self.layers[0][1].shape[2])

  def write(self, layer: int, slots, entered, written=None) -> None:
    """Enters entered = (keys, values) [B, N, 1, H] at slots int32 [B] of `layer`, in place.
    Every text writes the same slot (generation's): one dynamic-update-slice per variable."""
    if written is not None:
      raise ValueError("KeyValueCache writes every text's slot; use BlendedCache for `written`")
    (keys, values), ((new_keys, new_values),) = self.layers[layer], cache_layout([entered])
    _enter(keys, new_keys, slots[0], 3)
    _enter(values, new_values, slots[0], 2)


class BlendedCache:
  """The same interface over tensors, for texts that write different slots (infilling's
  blanks): each write blends the entries in, returning a new cache tensor (a copy)."""

  def __init__(self, layers: Sequence):
    """`layers`: L (keys, values) in the cache's layout (`cache_layout`)."""
    self.layers = [tuple(pair) for pair in layers]

  @property
  def capacity(self):
    return tf.shape(self.layers[0][1])[2]

  def write(self, layer: int, slots, entered, written=None) -> None:
    """Enters entered [B, N, 1, H] at slots int32 [B] where written [B] is 1 (default all)."""
    mask = tf.one_hot(slots, self.capacity)  # [B, C]
    if written is not None:
      mask *= tf.cast(written, mask.dtype)[:, None]
    # the slot axis: 3 of the keys, 2 of the values
    slot_masks = (mask[:, None, None, :], mask[:, None, :, None])
    self.layers[layer] = tuple(
        cached * (1 - tf.cast(slot_mask, cached.dtype))
        + tf.cast(new, cached.dtype) * tf.cast(slot_mask, cached.dtype)
        for cached, new, slot_mask in zip(self.layers[layer], cache_layout([entered])[0],
                                          slot_masks))


def outputs_with_keys_values(backbone, inputs):
  """The backbone's outputs for `inputs` with "keys_values" added: each layer's (keys, values)
  [B, N, T, H] of the T tokens' content states, what a call over a zero-length cache returns
  (a cache's prefix)."""
  batch = tf.shape(inputs["input_ids"])[0]
  empty = RecurrenceMemory(backbone.config, batch, backbone.compute_dtype).zero_keys_values(0)
  inputs = dict(inputs, memory_mask=tf.zeros(tf.stack([batch, 0])))
  return backbone(inputs, training=False, memory_keys_values=empty)


def run_rows(model, cache: KeyValueCache, content_ids, content_slots, blocked, position_keys,
             *, query_slots=None, written=None, segment_mismatch=None):
  """Runs one new content row per text and the query rows through every layer.

  Args:
    model: an XLNetPretrainer.
    cache: a KeyValueCache (every text writes the same slot) or a BlendedCache; the content
      row's keys and values are entered at its slot (where `written` is 1) before each layer
      attends.
    content_ids: int32 [B], the token of the content row; content_slots int32 [B], its slot.
    blocked: bool [B, P, C], True = the row may not attend to the slot (rows: the content row,
      then the query rows).
    position_keys: list of L [1, N, R, H], backbone.layer_position_keys(C, C), or (1, C) when
      no row may attend to a later slot (generation's: the distances C, ..., 0).
    query_slots: int32 [B, Q] where the query rows stand (mask_emb at the first layer), or None.
    written: [B] 0/1 or None (all 1).
    segment_mismatch: bool [B, C, C] of the text (different segment), or None.

  Returns (content [B, 1, D], query [B, Q, D] or None): the last layer's rows.
  """
  backbone = model.backbone
  dtype = model.compute_dtype
  content = tf.cast(tf.gather(backbone.word_embedding, content_ids[:, None]), dtype)  # [B, 1, D]
  slots, query = content_slots[:, None], None
  if query_slots is not None:
    query = tf.tile(tf.cast(backbone.mask_emb, dtype),
                    tf.stack([tf.shape(query_slots)[0], tf.shape(query_slots)[1], 1]))
    slots = tf.concat([slots, query_slots], axis=1)  # [B, P]
  mismatch = None
  if segment_mismatch is not None:
    mismatch = tf.gather(segment_mismatch, slots, batch_dims=1)
  row_masks = mask_lib.RowMasks(blocked=blocked, segment_mismatch=mismatch, positions=slots)
  for index, block in enumerate(backbone.blocks):
    cache.write(index, content_slots, block.attention.project_keys_values(content), written)
    rows = content if query is None else tf.concat([content, query], axis=1)
    rows = block.rows_at_positions(
        rows, row_masks, cache.layers[index], position_keys[index],
        backbone.layer_biases(index, mismatch is not None), content_length=cache.capacity,
        keys_transposed=True)
    content, query = rows[:, :1], (None if query is None else rows[:, 1:])
  return content, query


def blocked_after(visible, last_slots, rows: int):
  """bool [B, rows, C]: every row may attend to the visible slots (visible [B, C], 1 = a real
  token) up to last_slots int32 [B], nothing after."""
  capacity = tf.shape(visible)[1]
  seen = tf.logical_and(tf.not_equal(visible, 0), tf.range(capacity)[None] <= last_slots[:, None])
  return tf.tile(tf.logical_not(seen)[:, None], tf.stack([1, rows, 1]))
