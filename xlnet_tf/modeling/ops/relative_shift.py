"""Relative-position scores moved into place: the rel-shift, its adjoint, row blocks and the
query-stream gather.

The position term of XLNet's score needs, for query row i and key j, the score against the
encoding of distance (M + i) - j. It is computed as one [L, R] product against all R relative
positions (descending, as `layers.position_encoding` orders them) and then shifted so that
column j of row i holds the right distance: `rel_shift`, reshapes only. Why these live here,
each measured on this machine (docs/performance.md items 7 and the fourth round):
- `rel_shift_adjoint` as plain TensorFlow pads/reshapes: XLA compiles the reversed reshapes
  into a loop dividing by R - 1 per element (18-20 ms -> 4.7 ms on [2, 12, 512, 1024]).
- `position_row_blocks` / `blocked_position_keys`: row i reads only T of R = K + T columns,
  so blocks of 128 rows need only 128 + K each (base 2x512: 5.1 -> 3.2 ms per layer).
- `gather_relative_scores`: the query stream predicts arbitrary positions; a gather replaces
  the original's scatter of P rows into a full [T, K] score.
"""

import tensorflow as tf


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
