"""Multi-head attention with Transformer-XL relative positions and XLNet's two streams.

Shapes: B batch, T content length, P query-stream length (predictions), M memory length,
K = M + T keys, R relative positions, Q query rows (T or P), D d_model, N heads, H head size.

score(i, j) = [ (q_i + r_w_bias) . k_j                      content term
              + (q_i + r_r_bias) . r_{(M+i)-j}               position term (rel-shift)
              + (q_i + r_s_bias) . seg_embed[s_ij] ]         segment term, s_ij = 0 same / 1 not
              / sqrt(H)
Masked scores are set to MASKED_SCORE (-1e30) in float32, so the softmax is safe under 16-bit
policies; a row with every key masked attends uniformly, as the original's
`score - 1e30 * mask` does.

`relative_attention_probabilities` below is that equation in ordinary TensorFlow ops (the
`fused=False` path); the default path computes the same with the compiled kernel of
`ops.attention_probabilities` and row-blocked position scores (`ops.relative_shift`).
"""

import keras
import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.modeling.layers import masks as mask_lib
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.layers.projections import AfterProduct, heads_first_layout
from xlnet_tf.modeling.layers.quantization import Int8HeadKernels
from xlnet_tf.modeling.ops.attention_probabilities import (attended_rows,
                                                          fused_attention_probabilities)
from xlnet_tf.modeling.ops.int8_epilogues import Epilogue
from xlnet_tf.modeling.ops.relative_shift import (blocked_position_keys, gather_relative_scores,
                                                  rel_shift)
from xlnet_tf.modeling.ops.residual_layer_norm import (fused_residual_layer_norm,
                                                       residual_layer_norm)


def relative_attention_probabilities(queries, keys, position_keys, r_w_bias, r_r_bias, *,
                                     scale, mask=None, segment_mismatch=None, r_s_bias=None,
                                     seg_embed=None, query_positions=None, content_length=None):
  """XLNet's attention weights as the paper writes them: [B, N, Q, K] float32.

  queries [B, N, Q, H]; keys [B, N, K, H]; position_keys [1 or B, N, R, H] (the projected
  relative encodings, distances K ... descending); biases [N, H]; seg_embed [2, N, H] (same,
  different segment); segment_mismatch bool [B, Q, K]; mask bool [B or 1, Q, K], True =
  blocked. Content-stream rows are positions 0..T-1 (rel-shift); query-stream rows predict
  `query_positions` [B, P] of a content stream of `content_length` T (the same distances,
  gathered).
  """
  key_length = tf.shape(keys)[2]
  content_term = tf.matmul(queries + r_w_bias[:, None], keys, transpose_b=True)
  position_term = tf.matmul(queries + r_r_bias[:, None], position_keys, transpose_b=True)
  if query_positions is None:
    position_term = rel_shift(position_term, key_length)  # column j: distance (M + i) - j
  else:
    position_term = gather_relative_scores(position_term, query_positions, content_length,
                                           key_length)
  score = tf.cast(content_term, tf.float32) + tf.cast(position_term, tf.float32)
  if segment_mismatch is not None:
    segment_term = tf.einsum("bnqh,snh->bnqs", queries + r_s_bias[:, None], seg_embed)
    score += tf.cast(tf.where(segment_mismatch[:, None], segment_term[..., 1:],
                              segment_term[..., :1]), tf.float32)
  score *= scale
  if mask is not None:
    score = tf.where(mask[:, None], tf.constant(numerics.MASKED_SCORE, tf.float32), score)
  return tf.nn.softmax(score, axis=-1)


def _segment_keys(seg_embed):
  """seg_embed [2, N, H] as the keys of the segment scores: [1, N, 2, H] (same, different)."""
  return tf.transpose(seg_embed, [1, 0, 2])[None]


@keras.saving.register_keras_serializable(package="xlnet_tf")
class RelativeMultiHeadAttention(Int8HeadKernels, keras.layers.Layer):
  """Relative multi-head attention for XLNet's content stream and, optionally, its query stream.

  Weights (original names): q, k, v, r, o kernels [D, N, H] and a post-LayerNorm (eps 1e-12).
  The attention biases (r_w_bias, r_r_bias, r_s_bias, seg_embed) are call arguments: the model
  owns them because the original ties them across layers unless `untie_r`.

  Both streams use the same weights. Keys and values come from memory + content only; the
  query stream contributes queries (it never serves as keys). `fused=False` computes with
  ordinary TensorFlow ops (`relative_attention_probabilities`, Keras dropout and LayerNorm
  calls); the default runs the compiled kernels of `xlnet_tf.modeling.ops`. Same weights, same
  results.

  The products with the kernels go through `head_projection(name)` (layers.projections):
  `quantize("int8")` (Keras' API; layers.quantization.Int8HeadKernels) stores the five
  kernels in int8 with a scale per output channel, and the projections then run in int8
  (ops.int8_products), everything after them as before.
  """

  HEAD_KERNELS = {"q": ("query_kernel", False), "k": ("key_kernel", False),
                  "v": ("value_kernel", False), "r": ("position_kernel", False),
                  "o": ("output_kernel", True)}

  def __init__(self, n_head: int, d_head: int, dropout: float = 0.0, dropatt: float = 0.0,
               init_std: float = 0.02, fused: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.n_head = n_head
    self.d_head = d_head
    self.dropout = dropout
    self.dropatt = dropatt
    self.init_std = init_std
    self.fused = fused
    self.scale = 1.0 / (d_head ** 0.5)
    self.output_dropout = FastDropout(dropout)
    self.attention_dropout = FastDropout(dropatt)
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=numerics.LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm")

  def build(self, input_shape):
    d_model = input_shape[-1]
    kernel_shape = (d_model, self.n_head, self.d_head)

    def kernel(name):
      # An initializer per weight: one unseeded Keras initializer draws the same values at
      # every call, which would start q, k, v, r and o equal.
      return self.add_weight(name=name, shape=kernel_shape,
                             initializer=keras.initializers.RandomNormal(stddev=self.init_std))
    self.query_kernel, self.key_kernel, self.value_kernel = kernel("q"), kernel("k"), kernel("v")
    self.position_kernel, self.output_kernel = kernel("r"), kernel("o")
    self.build_quantized_kernels(kernel_shape)
    self.layer_norm.build((None, None, d_model))
    self.built = True

  def project_keys_values(self, states):
    """[B, L, D] -> (keys, values), each [B, N, L, H]: what attending to these states reads
    (a key/value cache holds them)."""
    keys = self.head_projection("k")
    return tuple(keys.projections(states, [self.head_projection("v")]))

  def project_position_keys(self, position_encoding):
    """[1 or B, R, D] relative position encoding -> position keys [1 or B, N, R, H]."""
    dtype = self.compute_dtype  # the kernel is float32 under mixed precision outside call()
    return self.head_projection("r").project(tf.cast(position_encoding, dtype),
                                             heads_first=True)

  def call(self, content, position_encoding, r_w_bias, r_r_bias, *, masks=None, memory=None,
           keys_values=None, position_keys=None, r_s_bias=None, seg_embed=None, query=None,
           training=False, return_attention=False):
    """Attends from the content stream and, if `query` is given, from the query stream.

    Args:
      content: [B, T, D] content stream h.
      position_encoding: [1 or B, R, D] from `relative_position_encoding`.
      r_w_bias, r_r_bias, r_s_bias: [N, H]; seg_embed: [2, N, H] (same, different segment).
      masks: masks.AttentionMasks: the content stream's blocked keys and segment mismatch
        ([B or 1, T, K]) and, for the query stream, its rows' positions, valid rows and masks
        ([B, P] and [B or 1, P, K]). None: nothing blocked, no segment term.
      memory: [B, M, D] or None, cached states prepended to the keys and values.
      keys_values: (keys, values), each [B, N, K, H]: memory + content already projected
        (`project_keys_values`; a key/value cache), used instead of `memory` and projecting
        content.
      position_keys: [1 or B, N, R, H], `project_position_keys(position_encoding)` already
        computed (steps of equal lengths share it); position_encoding is then not read.
      query: [B, P, D] query stream g (its rows: masks.query), or None.
      return_attention: also return the content stream's attention probabilities.

    Returns:
      (content_output [B, T, D], query_output [B, P, D] or None), plus the content stream's
      probabilities [B, N, T, K] (after attention dropout when training) if return_attention.
    """
    masks = masks if masks is not None else mask_lib.AttentionMasks()
    if query is not None and masks.query is None:
      raise ValueError("RelativeMultiHeadAttention: a query stream needs masks.query (the "
                       "positions its rows predict)")
    # Scores and the weighted sum are batched matmuls over [B, N, L, H] ("heads first"):
    # transposing q, k, v and r once is cheaper than the transposes einsum makes per product.
    # The kernels both streams use are read once (one cast to the compute dtype under mixed
    # precision): their gradient is then summed in that dtype and cast back once.
    query_projection = self.head_projection("q", True)
    output_projection = self.head_projection("o", True)
    biases = self._attention_biases(r_w_bias, r_r_bias, r_s_bias, seg_embed,
                                    masks.with_segments)
    content_queries = None  # {bias name: queries + bias}, when projected with keys and values
    if keys_values is None and memory is None and self.fused:
      # Keys, values and queries of the same rows: in int8, one product.
      keys_values, content_queries = query_projection.with_keys_values(
          content, self.head_projection("k"), self.head_projection("v"),
          {name: biases[name] for name in self._query_bias_names(masks.content)})
    elif keys_values is None:
      keys_values_input = content if memory is None else tf.concat(
          [tf.cast(memory, content.dtype), content], axis=1)  # [B, K, D]
      keys_values = self.project_keys_values(keys_values_input)
    if position_keys is None:
      position_keys = self.project_position_keys(position_encoding)  # [1 or B, N, R, H]
    values, shared = self._attention_inputs(keys_values, position_keys, biases,
                                            content_length=tf.shape(content)[1],
                                            training=training)

    probability = self._probabilities(content, query_projection, masks.content, shared,
                                      content_queries)
    content_output = self._project_out(content, tf.matmul(probability, values),
                                       output_projection, training)
    query_output = None
    if query is not None:
      query_output = self._attend_at_positions(query, masks.query, values, shared,
                                               query_projection, output_projection)
    if return_attention:
      return content_output, query_output, probability
    return content_output, query_output

  def _attention_biases(self, r_w_bias, r_r_bias, r_s_bias, seg_embed, with_segments):
    """The attention biases in the compute dtype (the segment biases only with a segment
    term, else None)."""
    dtype = self.compute_dtype
    biases = dict(r_w_bias=tf.cast(r_w_bias, dtype), r_r_bias=tf.cast(r_r_bias, dtype),
                  r_s_bias=None, seg_embed=None)
    if with_segments:
      biases.update(r_s_bias=tf.cast(r_s_bias, dtype), seg_embed=tf.cast(seg_embed, dtype))
    return biases

  def _attention_inputs(self, keys_values, position_keys, biases, *, content_length, training):
    """(values, the keywords of `_attend_*`): what every stream's attention reads, in the
    compute dtype, and its settings."""
    dtype = self.compute_dtype
    keys, values = (tf.cast(tensor, dtype) for tensor in keys_values)  # [B, N, K, H]
    return values, dict(keys=keys, position_keys=tf.cast(position_keys, dtype), biases=biases,
                        content_length=content_length, training=training)

  def _attend_at_positions(self, rows, row_masks, values, shared, query_projection,
                           output_projection):
    """The query stream's attention: rows [B, P, D] at row_masks.positions [B, P] of the
    content."""
    attended = tf.matmul(self._probabilities(rows, query_projection, row_masks, shared),
                         values)
    if row_masks.valid is not None:  # attended: [B, N, P, H]
      attended *= tf.cast(row_masks.valid, attended.dtype)[:, None, :, None]
    return self._project_out(rows, attended, output_projection, shared["training"])

  def attend_rows(self, rows, row_masks, keys_values, position_keys, r_w_bias, r_r_bias, *,
                  content_length, r_s_bias=None, seg_embed=None, keys_transposed=False):
    """Inference: rows [B, P, D] standing at row_masks.positions int32 [B, P] of a sequence
    of `content_length` T attend to its projected `keys_values` ([B, N, T, H] each; the keys
    [B, N, H, T] if keys_transposed, as a decoding cache keeps them) exactly
    as query-stream rows do (`call`), with `position_keys` of `call`'s T-token layout;
    row_masks (masks.RowMasks): blocked, segment_mismatch bool [B, P, T] (True = blocked /
    different segment). A row holding a position's content state h (it may see its own key)
    computes that position's next content state: what infilling's cached steps run
    (xlnet_tf.inference.infilling). Returns [B, P, D]."""
    biases = self._attention_biases(r_w_bias, r_r_bias, r_s_bias, seg_embed,
                                    row_masks.segment_mismatch is not None)
    values, shared = self._attention_inputs(keys_values, position_keys, biases,
                                            content_length=content_length, training=False)
    query_projection = self.head_projection("q", True)
    output_projection = self.head_projection("o", True)
    if not self.fused:
      if keys_transposed:  # the plain path reads them as `call` makes them
        shared["keys"] = tf.linalg.matrix_transpose(shared["keys"])
      return self._attend_at_positions(rows, row_masks, values, shared, query_projection,
                                       output_projection)
    queries = self._biased_queries(rows, query_projection, row_masks, biases)
    segment_keys = None
    if row_masks.segment_mismatch is not None:
      segment_keys = _segment_keys(biases["seg_embed"])
    attended = attended_rows(
        *queries[:2], shared["keys"], values, shared["position_keys"], *queries[2:],
        segment_keys, content_length=content_length, scale=self.scale,
        query_positions=row_masks.positions, mismatch=row_masks.segment_mismatch,
        mask=row_masks.blocked, valid=row_masks.valid, keys_transposed=keys_transposed)
    return self._project_out(rows, attended, output_projection, training=False)

  @staticmethod
  def _query_bias_names(row_masks):
    """The biases the fused path adds to queries: content, position and (with a segment
    term) segment."""
    segments = row_masks.segment_mismatch is not None
    return ["r_w_bias", "r_r_bias"] + (["r_s_bias"] if segments else [])

  def _biased_queries(self, rows, query_projection, row_masks, biases):
    """rows [B, Q, D] projected to queries [B, N, Q, H] plus each bias of
    `_query_bias_names` (a list, in that order)."""
    return query_projection.project(
        rows, heads_first=True,
        plus=[biases[name] for name in self._query_bias_names(row_masks)])

  def _probabilities(self, rows, query_projection, row_masks, shared, biased_queries=None):
    """[B, N, Q, K] attention probabilities (after dropout) of rows [B, Q, D] (`call`'s
    content or query stream) projected by the query kernel, or from `biased_queries` already
    projected ({bias name: queries + bias})."""
    if not self.fused:
      queries = heads_first_layout(query_projection.project(rows))
      return self._attend_plain(queries, row_masks, **shared)
    if biased_queries is None:
      biased_queries = dict(zip(self._query_bias_names(row_masks), self._biased_queries(
          rows, query_projection, row_masks, shared["biases"])))
    return self._attend_fused(biased_queries, row_masks, **shared)

  def _attend_plain(self, queries, row_masks, *, keys, position_keys, biases, content_length,
                    training):
    """[B, N, Q, K] attention probabilities (after dropout), in ordinary ops."""
    probability = relative_attention_probabilities(
        queries, keys, position_keys, biases["r_w_bias"], biases["r_r_bias"], scale=self.scale,
        mask=row_masks.blocked, segment_mismatch=row_masks.segment_mismatch,
        r_s_bias=biases["r_s_bias"], seg_embed=biases["seg_embed"],
        query_positions=row_masks.positions, content_length=content_length)
    return self.attention_dropout(tf.cast(probability, queries.dtype), training=training)

  def _attend_fused(self, biased_queries, row_masks, *, keys, position_keys, biases,
                    content_length, training):
    """The same as `_attend_plain` with the compiled probability kernel, from the queries plus
    each bias ({bias name: [B, N, Q, H]}); the content stream's position scores in row blocks
    (ops.relative_shift.position_row_blocks, from the static T and K known when tracing)."""
    queries = biased_queries["r_w_bias"]
    content_score = tf.matmul(queries, keys, transpose_b=True)
    position_queries = biased_queries["r_r_bias"]
    if row_masks.positions is None:  # row blocks [B, N, blocks, L, W]
      blocked_keys = blocked_position_keys(position_keys, queries.shape[2], keys.shape[2])
      blocks = blocked_keys.shape[-3]
      position_queries = tf.reshape(position_queries, tf.concat(
          [tf.shape(queries)[:2], [blocks, -1, self.d_head]], 0))
      position_score = tf.matmul(position_queries, blocked_keys, transpose_b=True)
    else:  # [B, N, P, R]
      position_score = tf.matmul(position_queries, position_keys, transpose_b=True)
    scores = [content_score, position_score]
    if row_masks.segment_mismatch is not None:
      scores.append(tf.matmul(biased_queries["r_s_bias"], _segment_keys(biases["seg_embed"]),
                              transpose_b=True))
    probability = fused_attention_probabilities(
        *scores, key_length=tf.shape(keys)[2], content_length=content_length, scale=self.scale,
        query_positions=row_masks.positions, mismatch=row_masks.segment_mismatch,
        mask=row_masks.blocked, keep_for_gradient=bool(training),
        **self.attention_dropout.fused_arguments(training))
    return probability

  def _project_out(self, stream, attended, output_projection, training):
    """LayerNorm(stream + dropout(attended . o)): [B, N, Q, H] -> [B, Q, D]."""
    if not self.fused:
      projected = output_projection.project(attended, heads_first=True)
      dropped = self.output_dropout(projected, training=training)
      normalized = self.layer_norm(tf.cast(dropped, tf.float32) + tf.cast(stream, tf.float32))
      return tf.cast(normalized, projected.dtype)
    gamma, beta, epsilon = self.layer_norm.gamma, self.layer_norm.beta, self.layer_norm.epsilon

    def layer_norm(projected):
      return fused_residual_layer_norm(
          projected, stream, gamma.value, beta.value, epsilon=epsilon,
          keep_for_gradient=bool(training), **self.output_dropout.fused_arguments(training))

    def layer_norm_epilogue():  # inference: the same on the product's rows
      residual = tf.reshape(stream, [-1, stream.shape[-1]])
      return Epilogue(residual_layer_norm, (residual, gamma.value, beta.value),
                      (("epsilon", epsilon),))
    return output_projection.output(
        attended, AfterProduct(layer_norm, None if training else layer_norm_epilogue))

  def get_config(self):
    return {**super().get_config(), "n_head": self.n_head, "d_head": self.d_head,
            "dropout": self.dropout, "dropatt": self.dropatt, "init_std": self.init_std,
            "fused": self.fused}
