"""One XLNet layer: relative attention over both streams, then the shared feed-forward.

Shapes: B batch, T content length, P predictions, M memory length, K = M + T, D d_model.
"""

import keras

from xlnet_tf.modeling.layers.attention import RelativeMultiHeadAttention
from xlnet_tf.modeling.layers.feed_forward import PositionwiseFeedForward


@keras.saving.register_keras_serializable(package="xlnet_tf")
class TwoStreamBlock(keras.layers.Layer):
  """XLNet layer `layer_{i}`: `rel_attn` then `ff`, one set of weights for both streams.

  The content stream h [B, T, D] is a Transformer-XL layer; the query stream g [B, P, D], when
  given, attends to memory + content keys with its own masks and goes through the same
  feed-forward. See `RelativeMultiHeadAttention.call` for the keyword arguments.
  """

  def __init__(self, n_head: int, d_head: int, d_inner: int, ff_activation: str = "gelu",
               dropout: float = 0.0, dropatt: float = 0.0, init_std: float = 0.02,
               fused: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.n_head = n_head
    self.d_head = d_head
    self.d_inner = d_inner
    self.ff_activation = ff_activation
    self.dropout = dropout
    self.dropatt = dropatt
    self.init_std = init_std
    self.fused = fused
    self.attention = RelativeMultiHeadAttention(n_head, d_head, dropout=dropout,
                                                dropatt=dropatt, init_std=init_std,
                                                fused=fused, name="rel_attn")
    self.feed_forward = PositionwiseFeedForward(d_inner, ff_activation, dropout=dropout,
                                                init_std=init_std, fused=fused, name="ff")

  def build(self, input_shape):
    self.attention.build(input_shape)
    self.feed_forward.build(input_shape)
    self.built = True

  def call(self, content, position_encoding, r_w_bias, r_r_bias, *, masks=None, query=None,
           training=False, return_attention=False, **attention_kwargs):
    """Returns (content_output [B, T, D], query_output [B, P, D] or None), and the content
    stream's attention probabilities [B, N, T, K] if return_attention. `masks`: the call's
    masks.AttentionMasks (both streams'); `attention_kwargs`: memory, keys_values,
    position_keys, r_s_bias, seg_embed of RelativeMultiHeadAttention.call."""
    content, query, *attention = self.attention(
        content, position_encoding, r_w_bias, r_r_bias, masks=masks, query=query,
        training=training, return_attention=return_attention, **attention_kwargs)
    if query is None:
      content = self.feed_forward(content, training=training)
    else:
      content, query = self.feed_forward([content, query], training=training)
    return (content, query, *attention)

  def rows_at_positions(self, rows, row_masks, keys_values, position_keys, biases, *,
                        content_length, keys_transposed=False):
    """Inference: the layer for rows [B, P, D] at row_masks.positions of a T-token sequence
    whose keys and values are given (RelativeMultiHeadAttention.attend_rows, keys_transposed
    as there; row_masks a masks.RowMasks), then the feed-forward: [B, P, D]. `biases`:
    r_w_bias, r_r_bias (and r_s_bias, seg_embed) of this layer."""
    attended = self.attention.attend_rows(rows, row_masks, keys_values, position_keys,
                                          content_length=content_length,
                                          keys_transposed=keys_transposed, **biases)
    return self.feed_forward(attended)

  def get_config(self):
    return {**super().get_config(), "n_head": self.n_head, "d_head": self.d_head,
            "d_inner": self.d_inner, "ff_activation": self.ff_activation,
            "dropout": self.dropout, "dropatt": self.dropatt, "init_std": self.init_std,
            "fused": self.fused}
