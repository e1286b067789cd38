"""The model calls behind xlnet_tf.infilling: one prediction step over a text with blanks.

perm (the permutation LM; bidirectional 'bi' backbone): a factorization order puts the context
first and the blanks after it. `perm_mask_for_ranks` writes such an order as the backbone's
perm_mask: a position may see a blank only if the blank comes earlier in the order (the
content stream also sees itself); the query stream at a blank predicts it from what that blank
may see. Two step implementations with the same numbers:
- `CachedPermSteps`: the context never sees a blank, so its content states, and the keys and
  values every layer reads of them, are the same at every step: one backbone call computes
  them. A step then runs only two kinds of rows through the layers: the blank filled last
  (its content state, which later blanks attend to, written into the key/value cache) and the
  query rows predicting the next blank(s); each row stands at its own position of the text
  (TwoStreamBlock.rows_at_positions, the query stream's relative attention).
- `RecomputedPermSteps`: the whole backbone over the whole text at every step (the reference).
mlm and clm steps are whole calls (their context states change with every filled blank).

Shapes: B batch, T length, Q query rows of a step, L layers, N heads, H head size, V vocabulary.
"""

import numpy as np
import tensorflow as tf

from xlnet_tf.inference import key_value_cache
from xlnet_tf.inference.compile_cache import compiled_for, decoding_function
from xlnet_tf.modeling.layers import masks as mask_lib

# A rank no blank reaches: blanks not yet filled are seen by nobody.
UNFILLED_RANK = 2 ** 30


# The step functions, each compiled once per model (compile_cache). reduce_retracing: after a
# few input shapes a function is traced for any length and batch (texts of every length would
# otherwise trace one each).

def _logits_function(model):
  return decoding_function(model, lambda inputs: model(inputs, training=False)["logits"],
                           reduce_retracing=True)


def _context_function(model):
  return decoding_function(model, lambda inputs: _context_pass(model.backbone, inputs),
                           reduce_retracing=True)


def _cached_step_function(model):
  return decoding_function(model, lambda *args: _cached_step(model, *args),
                           reduce_retracing=True)


def perm_mask_for_ranks(ranks, fill_mask):
  """float32 [B, T, T] perm_mask of a factorization order: position i may not attend to j
  when j is a blank whose rank is not below i's. ranks int [B, T]: 0 for the context, 1, 2, ...
  for the blanks in the order they are predicted (equal ranks: neither sees the other)."""
  ranks = np.asarray(ranks)
  blank = np.asarray(fill_mask).astype(bool)
  blocked = blank[:, None, :] & (ranks[:, None, :] >= ranks[:, :, None])
  return blocked.astype(np.float32)


def target_mapping_at(positions, valid, length):
  """float32 [B, Q, T]: one-hot rows at positions int [B, Q]; rows with valid 0 all zero."""
  mapping = np.zeros(positions.shape + (length,), np.float32)
  rows, slots = np.nonzero(valid)
  mapping[rows, slots, positions[rows, slots]] = 1.0
  return mapping


class RecomputedPermSteps:
  """Every step the whole backbone: the blanks filled so far are visible in their order, the
  rest hidden from everyone. A step: (ids [B, T] as filled so far, ranks [B, T], query
  positions / valid [B, Q], the blank filled last [B] and whether there is one [B]) ->
  logits [B, Q, V] (NumPy)."""

  def __init__(self, model, text):
    self.model, self.text = model, text
    self.call = compiled_for(model, _logits_function)

  def __call__(self, ids, ranks, query_positions, query_valid, new_positions, has_new):
    del new_positions, has_new  # the whole text is recomputed
    text = self.text
    inputs = {"input_ids": ids, "input_mask": text.input_mask,
              "perm_mask": perm_mask_for_ranks(ranks, text.fill_mask),
              "target_mapping": target_mapping_at(query_positions, query_valid, text.length)}
    if text.segment_ids is not None:
      inputs["segment_ids"] = text.segment_ids
    return self.call(inputs).numpy()


class CachedPermSteps:
  """Steps over the context's key/value cache (see the module docstring)."""

  def __init__(self, model, text):
    self.model, self.text = model, text
    backbone = model.backbone
    self.position_keys = backbone.layer_position_keys(text.length, text.length)
    context_ranks = np.where(text.fill_mask, UNFILLED_RANK, 0)
    self.keys_values = self._context_keys_values(
        text.masked_ids, perm_mask_for_ranks(context_ranks, text.fill_mask))
    visible = text.input_mask * (1 - text.fill_mask)  # real context tokens
    self.visible = visible.astype(np.float32)
    self.mismatch = None
    if text.segment_ids is not None:
      self.mismatch = mask_lib.segment_mismatch(tf.constant(text.segment_ids, tf.int32), 0)
    self.step = compiled_for(model, _cached_step_function)

  def _context_keys_values(self, ids, perm_mask):
    """Each layer's (keys, values) of the text with every blank hidden (cache layout)."""
    text = self.text
    inputs = {"input_ids": ids, "input_mask": text.input_mask, "perm_mask": perm_mask}
    if text.segment_ids is not None:
      inputs["segment_ids"] = text.segment_ids
    return compiled_for(self.model, _context_function)(inputs)

  def __call__(self, ids, ranks, query_positions, query_valid, new_positions, has_new):
    del query_valid  # invalid rows' logits are not read
    visible = np.where((ranks > 0) & (ranks < UNFILLED_RANK), 1.0, self.visible)
    new_ids = np.take_along_axis(ids, new_positions[:, None], axis=1)[:, 0].astype(np.int32)
    logits, self.keys_values = self.step(
        self.keys_values, tf.constant(visible, tf.float32), tf.constant(new_ids),
        tf.constant(new_positions, tf.int32), tf.constant(has_new, tf.float32),
        tf.constant(query_positions, tf.int32), self.position_keys, self.mismatch)
    return logits.numpy()


def _context_pass(backbone, inputs):
  """Each layer's (keys, values) of the content stream of `inputs` (the cache of a call with
  a zero-length memory holds exactly them), in the cache's layout
  (key_value_cache.cache_layout)."""
  outputs = key_value_cache.outputs_with_keys_values(backbone, inputs)
  return key_value_cache.cache_layout(outputs["keys_values"])


def _cached_step(model, keys_values, visible, new_ids, new_positions, has_new, query_positions,
                 position_keys, segment_mismatch):
  """(logits [B, Q, V] of the query rows, the cache with the new blank's keys and values)."""
  cache = key_value_cache.BlendedCache(keys_values)
  queries = tf.shape(query_positions)[1]
  blocked = tf.tile(tf.equal(visible, 0.0)[:, None], tf.stack([1, queries + 1, 1]))
  _, query = key_value_cache.run_rows(model, cache, new_ids, new_positions, blocked, position_keys,
                                  query_slots=query_positions, written=has_new,
                                  segment_mismatch=segment_mismatch)
  return model.lm_logits(query), cache.layers


class WholeTextSteps:
  """mlm and clm: one call over the text as it stands (`ids`: blanks filled so far, `mask_id`
  at the others) per step. mlm: the content stream at each query position predicts it; clm: the
  content stream at position p - 1 predicts p (left context only)."""

  def __init__(self, model, text):
    self.text = text
    self.next_token = model.lm_objective.consecutive_segments
    self.call = compiled_for(model, _logits_function)

  def __call__(self, ids, ranks, query_positions, query_valid, new_positions, has_new):
    del ranks, new_positions, has_new  # the text as it stands is all a step reads
    text = self.text
    inputs = {"input_ids": ids, "input_mask": text.input_mask}
    if text.segment_ids is not None:
      inputs["segment_ids"] = text.segment_ids
    if self.next_token:
      logits = self.call(inputs).numpy()  # [B, T, V]
      return np.take_along_axis(logits, (query_positions - 1)[:, :, None], axis=1)
    inputs["target_mapping"] = target_mapping_at(query_positions, query_valid, text.length)
    return self.call(inputs).numpy()
