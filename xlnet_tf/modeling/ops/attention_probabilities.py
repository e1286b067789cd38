"""The attention probabilities of XLNet as one compiled kernel, and its written-out gradient.

What it computes: from the three score products the layer makes with oneDNN matmuls (content
[B, N, Q, K], position [B, N, ., R], segment [B, N, Q, 2]), the rel-shift (or the query
stream's gather), the segment pick, the scale, the mask, the float32 softmax and dropout:
exactly `layers.attention.relative_attention_probabilities`, the plain path that reads like
the paper (tested equal, outputs and gradients).

Why: without XLA (bfloat16 on CPU) that is a dozen passes over [B, N, Q, K] between the
matmuls (the rel-shift's StridedSliceGrad alone took 260 ms per base 4x128 step); compiled it is
one forward and one backward kernel. The backward is written out (softmax gradient, the
shift's adjoint as plain ops after it, the segment pick's sum) because TensorFlow's gradient
of the compiled forward made it save every float32 intermediate and took 3x the forward
(attention-probability backward per base 4x128 step 67 -> 47-59 ms; with the adjoint moved
out, 2x512 410 -> 205 ms; docs/performance.md items 3, 4 and 7).
"""

import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.modeling.ops import random as random_ops
from xlnet_tf.modeling.ops.compile import compiled, compiled_with_gradient
from xlnet_tf.modeling.ops.relative_shift import (gather_relative_scores, rel_shift,
                                                  rel_shift_adjoint)


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
    score = tf.where(mask[:, None], tf.constant(numerics.MASKED_SCORE, tf.float32), score)
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
  `dropout_threshold` / 2^32 (see ops.random) when a seed is given.
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
  keep = random_ops.keep_mask(tf.shape(probability), dropout_seed, dropout_threshold)
  dropped = random_ops.apply_keep_mask(probability, keep, dropout_threshold)
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
    gradient = random_ops.apply_keep_mask(gradient, keep, dropout_threshold)
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
# a dozen passes over [B, N, Q, K] around the oneDNN matmuls (see ops.compile). Measured
# (base, 4x128): TensorFlow's gradient of the compiled forward took 3x the forward's time.
fused_attention_probabilities = compiled_with_gradient(
    _probabilities_forward, _probabilities_backward, _finish_probabilities_backward)


def _attended_rows(content_queries, position_queries, keys, values, position_keys,
                   segment_queries=None, segment_keys=None, *, content_length, scale,
                   query_positions, mismatch=None, mask=None, valid=None,
                   keys_transposed=False):
  """Inference for a few rows at `query_positions` over projected keys and values: the
  weighted values [B, N, P, H]. The queries plus each bias [B, N, P, H]; keys [B, N, K, H]
  or, keys_transposed, [B, N, H, K] (a cache's layout: the score product then reads them as
  stored); values [B, N, K, H]; position_keys [1 or B, N, R, H]; segment_keys [1, N, 2, H]
  (with mismatch); valid [B, P] zeroes the rows of padding. The probabilities as
  `attention_probabilities`."""
  segment_score = None
  if segment_queries is not None:
    segment_score = tf.matmul(segment_queries, segment_keys, transpose_b=True)
  probability = attention_probabilities(
      tf.matmul(content_queries, keys, transpose_b=not keys_transposed),
      tf.matmul(position_queries, position_keys, transpose_b=True), segment_score,
      key_length=tf.shape(values)[2], content_length=content_length, scale=scale,
      query_positions=query_positions, mismatch=mismatch, mask=mask)
  attended = tf.matmul(probability, values)
  if valid is not None:
    attended *= tf.cast(valid, attended.dtype)[:, None, :, None]
  return attended


# A decoding step's attention (generation, infilling: a few rows over a cache) as one kernel
# per layer: the three score and value products outside it were oneDNN calls of ~90 us each at
# batch 1, their operands fetched from memory between the layers' weight streams. XLA's CPU
# dot against keys [B, N, K, H] transposed them first: with a cache of keys stored [B, N, H, K]
# the base model's 12 score products of batch 8 (16 rows, 192 slots) took 5.6 ms against 10.9.
attended_rows = compiled(_attended_rows)
