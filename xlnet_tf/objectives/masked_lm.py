"""The masked-LM (BERT / denoising auto-encoder) objective on the XLNet backbone: XLNet's
Table 6 baseline.

The selected positions (the same span or token sampler as the permutation objective) are
corrupted in the input as BERT does: 80% become <mask>, 10% a random ordinary token, 10% stay;
the model attends to the whole corrupted sequence (no perm_mask, no query stream) and predicts
each original token from the content stream at its position.

An example is stored as the original ids, the target positions and, per target, the id the
input shows there (`replacements`); the reader puts the replacements in.
"""

import numpy as np
import tensorflow as tf

# BERT's split of the selected tokens: shown as <mask>, as a random token, unchanged.
MASK_FRACTION = 0.8
RANDOM_FRACTION = 0.1


def draw_replacements(rng: np.random.Generator, original_ids, mask_id: int, ordinary_ids):
  """int32 [P] ids the input shows at P selected positions holding `original_ids`."""
  original_ids = np.asarray(original_ids, np.int32)
  choice = rng.random(len(original_ids))
  random_ids = np.asarray(ordinary_ids, np.int32)[
      rng.integers(0, len(ordinary_ids), len(original_ids))]
  return np.where(choice < MASK_FRACTION, mask_id,
                  np.where(choice < MASK_FRACTION + RANDOM_FRACTION, random_ids, original_ids)
                  ).astype(np.int32)


def expand_masked_lm(input_ids, target_positions, replacements):
  """TF, batched: the model's masked-LM inputs from the stored form.

  Args:
    input_ids: int32 [B, T] original ids; target_positions: int32 [B, P], -1 for padded
      slots; replacements: int32 [B, P], the id shown at each target.

  Returns dict: input_ids int32 [B, T] (corrupted); target_mapping float32 [B, P, T];
  target int32 [B, P] (the original ids, 0 in padded slots); target_mask float32 [B, P].
  No perm_mask: every position sees the whole (corrupted) sequence.
  """
  length = tf.shape(input_ids)[1]
  valid = target_positions >= 0
  target_mapping = tf.one_hot(target_positions, length, dtype=tf.float32)  # -1 -> zero row
  is_target = tf.reduce_max(target_mapping, axis=1) > 0  # [B, T]
  slot = tf.argmax(target_mapping, axis=1, output_type=tf.int32)  # [B, T] target slot of t
  shown = tf.gather(replacements, slot, batch_dims=1)  # used only where is_target
  target = tf.gather(input_ids, tf.maximum(target_positions, 0), batch_dims=1)
  return {
      "input_ids": tf.where(is_target, shown, input_ids),
      "target_mapping": target_mapping,
      "target": tf.where(valid, target, tf.zeros_like(target)),
      "target_mask": tf.cast(valid, tf.float32),
  }
