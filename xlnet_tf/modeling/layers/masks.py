"""Attention masks of XLNet: pure functions, and the typed masks the layers take.

Convention inside the library: a boolean mask is True where a query may NOT attend a key
("blocked"). Shapes: B batch, T query length, M memory length, K = M + T key length,
P predictions, Q rows attending.

The backbone builds one `AttentionMasks` per call (the content stream's `RowMasks` and, with a
query stream, the query stream's) and hands it to every block; decoding steps build the
`RowMasks` of the rows they run (TwoStreamBlock.rows_at_positions).

The public inputs: `input_mask` 1 = real token, 0 = padding; `perm_mask` 1 =
position i may not attend position j. Memory can always be attended to, unless `memory_mask`
(1 = real, 0 = padding) says a memory slot is padding.
"""

import dataclasses
from typing import Optional

import tensorflow as tf


@dataclasses.dataclass(frozen=True, eq=False)
class RowMasks:
  """What rows [B, Q] attending to K keys may read, and where the rows stand.

  blocked: bool [B or 1, Q, K], True = the row may not attend the key; None: nothing blocked.
  segment_mismatch: bool [B, Q, K], True = row and key lie in different segments; None: no
    segment term.
  positions: int32 [B, Q], the content position each row stands at (the query stream's rows,
    a decoding step's rows); None: the content stream's rows 0..T-1.
  valid: [B, Q], 0 = a padded row, whose attention output is zeroed; None: every row counts.

  Compared by identity (eq=False): `==` on tensors is element-wise, not a truth value.
  """
  blocked: Optional[tf.Tensor] = None
  segment_mismatch: Optional[tf.Tensor] = None
  positions: Optional[tf.Tensor] = None
  valid: Optional[tf.Tensor] = None

  def __post_init__(self):
    # Arrays become tensors, as Keras converts the array arguments of a layer call (this
    # object is one opaque argument to Keras); tensors pass unchanged, adding no op to a graph.
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if value is not None:
        object.__setattr__(self, field.name, tf.convert_to_tensor(value))


@dataclasses.dataclass(frozen=True, eq=False)
class AttentionMasks:
  """The masks of one backbone call, the same for every layer: the content stream's rows
  (positions 0..T-1) and, when the call has a query stream, its rows at their positions."""
  content: RowMasks = dataclasses.field(default_factory=RowMasks)
  query: Optional[RowMasks] = None

  @property
  def with_segments(self) -> bool:
    """Whether the attention has a segment term (the call was given segment_ids)."""
    return self.content.segment_mismatch is not None


def causal_mask(query_length, memory_length, same_length: bool = False):
  """bool [T, K]: key j lies in query i's future (j > M + i).

  With `same_length`, query i also loses the keys j < i, so every query sees M + 1 keys
  (Transformer-XL's evaluation setting). Example, T = 3, M = 2 (1 = blocked)::

      same_length=False      same_length=True
      0 0 0 1 1              0 0 0 1 1
      0 0 0 0 1              1 0 0 0 1
      0 0 0 0 0              1 1 0 0 0
  """
  query_index = tf.range(query_length)[:, None]  # [T, 1]
  key_index = tf.range(memory_length + query_length)[None, :]  # [1, K]
  blocked = key_index > memory_length + query_index  # [T, K]
  if same_length:
    blocked = tf.logical_or(blocked, key_index < query_index)
  return blocked


def attention_masks(query_length, memory_length, attn_type: str = "bi",
                    same_length: bool = False, input_mask=None, perm_mask=None,
                    memory_mask=None):
  """Masks of the two streams, or (None, None) when nothing is masked.

  Args:
    query_length, memory_length: T and M.
    attn_type: 'bi' (no causal mask) or 'uni'.
    same_length: see `causal_mask` ('uni' only, as in the original).
    input_mask: [B, T], 1 = real token, 0 = padding. Padding keys are blocked for every query.
    perm_mask: [B, T, T], 1 = query i may not attend key j.
    memory_mask: [B, M], 1 = a real memory slot, 0 = padding (blocked for every query), as
      the memory of a left-padded batch holds it (generation caches left-padded prompts).

  Returns:
    (content_mask, query_mask), bool [B or 1, T, K]. The query stream's mask is the combined
    mask; the content stream's is the same with the diagonal opened (a token sees itself).

  Example, T = 3, M = 0, perm_mask from the order 2 -> 0 -> 1 (i sees j iff j comes earlier):

      query_mask   content_mask
      1 1 0        0 1 0
      0 1 0        0 0 0
      1 1 1        1 1 0

  With M = 2 and memory_mask [0, 1] (the first memory slot is padding), every row of both
  masks starts with 1 0.
  """
  blocked = None
  if attn_type == "uni":
    blocked = causal_mask(query_length, memory_length, same_length)[None]  # [1, T, K]
  data_blocked = None
  if input_mask is not None:
    # expand_dims, not [:, None, :]: LiteRT's builtin strided slice takes no inner new axis.
    data_blocked = tf.expand_dims(tf.equal(input_mask, 0), 1)  # [B, 1, T]
  if perm_mask is not None:
    permuted = tf.not_equal(perm_mask, 0)  # [B, T, T]
    data_blocked = permuted if data_blocked is None else tf.logical_or(data_blocked, permuted)
  memory_blocked = None
  if memory_mask is not None:
    memory_blocked = tf.expand_dims(tf.equal(memory_mask, 0), 1)  # [B, 1, M]
  if data_blocked is not None or memory_blocked is not None:
    batch = tf.shape(data_blocked if data_blocked is not None else memory_blocked)[0]
    data_blocked = _blocked_or_open(data_blocked, batch, query_length, query_length)
    memory_blocked = _blocked_or_open(memory_blocked, batch, query_length, memory_length)
    data_blocked = tf.concat([memory_blocked, data_blocked], axis=-1)  # [B, T, K]
    blocked = data_blocked if blocked is None else tf.logical_or(blocked, data_blocked)
  if blocked is None:
    return None, None
  # i == j + M compared on ranges, not tf.eye(dtype=bool): its MatrixDiag becomes an ONNX
  # EyeLike on booleans, which ONNX Runtime has no kernel for.
  positions = tf.range(query_length)
  self_position = tf.equal(positions[:, None],
                           tf.range(query_length + memory_length)[None, :] - memory_length
                           )[None]  # [1, T, K]
  content_mask = tf.logical_and(blocked, tf.logical_not(self_position))
  return content_mask, blocked


def _blocked_or_open(blocked, batch, query_length, key_length):
  """`blocked` [B or 1, 1 or T, L] broadcast to [B, T, L]; None: nothing blocked."""
  shape = tf.stack([batch, query_length, key_length])
  return tf.zeros(shape, tf.bool) if blocked is None else tf.broadcast_to(blocked, shape)


def segment_mismatch(segment_ids, memory_length):
  """bool [B, T, K]: query i and key j lie in different segments (memory counts as segment 0)."""
  batch = tf.shape(segment_ids)[0]
  key_segments = tf.concat(
      [tf.zeros(tf.stack([batch, memory_length]), segment_ids.dtype), segment_ids], axis=1)
  return tf.not_equal(tf.expand_dims(segment_ids, 2), tf.expand_dims(key_segments, 1))


def prediction_positions(target_mapping):
  """From one-hot target_mapping [B, P, T]: (positions int32 [B, P], valid float [B, P]).

  A row of zeros (a padded prediction slot) gets position 0 and valid 0; its query-stream
  attention output is zero, as in the original, which maps outputs back through the mapping.
  """
  positions = tf.argmax(target_mapping, axis=-1, output_type=tf.int32)
  valid = tf.reduce_sum(target_mapping, axis=-1)
  return positions, valid
