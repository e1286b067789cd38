"""XLNetTokenClassifier: a label per token (named entities, parts of speech).

Shapes: B batch, T length, L labels. Original-style variables: model/token_classification/
logit/{kernel,bias}; Hugging Face XLNetForTokenClassification: classifier.{weight,bias}.
"""

import keras
import tensorflow as tf

from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.backbone import backbone_inputs
ORIGINAL_SCOPE = "model/token_classification/logit/"


def scored_tokens(label_ids):
  """1.0 where a token's label counts (>= 0), 0.0 at -1 (padding, later pieces): [B, T]."""
  return tf.cast(tf.cast(label_ids, tf.int32) >= 0, tf.float32)


def token_loss_sum(label_ids, logits):
  """The cross-entropy summed over the tokens whose label is >= 0 (others: padding, later
  pieces): float32 scalar; its mean is over sum(scored_tokens(label_ids))."""
  label_ids = tf.cast(label_ids, tf.int32)
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.maximum(label_ids, 0), logits=tf.cast(logits, tf.float32))
  return tf.reduce_sum(losses * scored_tokens(label_ids))


def token_loss(label_ids, logits):
  """Mean cross-entropy over tokens whose label is >= 0 (others: padding, later pieces)."""
  count = tf.reduce_sum(scored_tokens(label_ids))
  return token_loss_sum(label_ids, logits) / tf.maximum(count, 1.0)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetTokenClassifier(XLNetHead):
  """A label per token (named entities, parts of speech) over XLNetModel.

  Inputs as XLNetModel's, or raw strings packed by `.preprocessor`; returns logits [B, T, L].
  Trains with `fit(x, label_ids)`, the loss skipping label -1 (padding, a word's later
  pieces).

  Args:
    backbone: the XLNetModel, or an XLNetConfig (or a dict of its fields) to build one from.
    num_labels: L, the number of labels.
    **kwargs: Keras Model arguments (name).

  Attributes:
    labels: the name of each label, in order, or None; from_pretrained reads it from
      labels.json (or Hugging Face's id2label), save_pretrained writes it there.

  >>> import numpy as np
  >>> from xlnet_tf import XLNetConfig, XLNetModel, XLNetTokenClassifier
  >>> tagger = XLNetTokenClassifier(XLNetModel(XLNetConfig.preset("tiny")), num_labels=4)
  >>> logits = tagger({"input_ids": np.array([[5, 17, 42, 8, 3], [0, 0, 12, 9, 3]]),
  ...                  "input_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])})
  >>> tuple(logits.shape)  # [B, T, L]
  (2, 5, 4)
  """

  UNUSED_BACKBONE_VARIABLES = ("mask_emb",)  # reads the content stream only

  def __init__(self, backbone, num_labels: int, **kwargs):
    super().__init__(backbone, **kwargs)
    config = self.backbone.config
    self.num_labels = num_labels
    self.labels = None  # the name of each label, in order (from_pretrained, save_pretrained)
    self.dropout = FastDropout(config.dropout)
    self.logit = keras.layers.Dense(
        num_labels, kernel_initializer=keras.initializers.RandomNormal(stddev=config.init_std),
        name="logit")
    self.logit.build((None, None, config.d_model))

  def call(self, inputs, training=False):
    """The logits of every token's label.

    Args:
      inputs: a dict of the backbone's inputs (input_ids, segment_ids, input_mask [B, T]);
        other keys are ignored.
      training: apply dropout.

    Returns:
      float32 logits [B, T, L].
    """
    outputs = self.backbone(backbone_inputs(inputs), training=training)
    sequence = self.dropout(outputs["sequence_output"], training=training)
    return tf.cast(self.logit(sequence), tf.float32)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    """The mean cross-entropy over the tokens whose label is >= 0, for Model.fit.

    Args:
      x: unused (the features).
      y: label ids int [B, T]; -1 = not scored (padding, a word's later pieces).
      y_pred: the logits [B, T, L].
      sample_weight: unused.
      training: unused.

    Returns:
      A float32 scalar.
    """
    return token_loss(y, y_pred)

  def loss_counts(self, x, y):
    """What the loss is a mean over (the scored tokens), from the data alone.

    A custom training loop sums it over replicas and micro-batches
    (training.distributed_steps).

    Args:
      x: unused (the features).
      y: label ids int [B, T]; -1 = not scored.

    Returns:
      The number of tokens with a label >= 0, a float32 scalar.
    """
    return tf.reduce_sum(scored_tokens(y))

  def loss_sums(self, x, y, y_pred):
    """The loss summed over this batch's scored tokens (compute_loss = it / loss_counts).

    Args:
      x: unused (the features).
      y: label ids int [B, T]; -1 = not scored.
      y_pred: the logits [B, T, L].

    Returns:
      A float32 scalar.
    """
    return token_loss_sum(y, y_pred)

  def serving_outputs(self, features):
    """What a SavedModel of this head returns (see xlnet_tf.serving.saved_model).

    Args:
      features: the packed inputs: input_ids, segment_ids, input_mask [B, T].

    Returns:
      {"logits": [B, T, L], "predicted_labels": int32 [B, T], every position's label}.
    """
    logits = self(features, training=False)
    return {"logits": logits,
            "predicted_labels": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def original_head_variables(self):
    """The head's weights under their names in original-style TF1 checkpoints.

    Returns:
      {original name: variable}: model/token_classification/logit/{kernel,bias}.
    """
    return {ORIGINAL_SCOPE + "kernel": self.logit.kernel, ORIGINAL_SCOPE + "bias": self.logit.bias}

  def huggingface_head_names(self):
    """How Hugging Face's XLNetForTokenClassification names this head's weights.

    Returns:
      {HF name: (original name, transpose)}: classifier.weight and classifier.bias.
    """
    return {"classifier.weight": (ORIGINAL_SCOPE + "kernel", True),
            "classifier.bias": (ORIGINAL_SCOPE + "bias", False)}

  def head_config(self):
    """The constructor arguments head.json stores, besides the backbone.

    Returns:
      {"num_labels": num_labels}.
    """
    return {"num_labels": self.num_labels}
