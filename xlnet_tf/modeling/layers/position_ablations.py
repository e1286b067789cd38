"""The position encodings Transformer-XL's Table 5 compares its relative encoding with, for
left-to-right LMs (attn_type "uni"; config.pos_encoding):

- "shaw" (Shaw et al., 2018): a learned key embedding per query-to-key distance, distances
  clipped at clamp_len, per layer and shared by the heads; score(i, j) = q_i . (k_j +
  a_clip(i-j)), no global bias terms.
- "absolute_sinusoid" (Vaswani et al., 2017) / "absolute_learned" (Al-Rfou et al., 2018):
  the encoding of each position within the segment (0, 1, ..., T-1; clipped at clamp_len
  when > 0) added to the word embeddings (scaled by sqrt(d_model) for the sinusoid, as
  Vaswani et al. scale them); attention is q_i . k_j. Positions restart in every
  segment, so a memory's states carry positions that collide with the current segment's:
  what makes them confusing under recurrence (the paper's point).

Each is computed through the relative layer's kernels: the position keys of every distance
(K, K-1, ..., 0) are the layer's Shaw embeddings, or zeros for the absolute encodings, and the
model passes zero r_w_bias / r_r_bias (xlnet_tf.modeling.backbone).
"""

import tensorflow as tf

from xlnet_tf.modeling.layers.position_encoding import relative_distances, sinusoid_encoding

ABSOLUTE = ("absolute_sinusoid", "absolute_learned")


def add_table(model, config, initializer):
  """The learned table of a config's encoding, as a weight of `model`, or None: Shaw's
  [L, C+1, H] key embeddings, or the absolute [C+1, D] position embeddings."""
  if config.pos_encoding == "shaw":
    return model.add_weight(name="relative_key_embedding", initializer=initializer,
                            shape=(config.n_layer, config.clamp_len + 1, config.d_head))
  if config.pos_encoding == "absolute_learned":
    return model.add_weight(name="position_embedding", initializer=initializer,
                            shape=(config.clamp_len + 1, config.d_model))
  return None


def layer_position_keys(config, table, key_length, dtype):
  """Every layer's position keys [1, N, K+1, H] for K keys (list of L)."""
  if config.pos_encoding == "shaw":
    return [tf.cast(shaw_position_keys(table[layer], key_length, config.n_head,
                                       config.clamp_len), dtype)
            for layer in range(config.n_layer)]
  return [zero_position_keys(key_length, config.n_head, config.d_head, dtype)] * config.n_layer


def shaw_position_keys(table, key_length, n_head: int, clamp_len: int):
  """A layer's Shaw keys for the distances K, ..., 0: table [C+1, H] -> [1, N, K+1, H]."""
  distances = tf.cast(relative_distances(key_length, key_length, "uni"), tf.int32)
  rows = tf.gather(table, tf.minimum(distances, clamp_len))  # [K+1, H]
  return tf.tile(rows[None, None], [1, n_head, 1, 1])


def zero_position_keys(key_length, n_head: int, d_head: int, dtype):
  """No position term: [1, N, K+1, H] of zeros (the absolute encodings)."""
  return tf.zeros(tf.stack([1, n_head, key_length + 1, d_head]), dtype)


def with_absolute_positions(config, embedded, length, table=None):
  """The word embeddings [B, T, D] with the absolute encoding of positions 0..T-1 added.
  For the sinusoid the embeddings are first scaled by sqrt(D), as Vaswani et al. and
  Transformer-XL's code do: word embeddings initialised at init_std (0.02) next to unit
  sinusoids would carry almost nothing of the token (measured: 800 steps without the scale
  stayed at the unigram perplexity, 765)."""
  encoding = absolute_encoding(config.pos_encoding, length, config.d_model, config.clamp_len,
                               table)
  if config.pos_encoding == "absolute_sinusoid":
    embedded *= tf.cast(config.d_model ** 0.5, embedded.dtype)
  return embedded + tf.cast(encoding, embedded.dtype)[None]


def absolute_encoding(pos_encoding: str, length, d_model: int, clamp_len: int, table=None):
  """[T, D] float32: the encoding of positions 0..T-1 (clipped at clamp_len when > 0), the
  sinusoid of Transformer-XL's relative encoding or rows of the learned `table` [C+1, D]."""
  positions = tf.range(length)
  if clamp_len > 0:
    positions = tf.minimum(positions, clamp_len)
  if pos_encoding == "absolute_learned":
    return tf.cast(tf.gather(table, positions), tf.float32)
  return sinusoid_encoding(tf.cast(positions, tf.float32), d_model)
