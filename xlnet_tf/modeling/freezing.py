"""Freezing the embedding and the first N blocks of an XLNetModel (XLNetModel.freeze_layers).

Frozen for N: the embeddings the streams start from (word_embedding, mask_emb), blocks 0..N-1
(their projections, LayerNorms and feed-forward) and rows 0..N-1 of the variables that stack
one slice per layer ([L, ...]: seg_embed and, with untie_r, r_w_bias, r_r_bias, r_s_bias).
Tied biases ([N, H]) serve every block: they are frozen only when all blocks are.

How each part is held, so that every way of training honours it:
- whole variables are made non-trainable (Keras' flag): model.trainable_variables, Model.fit,
  a custom loop and any optimizer leave them out (no gradient, no optimizer slots);
- a stacked variable has to stay trainable for its other rows. The model stops the gradient
  at its frozen rows (`held_row`): they get a zero gradient, which also keeps them out of the
  global norm that clipping uses. Decoupled weight decay moves a weight even with a zero
  gradient, so the variable carries `frozen_rows`, which XLNetAdamW (training/optimization.py)
  turns into a zero step on those rows (`frozen_row_mask`): they stay bit-identical. Another
  optimizer with weight decay would shrink them (Adam without decay leaves them as they are).
"""

from typing import Optional

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import require

STACKED_VARIABLES = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")
EMBEDDINGS = ("word_embedding", "mask_emb")


def check_frozen_layers(frozen_layers, n_layer: int, argument: str = "freeze_layers") -> None:
  """Refuses a count of frozen blocks outside 0..n_layer, naming `argument` and n_layer."""
  require(isinstance(frozen_layers, (int, np.integer)) and not isinstance(frozen_layers, bool)
          and 0 <= frozen_layers <= n_layer, argument,
          f"an integer from 0 to the model's n_layer ({n_layer})", frozen_layers)


def freeze(backbone, frozen_layers: Optional[int]) -> None:
  """Marks `backbone`'s embedding and first `frozen_layers` blocks as not trained (None:
  everything trained again). Call before the optimizer is built: it sees the variables that
  are trainable then."""
  n_layer = backbone.config.n_layer
  if frozen_layers is not None:
    check_frozen_layers(frozen_layers, n_layer)
  count = -1 if frozen_layers is None else int(frozen_layers)  # -1: not even the embedding
  for name in EMBEDDINGS:
    getattr(backbone, name).trainable = count < 0
  for index, block in enumerate(backbone.blocks):
    block.trainable = index >= count
  for name in STACKED_VARIABLES:
    variable = getattr(backbone, name)
    if is_stacked(variable, n_layer):
      variable.frozen_rows = max(count, 0)
    else:  # tied: shared by every block
      variable.trainable = count < n_layer


def is_stacked(variable, n_layer: int) -> bool:
  """A variable holding one slice per layer: [L, ...] (seg_embed always; biases with untie_r)."""
  return len(variable.shape) >= 3 and variable.shape[0] == n_layer


def held_row(variable, index: int, frozen_layers: Optional[int]):
  """variable[index] for block `index`; no gradient flows into it when that block is frozen."""
  row = variable[index]
  return tf.stop_gradient(row) if index < (frozen_layers or 0) else row


def frozen_row_mask(variable) -> Optional[np.ndarray]:
  """[L, 1, ...] float32: 0 on the frozen rows of a stacked variable, 1 elsewhere; None when
  nothing of it is frozen (a learning-rate multiplier for the optimizer)."""
  rows = getattr(variable, "frozen_rows", 0)
  if not rows:
    return None
  mask = np.ones([variable.shape[0]] + [1] * (len(variable.shape) - 1), np.float32)
  mask[:rows] = 0.0
  return mask
