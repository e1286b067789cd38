"""Multi-head attention with Transformer-XL relative positions and XLNet's two streams.

Shapes: B batch, T content length, P query-stream length (predictions), M memory length,
K = M + T keys, R relative positions, D d_model, N heads, H head size.

score(i, j) = [ (q_i + r_w_bias) . k_j                      content term
              + (q_i + r_r_bias) . r_{(M+i)-j}               position term (rel-shift)
              + (q_i + r_s_bias) . seg_embed[s_ij] ]         segment term, s_ij = 0 same / 1 not
              / sqrt(H)
Masked scores are set to -1e30 in float32, so the softmax is safe under 16-bit policies; a
row with every key masked attends uniformly, as the original's `score - 1e30 * mask` does.
"""

import keras
import tensorflow as tf

from xlnet_tf.layers import dropout as dropout_lib
from xlnet_tf.layers.compiled import compiled_with_gradient
from xlnet_tf.layers.dropout import FastDropout
from xlnet_tf.layers.normalization import compiled_residual_layer_norm

MASKED_SCORE = -1e30


def rel_shift(position_score, key_length):
  """Moves row i of [..., L, W] left by L - i and keeps K columns: [..., L, K].

  For the content stream's [B, N, T, R] scores: column p of the input holds distance K - p;
  after the shift, column j of row i holds the distance (M + i) - j. Done with reshapes only
  (no gather): reading the [L, W] block as [W, L] and dropping the first row offsets each
  following row by one more element. Leading dimensions are kept (row blocks, see
  `position_row_blocks`).
  """
  shape = tf.shape(position_score)
  leading, length, positions = shape[:-2], shape[-2], shape[-1]
  shifted = tf.reshape(position_score, tf.concat([leading, [positions, length]], 0))
  shifted = shifted[..., 1:, :]
  shifted = tf.reshape(shifted, tf.concat([leading, [length, positions - 1]], 0))
  return shifted[..., :key_length]


def rel_shift_adjoint(gradient, positions):
  """The adjoint (gradient) of `rel_shift`: [..., L, K] -> [..., L, W], W = positions.

  The reshapes of `rel_shift` in reverse: pad each row to W - 1 columns, prepend L zeros to the
  flattened [L (W - 1)] block and read it as [L, W]. As plain TensorFlow ops these are copies;
  compiled by XLA, its fused index arithmetic divides by W - 1 for every element (measured on
  [2, 12, 512, 512] bfloat16: 4.7 ms here against 20 ms compiled).
  """
  shape = tf.shape(gradient)
  leading, length, key_length = shape[:-2], shape[-2], shape[-1]
  rank = gradient.shape.rank
  padded = tf.pad(gradient, [[0, 0]] * (rank - 1) + [[0, positions - 1 - key_length]])
  flat = tf.reshape(padded, tf.concat([leading, [length * (positions - 1)]], 0))
  flat = tf.pad(flat, [[0, 0]] * (rank - 2) + [[length, 0]])
  return tf.reshape(flat, tf.concat([leading, [length, positions]], 0))


# Content-stream rows per block of the position-score matmul (see `position_row_blocks`).
POSITION_BLOCK_ROWS = 128


def position_row_blocks(content_length, key_length, positions):
  """How many row blocks the content stream's position scores are computed in: 1, or
  T / POSITION_BLOCK_ROWS for the 'bi' layout (R = K + T) when that divides T.

  Row i reads T consecutive of the R = K + T position columns ([T - i, T - i + K)), so the
  rows of a block of L need only L + K of them: with blocks of 128 rows the [T, R] matmul
  shrinks to T (128 + K) (measured, base 2x512: 3.2 ms per layer instead of 5.1 ms). Static
  lengths only; anything else (the 'uni' layout, dynamic shapes) uses one block.
  """
  rows = POSITION_BLOCK_ROWS
  if None in (content_length, key_length, positions) or positions != key_length + content_length:
    return 1
  if content_length <= rows or content_length % rows:
    return 1
  return content_length // rows


def blocked_position_keys(position_keys, content_length, key_length):
  """[.., N, R, H] position keys -> [.., N, blocks, L + K, H] (`position_row_blocks`): block b
  (rows [bL, (b+1)L), L = T / blocks) takes positions [T - (b+1)L, T - bL + K), so that
  `rel_shift` of its [L, L + K] scores is the rows' part of the full shift. One block:
  [.., N, 1, R, H]. Lengths are static (None: one block)."""
  blocks = position_row_blocks(content_length, key_length, position_keys.shape[-2])
  if blocks == 1:
    return position_keys[..., None, :, :]
  rows = content_length // blocks
  starts = [content_length - (b + 1) * rows for b in range(blocks)]
  width = rows + key_length

  @tf.custom_gradient
  def windows(position_keys):
    def gradient(upstream):  # each window's gradient padded back into place, summed
      positions = tf.shape(position_keys)[-2]
      rank = upstream.shape.rank
      return tf.add_n([
          tf.pad(window, [[0, 0]] * (rank - 3) + [[start, positions - start - width], [0, 0]])
          for start, window in zip(starts, tf.unstack(upstream, axis=-3))])
    # TensorFlow's own gradient of the slices (StridedSliceGrad per window) took 10 ms per
    # layer at base 2x512 in bfloat16; these pads and one sum, under 1 ms.
    return tf.stack([position_keys[..., start:start + width, :] for start in starts],
                    axis=-3), gradient
  return windows(position_keys)


def gather_relative_scores(position_score, query_positions, content_length, key_length):
  """Query-stream counterpart of `rel_shift` for queries at arbitrary positions.

  position_score [B, N, P, R], query_positions int32 [B, P] -> [B, N, P, K], where column j of
  prediction p holds distance (M + pos_p) - j, found in column T - pos_p + j.
  """
  columns = (content_length - query_positions)[:, :, None] + tf.range(key_length)[None, None]
  # With 'uni' (R = K + 1) future keys fall past the end; they are masked, so any column does.
  columns = tf.minimum(columns, tf.shape(position_score)[3] - 1)
  columns = tf.broadcast_to(columns[:, None], tf.concat([tf.shape(position_score)[:3],
                                                         [key_length]], 0))
  return tf.gather(position_score, columns, batch_dims=3)


def _scaled_scores(content_score, position_score, segment_score, *, key_length,
                   content_length, scale, query_positions=None, mismatch=None, mask=None):
  """The float32 scores the softmax sees: [B, N, Q, K]."""
  if query_positions is None:  # [B, N, blocks, L, W] -> [B, N, T, K]
    position_score = rel_shift(position_score, key_length)
    position_score = tf.reshape(position_score, tf.shape(content_score))
  else:
    position_score = gather_relative_scores(position_score, query_positions, content_length,
                                            key_length)
  # Summed in float32: one fused pass from the 16-bit matmul outputs to the float32 scores
  # (summing in bfloat16 first made XLA write the sum out, and round it, before the softmax).
  score = tf.cast(content_score, tf.float32) + tf.cast(position_score, tf.float32)
  if segment_score is not None:
    segment_score = tf.cast(segment_score, tf.float32)
    score += tf.where(mismatch[:, None], segment_score[..., 1:], segment_score[..., :1])
  score *= scale
  if mask is not None:
    score = tf.where(mask[:, None], tf.constant(MASKED_SCORE, tf.float32), score)
  return score


def attention_probabilities(content_score, position_score, segment_score=None, *, key_length,
                            content_length, scale, query_positions=None, mismatch=None,
                            mask=None, dropout_threshold=0, dropout_seed=None):
  """Scores -> attention probabilities [B, N, Q, K], in the scores' dtype.

  content_score [B, N, Q, K]; position_score: for the content stream [B, N, blocks, L, W]
  row blocks (see `position_row_blocks`; one block: [B, N, 1, T, R]), rel-shifted here; for
  the query stream [B, N, P, R], gathered at `query_positions`;
  segment_score [B, N, Q, 2] (same, different segment) picked by `mismatch` [B, Q, K]; `mask`
  bool [B or 1, Q, K], True = blocked. The softmax runs in float32. Dropout with
  `dropout_threshold` / 2^32 (see layers.dropout) when a seed is given.
  """
  return _probabilities_forward(
      content_score, position_score, segment_score, key_length=key_length,
      content_length=content_length, scale=scale, query_positions=query_positions,
      mismatch=mismatch, mask=mask, dropout_threshold=dropout_threshold,
      dropout_seed=dropout_seed)[0]


def _probabilities_forward(content_score, position_score, segment_score=None, *,
                           dropout_threshold=0, dropout_seed=None, **settings):
  """attention_probabilities, plus what its gradient needs: the probabilities before dropout
  (in the scores' dtype, so bfloat16 under mixed precision), the dropout keep mask (or None)
  and the position scores' shape."""
  dtype = content_score.dtype
  probability = tf.nn.softmax(_scaled_scores(content_score, position_score, segment_score,
                                             **settings), axis=-1)
  saved_shape = tf.shape(position_score)
  if dropout_seed is None:
    output = tf.cast(probability, dtype)
    return output, (output, None, saved_shape)
  keep = dropout_lib.keep_mask(tf.shape(probability), dropout_seed, dropout_threshold)
  dropped = dropout_lib.apply_keep_mask(probability, keep, dropout_threshold)
  return tf.cast(dropped, dtype), (tf.cast(probability, dtype), keep, saved_shape)


def _probabilities_backward(upstream, saved, input_dtypes, *, dropout_threshold=0,
                            dropout_seed=None, key_length, content_length, scale,
                            query_positions=None, mismatch=None, mask=None):
  """Gradients of attention_probabilities for its scores: the softmax gradient
  p * (g - sum(p * g)), zero at masked scores, then the adjoints of the shift (or gather) and of
  the segment pick."""
  del dropout_seed  # the keep mask is saved
  probability, keep, position_shape = saved
  gradient = tf.cast(upstream, tf.float32)
  if keep is not None:
    gradient = dropout_lib.apply_keep_mask(gradient, keep, dropout_threshold)
  probability = tf.cast(probability, tf.float32)
  score_gradient = probability * (
      gradient - tf.reduce_sum(gradient * probability, axis=-1, keepdims=True))
  if mask is not None:
    score_gradient = tf.where(mask[:, None], tf.zeros_like(score_gradient), score_gradient)
  score_gradient *= scale
  position_gradient = None  # the shift's adjoint: _finish_probabilities_backward
  if query_positions is not None:
    with tf.GradientTape() as tape:  # the gather is linear: its adjoint, a scatter
      position_score = tf.zeros(position_shape, tf.float32)
      tape.watch(position_score)
      gathered = gather_relative_scores(position_score, query_positions, content_length,
                                        key_length)
    position_gradient = tape.gradient(gathered, position_score, output_gradients=score_gradient)
  gradients = [score_gradient, position_gradient]
  if len(input_dtypes) == 3:  # the segment scores were given
    different = tf.broadcast_to(mismatch[:, None], tf.shape(score_gradient))
    zeros = tf.zeros_like(score_gradient)
    gradients.append(tf.stack(
        [tf.reduce_sum(tf.where(different, zeros, score_gradient), axis=-1),
         tf.reduce_sum(tf.where(different, score_gradient, zeros), axis=-1)], axis=-1))
  return [None if g is None else tf.cast(g, dtype) for g, dtype in zip(gradients, input_dtypes)]


def _finish_probabilities_backward(gradients, saved, *, query_positions=None, **unused):
  """The content stream's position-score gradient: the shift's adjoint of the score gradient
  (in the scores' dtype: moving entries commutes with the cast), as plain TensorFlow ops."""
  del unused
  if query_positions is not None:
    return gradients
  score_gradient, _, *segment_gradient = gradients
  _, _, position_shape = saved
  blocks_gradient = tf.reshape(score_gradient,
                               tf.concat([position_shape[:-1], tf.shape(score_gradient)[-1:]], 0))
  position_gradient = rel_shift_adjoint(blocks_gradient, position_shape[-1])
  return [score_gradient, position_gradient, *segment_gradient]


# The shift, masking, softmax and dropout as one kernel, and its gradient as another, instead of
# a dozen passes over [B, N, Q, K] around the oneDNN matmuls (see layers.compiled). Measured
# (base, 4x128): TensorFlow's gradient of the compiled forward took 3x the forward's time.
_compiled_attention_probabilities = compiled_with_gradient(
    _probabilities_forward, _probabilities_backward, _finish_probabilities_backward)


def _heads_first(tensor):
  """[B, L, N, H] -> [B, N, L, H]."""
  return tf.transpose(tensor, [0, 2, 1, 3])


@keras.saving.register_keras_serializable(package="xlnet_tf")
class RelativeMultiHeadAttention(keras.layers.Layer):
  """Relative multi-head attention for XLNet's content stream and, optionally, its query stream.

  Weights (original names): q, k, v, r, o kernels [D, N, H] and a post-LayerNorm (eps 1e-12).
  The attention biases (r_w_bias, r_r_bias, r_s_bias, seg_embed) are call arguments: the model
  owns them because the original ties them across layers unless `untie_r`.

  Both streams use the same weights. Keys and values come from memory + content only; the
  query stream contributes queries (it never serves as keys).
  """

  def __init__(self, n_head: int, d_head: int, dropout: float = 0.0, dropatt: float = 0.0,
               init_std: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.n_head = n_head
    self.d_head = d_head
    self.dropout = dropout
    self.dropatt = dropatt
    self.init_std = init_std
    self.scale = 1.0 / (d_head ** 0.5)
    # Debugging/summaries: when True, eager calls keep the content stream's attention
    # probabilities [B, N, T, K] in `last_attention`.
    self.capture_attention = False
    self.last_attention = None
    self.output_dropout = FastDropout(dropout)
    self.attention_dropout = FastDropout(dropatt)
    self.layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, dtype="float32",
                                                      name="LayerNorm")

  def build(self, input_shape):
    d_model = input_shape[-1]
    initializer = keras.initializers.RandomNormal(stddev=self.init_std)
    kernel_shape = (d_model, self.n_head, self.d_head)
    self.query_kernel = self.add_weight(name="q", shape=kernel_shape, initializer=initializer)
    self.key_kernel = self.add_weight(name="k", shape=kernel_shape, initializer=initializer)
    self.value_kernel = self.add_weight(name="v", shape=kernel_shape, initializer=initializer)
    self.position_kernel = self.add_weight(name="r", shape=kernel_shape,
                                           initializer=initializer)
    self.output_kernel = self.add_weight(name="o", shape=kernel_shape, initializer=initializer)
    self.layer_norm.build((None, None, d_model))
    self.built = True

  def call(self, content, position_encoding, r_w_bias, r_r_bias, *, memory=None,
           content_mask=None, segment_mismatch=None, r_s_bias=None, seg_embed=None,
           query=None, query_positions=None, query_valid=None, query_mask=None,
           query_segment_mismatch=None, training=False):
    """Attends from the content stream and, if `query` is given, from the query stream.

    Args:
      content: [B, T, D] content stream h.
      position_encoding: [1 or B, R, D] from `relative_position_encoding`.
      r_w_bias, r_r_bias, r_s_bias: [N, H]; seg_embed: [2, N, H] (same, different segment).
      memory: [B, M, D] or None, cached states prepended to the keys and values.
      content_mask: bool [B or 1, T, K], True = blocked, or None.
      segment_mismatch: bool [B, T, K] or None (no segment term).
      query: [B, P, D] query stream g, or None.
      query_positions: int32 [B, P], the position each query-stream row predicts.
      query_valid: [B, P], 0 for padded prediction slots (their attention output is zeroed).
      query_mask, query_segment_mismatch: the rows of the full masks at `query_positions`,
        bool [B or 1, P, K].

    Returns:
      (content_output [B, T, D], query_output [B, P, D] or None).
    """
    dtype = self.compute_dtype
    r_w_bias, r_r_bias = tf.cast(r_w_bias, dtype), tf.cast(r_r_bias, dtype)
    if segment_mismatch is not None:
      r_s_bias, seg_embed = tf.cast(r_s_bias, dtype), tf.cast(seg_embed, dtype)
    keys_values_input = content if memory is None else tf.concat(
        [tf.cast(memory, content.dtype), content], axis=1)  # [B, K, D]
    key_length = tf.shape(keys_values_input)[1]
    content_length = tf.shape(content)[1]
    # Scores and the weighted sum are batched matmuls over [B, N, L, H] ("heads first"):
    # transposing q, k, v and r once is cheaper than the transposes einsum makes per product.
    # The kernels both streams use are read once (one cast to the compute dtype under mixed
    # precision): their gradient is then summed in that dtype and cast back once.
    query_kernel, output_kernel = self.query_kernel.value, self.output_kernel.value
    keys = _heads_first(tf.einsum("bkd,dnh->bknh", keys_values_input, self.key_kernel))
    values = _heads_first(tf.einsum("bkd,dnh->bknh", keys_values_input, self.value_kernel))
    position_keys = _heads_first(tf.einsum("brd,dnh->brnh", tf.cast(position_encoding, dtype),
                                           self.position_kernel))  # [1 or B, N, R, H]
    segment_keys = None
    if segment_mismatch is not None:
      segment_keys = tf.transpose(seg_embed, [1, 0, 2])[None]  # [1, N, 2, H]

    content_position_keys = blocked_position_keys(position_keys, content.shape[1],
                                                  keys_values_input.shape[1])

    def attend(queries, mask, mismatch, positions):
      queries = _heads_first(queries)  # [B, N, Q, H]
      content_score = tf.matmul(queries + r_w_bias[:, None], keys, transpose_b=True)
      position_queries = queries + r_r_bias[:, None]
      if positions is None:  # row blocks [B, N, blocks, L, W]
        blocks = content_position_keys.shape[-3]
        position_queries = tf.reshape(position_queries, tf.concat(
            [tf.shape(queries)[:2], [blocks, -1, self.d_head]], 0))
        position_score = tf.matmul(position_queries, content_position_keys, transpose_b=True)
      else:  # [B, N, P, R]
        position_score = tf.matmul(position_queries, position_keys, transpose_b=True)
      scores = [content_score, position_score]
      if mismatch is not None:
        scores.append(tf.matmul(queries + r_s_bias[:, None], segment_keys, transpose_b=True))
      dropout_kwargs = self.attention_dropout.fused_arguments(training)
      if self.capture_attention and positions is None and tf.executing_eagerly():
        # Keep the probabilities before dropout, then drop as the compiled region would.
        probability = attention_probabilities(
            *scores, key_length=key_length, content_length=content_length, scale=self.scale,
            mismatch=mismatch, mask=mask)
        self.last_attention = probability
        if dropout_kwargs:
          probability = dropout_lib.dropout(probability, dropout_kwargs["dropout_seed"],
                                            dropout_kwargs["dropout_threshold"])
      else:
        probability = _compiled_attention_probabilities(
            *scores, key_length=key_length, content_length=content_length, scale=self.scale,
            query_positions=positions, mismatch=mismatch, mask=mask,
            keep_for_gradient=bool(training), **dropout_kwargs)
      return tf.transpose(tf.matmul(probability, values), [0, 2, 1, 3])  # [B, Q, N, H]

    def project_out(stream, attended):
      projected = tf.einsum("bqnh,dnh->bqd", attended, output_kernel)
      return compiled_residual_layer_norm(
          projected, stream, self.layer_norm.gamma.value, self.layer_norm.beta.value,
          epsilon=self.layer_norm.epsilon, keep_for_gradient=bool(training),
          **self.output_dropout.fused_arguments(training))

    content_queries = tf.einsum("btd,dnh->btnh", content, query_kernel)
    content_output = project_out(
        content, attend(content_queries, content_mask, segment_mismatch, None))
    if query is None:
      return content_output, None
    stream_queries = tf.einsum("bpd,dnh->bpnh", query, query_kernel)
    attended = attend(stream_queries, query_mask, query_segment_mismatch, query_positions)
    attended *= tf.cast(query_valid, dtype)[:, :, None, None]
    return content_output, project_out(query, attended)

  def get_config(self):
    return {**super().get_config(), "n_head": self.n_head, "d_head": self.d_head,
            "dropout": self.dropout, "dropatt": self.dropatt, "init_std": self.init_std}
