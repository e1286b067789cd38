"""Which model variable each original (zihangdai/xlnet, TF1) checkpoint name holds.

The Keras variables keep the original shapes (kernels [D, N, H], dense kernels [in, out],
biases tied [N, H] or untied [L, N, H], seg_embed [L, 2, N, H]), so a name maps to a whole
variable with no transform.
"""

import re
from typing import Dict

from xlnet_tf.utils.errors import UserInputError

BACKBONE_SCOPE = "model/transformer/"

# Variables a training run leaves in a checkpoint beside the model: never model weights.
TRAINING_STATE = re.compile(
    r"(^|/)(global_step|beta1_power|beta2_power|_CHECKPOINTABLE_OBJECT_GRAPH)$"
    r"|/(adam_m|adam_v|Adam|Adam_1|Momentum|ExponentialMovingAverage)$")


def backbone_of(target):
  """The XLNetModel inside `target`: the model itself, or a head's `.backbone`.

  Known by what it holds (a config and blocks) rather than by class: checkpoints sit below
  the model classes (xlnet_tf.modeling), which build on them.

  Args:
    target: an XLNetModel, or a head with a `.backbone`.

  Returns:
    The XLNetModel.

  Raises:
    TypeError: when `target` is neither.
  """
  for candidate in (target, getattr(target, "backbone", None)):
    if hasattr(candidate, "config") and hasattr(candidate, "blocks"):
      return candidate
  raise TypeError(f"Expected an XLNetModel or a head with a `.backbone` XLNetModel; got "
                  f"{type(target).__name__}")


def original_variable_map(target) -> Dict[str, object]:
  """{original TF1 name: Keras variable} for the backbone plus the head's own weights.

  A head contributes its weights through `original_head_variables()` (e.g. model/lm_loss/bias).

  Args:
    target: an XLNetModel or a head.

  Returns:
    {original name (model/transformer/...): variable}.

  Raises:
    UserInputError: for a model whose pos_encoding is not "relative" (the original and Hugging
      Face formats hold XLNet's relative encoding only).
    AttributeError: for a quantized model: its float kernels are gone (int8 ones hold them).
  """
  model = backbone_of(target)
  if model.config.pos_encoding != "relative":
    raise UserInputError(
        f"XLNetConfig.pos_encoding={model.config.pos_encoding!r}: the original and Hugging Face "
        "checkpoint formats hold XLNet's relative encoding only; save and load this ablation "
        "model in the own format (save_pretrained / from_pretrained)")
  names = {
      BACKBONE_SCOPE + "word_embedding/lookup_table": model.word_embedding,
      BACKBONE_SCOPE + "mask_emb/mask_emb": model.mask_emb,
      BACKBONE_SCOPE + "r_w_bias": model.r_w_bias,
      BACKBONE_SCOPE + "r_r_bias": model.r_r_bias,
      BACKBONE_SCOPE + "r_s_bias": model.r_s_bias,
      BACKBONE_SCOPE + "seg_embed": model.seg_embed,
  }
  for index, block in enumerate(model.blocks):
    scope = f"{BACKBONE_SCOPE}layer_{index}/"
    attention, feed_forward = block.attention, block.feed_forward
    names.update({
        scope + "rel_attn/q/kernel": attention.query_kernel,
        scope + "rel_attn/k/kernel": attention.key_kernel,
        scope + "rel_attn/v/kernel": attention.value_kernel,
        scope + "rel_attn/r/kernel": attention.position_kernel,
        scope + "rel_attn/o/kernel": attention.output_kernel,
        scope + "rel_attn/LayerNorm/gamma": attention.layer_norm.gamma,
        scope + "rel_attn/LayerNorm/beta": attention.layer_norm.beta,
        scope + "ff/layer_1/kernel": feed_forward.inner_dense.kernel,
        scope + "ff/layer_1/bias": feed_forward.inner_dense.bias,
        scope + "ff/layer_2/kernel": feed_forward.output_dense.kernel,
        scope + "ff/layer_2/bias": feed_forward.output_dense.bias,
        scope + "ff/LayerNorm/gamma": feed_forward.layer_norm.gamma,
        scope + "ff/LayerNorm/beta": feed_forward.layer_norm.beta,
    })
  if target is not model and hasattr(target, "original_head_variables"):
    names.update(target.original_head_variables())
  return names


def minimum_weight_count(config) -> int:
  """A lower bound of the number of weight values an XLNetModel of `config` holds, in any
  format, quantized or not, whatever its position encoding: the word embedding and each
  layer's four attention kernels and two feed-forward kernels. A weights file holding fewer
  values cannot belong to the config: known before anything is built."""
  attention = 4 * config.d_model * config.n_head * config.d_head
  feed_forward = 2 * config.d_model * config.d_inner
  return config.n_token * config.d_model + config.n_layer * (attention + feed_forward)
