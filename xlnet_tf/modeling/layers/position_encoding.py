"""Sinusoid encodings of relative distances, as Transformer-XL and XLNet use them.

Shapes: B batch, T query length, M memory length, K = M + T key length, R relative positions
(K + T for 'bi', K + 1 for 'uni'), D d_model.

Row p of the encoding belongs to the relative distance `K - p` (K, K-1, ..., -T+1 for 'bi';
K, ..., 0 for 'uni'). The attention layer's rel-shift turns row p into the column of key j for
query i such that `K - p = (M + i) - j`, the query-to-key distance.
"""

import keras
import tensorflow as tf


def relative_distances(query_length, key_length, attn_type: str):
  """The distances K, K-1, ..., end (float32 [R]); end is -T+1 for 'bi', 0 for 'uni'."""
  if attn_type == "bi":
    end = -query_length
  elif attn_type == "uni":
    end = -1
  else:
    raise ValueError(f"attn_type must be 'bi' or 'uni'; got {attn_type!r}")
  return tf.cast(tf.range(key_length, end, -1), tf.float32)


def sinusoid_encoding(distances, d_model: int):
  """concat[sin(d * inv_freq), cos(d * inv_freq)], inv_freq = 1 / 10000^(2i / D).  [R] -> [R, D]"""
  inv_freq = 1.0 / (10000.0 ** (tf.range(0, d_model, 2, dtype=tf.float32) / d_model))  # [D/2]
  angles = distances[:, None] * inv_freq[None, :]  # [R, D/2]
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)  # [R, D]


def relative_position_encoding(query_length, key_length, batch_size, d_model: int,
                               attn_type: str = "bi", bi_data: bool = False,
                               clamp_len: int = -1):
  """Returns the encoding of every relative distance, float32.

  Without bi_data: [1, R, D], shared by the batch. With bi_data: [B, R, D], the first half of
  the batch reads the sequence forward and the second half backward (distances negated), as the
  original's bidirectional data pipeline expects; B must then be even.
  """
  forward = relative_distances(query_length, key_length, attn_type)  # [R]
  if clamp_len > 0:
    forward = tf.clip_by_value(forward, -float(clamp_len), float(clamp_len))
  forward_encoding = sinusoid_encoding(forward, d_model)[None]  # [1, R, D]
  if not bi_data:
    return forward_encoding
  backward_encoding = sinusoid_encoding(-forward, d_model)[None]  # [1, R, D]
  half = batch_size // 2
  return tf.concat([tf.repeat(forward_encoding, half, axis=0),
                    tf.repeat(backward_encoding, half, axis=0)], axis=0)  # [B, R, D]


@keras.saving.register_keras_serializable(package="xlnet_tf")
class RelativePositionEncoding(keras.layers.Layer):
  """Layer form of `relative_position_encoding` (no weights); output in the compute dtype.

  Call with `query_length, key_length, batch_size` (scalar tensors, or Python ints as
  keywords); returns [1 or B, R, D].
  """

  def __init__(self, d_model: int, attn_type: str = "bi", bi_data: bool = False,
               clamp_len: int = -1, **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.attn_type = attn_type
    self.bi_data = bi_data
    self.clamp_len = clamp_len

  def call(self, query_length, key_length, batch_size):
    encoding = relative_position_encoding(query_length, key_length, batch_size, self.d_model,
                                          self.attn_type, self.bi_data, self.clamp_len)
    return tf.cast(encoding, self.compute_dtype)

  def get_config(self):
    return {**super().get_config(), "d_model": self.d_model, "attn_type": self.attn_type,
            "bi_data": self.bi_data, "clamp_len": self.clamp_len}
