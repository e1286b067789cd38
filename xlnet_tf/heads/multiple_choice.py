"""XLNetMultipleChoice: one score per option (RACE), softmax over the options.

Shapes: B questions, C options, T length. Each option is a sequence `context <sep> question +
option <sep> <cls>`; its summary goes through a dense layer to one logit. Original-style
variables: model/sequnece_summary/*, model/logits/{kernel,bias}; Hugging Face
XLNetForMultipleChoice: sequence_summary.*, logits_proj.*.
"""

import keras
import tensorflow as tf

from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.heads.classifier import classification_outputs
from xlnet_tf.heads.summary import SequenceSummary
from xlnet_tf.modeling.backbone import backbone_inputs


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetMultipleChoice(XLNetHead):
  """One score per option (RACE): inputs [B, C, T] -> logits [B, C].

  Each option is a sequence `context <sep> question + option <sep> <cls>` (input_ids,
  segment_ids, input_mask [B, C, T]), or raw strings (texts [B], options [B, C]) packed by
  `.preprocessor`. Its summary goes through a dense layer to one logit; a softmax over the
  options chooses.

  Args:
    backbone: the XLNetModel, or an XLNetConfig (or a dict of its fields) to build one from.
    summary_type: how each sequence becomes one vector (SequenceSummary): "last" (<cls>, the
      original's), "first", "mean" or "attn".
    **kwargs: Keras Model arguments (name).

  >>> import numpy as np
  >>> from xlnet_tf import XLNetConfig, XLNetModel, XLNetMultipleChoice
  >>> chooser = XLNetMultipleChoice(XLNetModel(XLNetConfig.preset("tiny")))
  >>> options = {"input_ids": np.array([[[5, 17, 42, 8, 3], [0, 0, 12, 9, 3]]]),  # B 1, C 2
  ...            "input_mask": np.array([[[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]])}
  >>> tuple(chooser(options).shape)  # [B, C]
  (1, 2)
  """

  serving_text_inputs = ("text", "options")  # options [B, C]: each packed with the text
  UNUSED_BACKBONE_VARIABLES = ("mask_emb",)  # reads the content stream only

  def __init__(self, backbone, summary_type: str = "last", **kwargs):
    super().__init__(backbone, **kwargs)
    config = self.backbone.config
    self.summary_type = summary_type
    # Not `self.summary`: that would hide keras.Model.summary(). The weight files' paths
    # follow the layer's class (Keras lists it under `layers`), not this attribute's name.
    self.sequence_summary = SequenceSummary(
        summary_type, config.n_head, config.d_head, config.dropout, config.dropatt,
        config.init_std, name="sequnece_summary")
    self.sequence_summary.build((None, config.d_model))
    self.logit = keras.layers.Dense(
        1, kernel_initializer=keras.initializers.RandomNormal(stddev=config.init_std),
        name="logits")
    self.logit.build((None, config.d_model))

  def call(self, inputs, training=False):
    """The logit of each option.

    Args:
      inputs: a dict of the backbone's inputs, each [B, C, T] (input_ids, segment_ids,
        input_mask); other keys are ignored.
      training: apply dropout.

    Returns:
      float32 logits [B, C].
    """
    shape = tf.shape(inputs["input_ids"])  # [B, C, T]
    flat = {key: tf.reshape(value, tf.stack([-1, shape[2]]))
            for key, value in backbone_inputs(inputs).items()}
    sequence = self.backbone(flat, training=training)["sequence_output"]
    pooled = self.sequence_summary(sequence, flat.get("input_mask"), training=training)
    scores = tf.cast(self.logit(pooled), tf.float32)  # [B * C, 1]
    return tf.reshape(scores, shape[:2])

  def serving_outputs(self, features):
    """What a SavedModel of this head returns (see xlnet_tf.serving.saved_model).

    Args:
      features: the packed inputs: input_ids, segment_ids, input_mask [B, C, T].

    Returns:
      {"logits" [B, C], "probabilities" (softmax over the options), "predicted_label" int32
      [B] (the chosen option)}.
    """
    return classification_outputs(self(features, training=False))

  def original_head_variables(self):
    """The head's weights under their names in original-style TF1 checkpoints.

    Returns:
      {original name: variable}: model/sequnece_summary/... (sic) and
      model/logits/{kernel,bias}.
    """
    names = self.sequence_summary.original_variables()
    names["model/logits/kernel"] = self.logit.kernel
    names["model/logits/bias"] = self.logit.bias
    return names

  def huggingface_head_names(self):
    """How Hugging Face's XLNetForMultipleChoice names this head's weights.

    Returns:
      {HF name: (original name, transpose)}: sequence_summary.summary.* and logits_proj.*.
    """
    scope = "model/sequnece_summary/summary/"
    return {"sequence_summary.summary.weight": (scope + "kernel", True),
            "sequence_summary.summary.bias": (scope + "bias", False),
            "logits_proj.weight": ("model/logits/kernel", True),
            "logits_proj.bias": ("model/logits/bias", False)}

  def head_config(self):
    """The constructor arguments head.json stores, besides the backbone.

    Returns:
      {"summary_type": summary_type}.
    """
    return {"summary_type": self.summary_type}
