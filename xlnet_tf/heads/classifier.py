"""XLNetClassifier: sequence classification or regression over XLNetModel.

Shapes: B batch, T length, C classes. Original variables: model/sequnece_summary/* and
model/classification_{task}/logit/{kernel,bias} (regression: model/regression_{task}/logit);
Hugging Face: sequence_summary.summary.*, logits_proj.*.
"""

import keras
import tensorflow as tf

from xlnet_tf.utils.errors import require
from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.heads.summary import SequenceSummary
from xlnet_tf.modeling.backbone import backbone_inputs
from xlnet_tf.modeling.memory import next_memory


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetClassifier(XLNetHead):
  """Sequence classification or regression over XLNetModel.

  Inputs as XLNetModel's (input_ids, segment_ids, input_mask[, mems]), or raw strings packed
  by `.preprocessor`; returns logits [B, C], or [B] scores when `num_classes == 1`
  (regression, e.g. STS-B). `multi_label`: each of the C logits is one label's own sigmoid (a
  set of labels per example); its serving outputs are per-label probabilities and the labels
  at or over `thresholds`.

  `max_segments` S > 1: documents are read as S segments ([B, S, T] inputs, the layout of
  xlnet_tf.text.packing), which needs a backbone with memory (config.mem_len > 0). The head
  reads any S it is called with; max_segments is saved in head.json so that evaluation runs
  and exports split texts the way training did.

  Args:
    backbone: the XLNetModel, or an XLNetConfig (or a dict of its fields) to build one from.
    num_classes: C, the number of classes; 1 makes a regression head (one score).
    summary_type: how the sequence becomes one vector (SequenceSummary): "last" (<cls>, the
      original's), "first", "mean" or "attn".
    task_name: the original checkpoints' scope of the logits,
      model/classification_{task_name}/logit (regression_{task_name} for regression).
    multi_label: one sigmoid per class (a set of labels per example); needs num_classes >= 2.
    max_segments: S, the segments a long document is read as (and saved in head.json).
    **kwargs: Keras Model arguments (name).

  Attributes:
    labels: the name of each class, in order, or None; from_pretrained reads it from
      labels.json (or Hugging Face's id2label), save_pretrained writes it there.
    thresholds: a multi-label head's [C] decision thresholds of the serving outputs (0.5 each
      unless set, e.g. from the thresholds.json a training run tuned on dev); None otherwise.

  Raises:
    ValueError: for num_classes < 1, or multi_label with num_classes < 2.
    UserInputError: for max_segments not an integer >= 1, or > 1 over a backbone without
      memory (mem_len 0).

  >>> import numpy as np
  >>> from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
  >>> classifier = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny")), num_classes=3)
  >>> logits = classifier({"input_ids": np.array([[5, 17, 42, 8, 3], [0, 0, 12, 9, 3]]),
  ...                      "segment_ids": np.array([[0, 0, 1, 1, 2], [0, 0, 0, 1, 2]]),
  ...                      "input_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])})
  >>> tuple(logits.shape)  # [B, C]
  (2, 3)
  """

  UNUSED_BACKBONE_VARIABLES = ("mask_emb",)  # reads the content stream only

  def __init__(self, backbone, num_classes: int, summary_type: str = "last",
               task_name: str = "task", multi_label: bool = False, max_segments: int = 1,
               **kwargs):
    super().__init__(backbone, **kwargs)
    if num_classes < 1:
      raise ValueError(f"num_classes must be >= 1 (1 = regression); got {num_classes}")
    if multi_label and num_classes < 2:
      raise ValueError(f"a multi-label classifier needs num_classes >= 2; got {num_classes}")
    config = self.backbone.config
    require(isinstance(max_segments, int) and max_segments >= 1, "max_segments",
            "an integer >= 1", max_segments)
    require(max_segments == 1 or config.mem_len > 0, "max_segments",
            "1 for a backbone without memory (XLNetConfig.mem_len 0)", max_segments)
    self.num_classes = num_classes
    self.multi_label = multi_label
    self.labels = None  # the name of each class, in order (from_pretrained, save_pretrained)
    self.thresholds = [0.5] * num_classes if multi_label else None  # serving's decision
    self.summary_type = summary_type
    self.task_name = task_name
    self.max_segments = max_segments
    # Not `self.summary`: that would hide keras.Model.summary(). The weight files' paths
    # follow the layer's class (Keras lists it under `layers`), not this attribute's name.
    self.sequence_summary = SequenceSummary(
        summary_type, config.n_head, config.d_head, config.dropout, config.dropatt,
        config.init_std, name="sequnece_summary")
    self.sequence_summary.build((None, config.d_model))
    self.logit = keras.layers.Dense(
        num_classes, kernel_initializer=keras.initializers.RandomNormal(stddev=config.init_std),
        name="logit")
    self.logit.build((None, config.d_model))

  def call(self, inputs, training=False):
    """The logits of a batch of sequences, or of long documents read segment by segment.

    [B, T] inputs: one sequence each. [B, S, T] inputs: long documents read as S consecutive
    segments with Transformer-XL memory (needs config.mem_len > 0); the summary of the last
    segment decides, and memory lets it depend on every earlier segment. Padding is masked in
    the memory as in the segment itself (memory_mask), so a document that fits in its last
    segment gets the logits of a [B, T] call on that segment.

    Args:
      inputs: a dict of the backbone's inputs (input_ids, segment_ids, input_mask), [B, T] or
        [B, S, T]; other keys are ignored.
      training: apply dropout.

    Returns:
      float32 logits [B, C], or [B] scores for regression (num_classes 1).

    Raises:
      ValueError: for [B, S, T] inputs over a backbone without memory.
    """
    if len(inputs["input_ids"].shape) == 3:
      return self._long_document_logits(inputs, training)
    features = backbone_inputs(inputs)
    outputs = self.backbone(features, training=training)
    return self._logits(outputs["sequence_output"], features.get("input_mask"), training)

  def _logits(self, sequence, input_mask, training):
    pooled = self.sequence_summary(sequence, input_mask, training=training)
    logits = tf.cast(self.logit(pooled), tf.float32)
    return logits[:, 0] if self.num_classes == 1 else logits

  def _long_document_logits(self, inputs, training):
    if self.backbone.config.mem_len <= 0:
      raise ValueError("Long documents ([B, S, T] inputs) need XLNetConfig.mem_len > 0")
    config = self.backbone.config
    num_segments = inputs["input_ids"].shape[1]
    mems = memory_mask = None
    for index in range(num_segments):  # static S: unrolled, fine under XLA
      segment = {key: value[:, index] for key, value in backbone_inputs(inputs).items()
                 if key not in ("mems", "memory_mask")}
      if mems is not None:
        segment.update(mems=mems, memory_mask=memory_mask)
      outputs = self.backbone(segment, training=training)
      mems = outputs["new_mems"]  # gradient stops at the memory, as in the original
      # The memory's slots, kept as the backbone keeps the hidden states they hold.
      current_mask = segment.get("input_mask")
      if current_mask is None:
        current_mask = tf.ones_like(segment["input_ids"], tf.float32)
      memory_mask = next_memory(tf.cast(current_mask, tf.float32), memory_mask,
                                config.reuse_len, config.mem_len)
    return self._logits(outputs["sequence_output"], segment.get("input_mask"), training)

  def serving_outputs(self, features):
    """What a SavedModel of this head returns (see xlnet_tf.serving.saved_model).

    Args:
      features: the packed inputs: input_ids, segment_ids, input_mask ([B, T] or [B, S, T]).

    Returns:
      Regression: {"score": [B]}. Multi-label: {"logits", "probabilities" (each label's
      sigmoid), "thresholds" [B, C], "predicted_labels" int32 [B, C] (1: probability >=
      threshold)}. Otherwise: {"logits" [B, C], "probabilities" (softmax),
      "predicted_label" int32 [B]}.
    """
    logits = self(features, training=False)
    if self.num_classes == 1:
      return {"score": logits}
    if self.multi_label:
      return multi_label_outputs(logits, self.thresholds)
    return classification_outputs(logits)

  @property
  def _original_task_scope(self) -> str:
    kind = "regression" if self.num_classes == 1 else "classification"
    return f"model/{kind}_{self.task_name}/logit/"

  def original_head_variables(self):
    """The head's weights under their names in the original TF1 checkpoints.

    Returns:
      {original name: variable}: model/sequnece_summary/... (sic) and
      model/classification_{task_name}/logit/{kernel,bias} (regression_{task_name}).
    """
    names = self.sequence_summary.original_variables()
    names[self._original_task_scope + "kernel"] = self.logit.kernel
    names[self._original_task_scope + "bias"] = self.logit.bias
    return names

  def huggingface_head_names(self):
    """How Hugging Face's XLNetForSequenceClassification names this head's weights.

    Returns:
      {HF name: (original name, transpose)}: sequence_summary.summary.* and logits_proj.*.
    """
    scope = "model/sequnece_summary/summary/"
    return {"sequence_summary.summary.weight": (scope + "kernel", True),
            "sequence_summary.summary.bias": (scope + "bias", False),
            "logits_proj.weight": (self._original_task_scope + "kernel", True),
            "logits_proj.bias": (self._original_task_scope + "bias", False)}

  def head_config(self):
    """The constructor arguments head.json stores, besides the backbone.

    Returns:
      {"num_classes", "summary_type", "task_name", "max_segments"}, and "multi_label": True
      for a multi-label head only.
    """
    config = {"num_classes": self.num_classes, "summary_type": self.summary_type,
              "task_name": self.task_name, "max_segments": self.max_segments}
    if self.multi_label:  # only then: a single-label head's head.json stays as it was
      config["multi_label"] = True
    return config


def classification_outputs(logits):
  """Serving outputs of class logits [..., C]: logits, probabilities, predicted_label."""
  return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
          "predicted_label": tf.argmax(logits, axis=-1, output_type=tf.int32)}


def multi_label_outputs(logits, thresholds):
  """Serving outputs of multi-label logits [B, C]: logits, probabilities (each label's
  sigmoid), thresholds [C], predicted_labels int32 [B, C] (1: probability >= threshold)."""
  probabilities = tf.sigmoid(logits)
  thresholds = tf.constant(thresholds, tf.float32)
  return {"logits": logits, "probabilities": probabilities,
          "thresholds": tf.broadcast_to(thresholds, tf.shape(logits)),
          "predicted_labels": tf.cast(probabilities >= thresholds, tf.int32)}
