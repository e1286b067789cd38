"""XLNetQuestionAnswering: SQuAD-style span extraction with an answerability score.

Shapes: B batch, T length, D d_model, K start_n_top, E end_n_top.

As the original run_squad head: start logits from each position; end logits conditioned on
the start (its hidden state concatenated to every position, tanh projection, LayerNorm); an
answer-class logit from the <cls> state and the start-probability-weighted state. Training
conditions the end on the gold start; inference keeps the K best starts and for each the E best
ends. p_mask (1 = no answer here) masks both. Original variables: model/start_logits/dense,
model/end_logits/{dense_0,LayerNorm,dense_1}, model/answer_class/{dense_0,dense_1}; Hugging
Face: start_logits.dense, end_logits.{dense_0,LayerNorm,dense_1}, answer_class.{dense_0,dense_1}.
"""

import keras
import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.backbone import backbone_inputs

FIRST_SEGMENT = 0  # the context's segment id in `context <sep> question <sep> <cls>`


def answer_position_mask(input_ids, segment_ids, sep_id: int):
  """p_mask [B, T] float32 of a packed `context <sep> question <sep> <cls>` window: 0 where an
  answer may start or end (the context's pieces, and <cls> = "no answer", the last position),
  1 elsewhere (the separators, the question, padding). Takes tensors or NumPy arrays."""
  context = tf.logical_and(tf.equal(segment_ids, FIRST_SEGMENT), tf.not_equal(input_ids, sep_id))
  length = tf.shape(input_ids)[-1]
  cls = tf.equal(tf.range(length), length - 1)  # not a bool one_hot: ONNX has no such OneHot
  return tf.where(tf.logical_or(context, cls), 0.0, 1.0)


def _masked(logits, p_mask):
  return logits * (1.0 - p_mask) + numerics.MASKED_SCORE * p_mask


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetQuestionAnswering(XLNetHead):
  """SQuAD-style span extraction with an answerability score.

  Inputs: backbone inputs + p_mask [B, T] + cls_index [B]; in training also
  start_positions [B]. Returns (training) start_log_probs, end_log_probs [B, T], cls_logits
  [B]; (inference) start_top_log_probs / start_top_index [B, K], end_top_log_probs /
  end_top_index [B, K, E], cls_logits [B]. Raw strings (questions, contexts) go to predict,
  packed by `.preprocessor` as the SQuAD window `context <sep> question <sep> <cls>`.

  Args:
    backbone: the XLNetModel, or an XLNetConfig (or a dict of its fields) to build one from.
    start_n_top: K, the best starts kept at inference.
    end_n_top: E, the best ends kept for each of them.
    **kwargs: Keras Model arguments (name).

  >>> import numpy as np
  >>> from xlnet_tf import XLNetConfig, XLNetModel, XLNetQuestionAnswering
  >>> reader = XLNetQuestionAnswering(XLNetModel(XLNetConfig.preset("tiny")), start_n_top=3,
  ...                                 end_n_top=2)
  >>> outputs = reader({"input_ids": np.array([[5, 17, 42, 8, 3], [0, 0, 12, 9, 3]]),
  ...                   "input_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]),
  ...                   "p_mask": np.array([[0, 0, 0, 1, 1], [1, 1, 0, 1, 1]]),  # 1 = no answer
  ...                   "cls_index": np.array([4, 4])})
  >>> for key, value in sorted(outputs.items()):  # K 3 starts, E 2 ends for each
  ...   print(key, tuple(value.shape))
  cls_logits (2,)
  end_top_index (2, 3, 2)
  end_top_log_probs (2, 3, 2)
  start_top_index (2, 3)
  start_top_log_probs (2, 3)
  """

  serving_text_inputs = ("question", "context")  # packed context <sep> question <sep> <cls>
  extra_inputs = ("p_mask", "cls_index")  # besides the backbone's
  training_targets = ("start_positions", "end_positions", "is_impossible")
  RUN_TIME_ARGUMENTS = ("start_n_top", "end_n_top")  # the beam of answer spans
  UNUSED_BACKBONE_VARIABLES = ("mask_emb",)  # reads the content stream only

  def __init__(self, backbone, start_n_top: int = 5, end_n_top: int = 5, **kwargs):
    super().__init__(backbone, **kwargs)
    config = self.backbone.config
    self.start_n_top, self.end_n_top = start_n_top, end_n_top
    d_model = config.d_model
    init = lambda: keras.initializers.RandomNormal(stddev=config.init_std)
    self.start_dense = keras.layers.Dense(1, kernel_initializer=init(), name="start_dense")
    self.end_dense_0 = keras.layers.Dense(d_model, activation="tanh", kernel_initializer=init(),
                                          name="end_dense_0")
    self.end_norm = keras.layers.LayerNormalization(
        epsilon=numerics.LAYER_NORM_EPSILON, dtype="float32", name="end_LayerNorm")
    self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=init(), name="end_dense_1")
    self.answer_dense_0 = keras.layers.Dense(d_model, activation="tanh",
                                             kernel_initializer=init(), name="answer_dense_0")
    self.answer_dense_1 = keras.layers.Dense(1, use_bias=False, kernel_initializer=init(),
                                             name="answer_dense_1")
    self.dropout = FastDropout(config.dropout)
    for layer, width in ((self.start_dense, d_model), (self.end_dense_0, 2 * d_model),
                         (self.end_norm, d_model), (self.end_dense_1, d_model),
                         (self.answer_dense_0, 2 * d_model), (self.answer_dense_1, d_model)):
      layer.build((None, width))

  def _end_logits(self, hidden, start_features, p_mask):
    """hidden [B, T, D], start_features [B, ..., D] broadcast over T -> masked [B, ..., T]."""
    if len(start_features.shape) == 2:  # one start per example
      features = tf.concat([hidden, tf.broadcast_to(start_features[:, None], tf.shape(hidden))],
                           axis=-1)  # [B, T, 2D]
      mask = p_mask
    else:  # [B, K, D]: K candidate starts
      tiled = tf.broadcast_to(hidden[:, None], tf.concat([tf.shape(start_features)[:2],
                                                          tf.shape(hidden)[1:]], 0))
      starts = tf.broadcast_to(start_features[:, :, None], tf.shape(tiled))
      features = tf.concat([tiled, starts], axis=-1)  # [B, K, T, 2D]
      mask = p_mask[:, None]
    projected = self.end_norm(tf.cast(self.end_dense_0(features), tf.float32))
    logits = tf.cast(self.end_dense_1(projected), tf.float32)[..., 0]
    return _masked(logits, mask)

  def call(self, inputs, training=False):
    """Span scores given the gold start (training), or the best spans (inference).

    Args:
      inputs: the backbone's inputs plus p_mask [B, T] (1 = no answer starts or ends there)
        and cls_index int [B] (the <cls> position). With start_positions int [B] the end is
        conditioned on that start (training); without, on each of the K best starts.
      training: apply dropout.

    Returns:
      With start_positions: {"start_log_probs", "end_log_probs": [B, T], "cls_logits": [B]}.
      Without: {"start_top_log_probs", "start_top_index": [B, K], "end_top_log_probs",
      "end_top_index": [B, K, E], "cls_logits": [B]}.
    """
    hidden = self.backbone(backbone_inputs(inputs), training=training)["sequence_output"]
    hidden = tf.cast(hidden, tf.float32)  # [B, T, D]
    p_mask = tf.cast(inputs["p_mask"], tf.float32)
    start_logits = _masked(tf.cast(self.start_dense(hidden), tf.float32)[..., 0], p_mask)
    start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
    # Answerability: <cls> state + start-probability-weighted state.
    cls_features = tf.gather(hidden, tf.cast(inputs["cls_index"], tf.int32), batch_dims=1)
    start_weighted = tf.einsum("bt,btd->bd", tf.nn.softmax(start_logits, axis=-1), hidden)
    answer = self.answer_dense_0(tf.concat([start_weighted, cls_features], axis=-1))
    cls_logits = self.answer_dense_1(self.dropout(answer, training=training))[:, 0]
    if "start_positions" in inputs:
      start_features = tf.gather(hidden, tf.cast(inputs["start_positions"], tf.int32),
                                 batch_dims=1)  # [B, D]
      end_logits = self._end_logits(hidden, start_features, p_mask)
      return {"start_log_probs": start_log_probs,
              "end_log_probs": tf.nn.log_softmax(end_logits, axis=-1),
              "cls_logits": cls_logits}
    start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, self.start_n_top)
    start_features = tf.gather(hidden, start_top_index, batch_dims=1)  # [B, K, D]
    end_log_probs = tf.nn.log_softmax(self._end_logits(hidden, start_features, p_mask), -1)
    end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, self.end_n_top)
    return {"start_top_log_probs": start_top_log_probs, "start_top_index": start_top_index,
            "end_top_log_probs": end_top_log_probs, "end_top_index": end_top_index,
            "cls_logits": cls_logits}

  def serving_features(self, features, sep_id: int):
    """The packed window's features plus what this head reads: p_mask and cls_index.

    Args:
      features: input_ids, segment_ids, input_mask [B, T] of packed
        `context <sep> question <sep> <cls>` windows.
      sep_id: the tokenizer's <sep> id (never an answer).

    Returns:
      `features` with p_mask [B, T] (0 on the context's pieces and <cls>, 1 elsewhere) and
      cls_index [B] (the last position).
    """
    input_ids = features["input_ids"]
    return {**features,
            "p_mask": answer_position_mask(input_ids, features["segment_ids"], sep_id),
            "cls_index": tf.fill([tf.shape(input_ids)[0]], tf.shape(input_ids)[1] - 1)}

  def serving_outputs(self, features):
    """What a SavedModel of this head returns (see xlnet_tf.serving.saved_model).

    Args:
      features: the packed inputs with p_mask and cls_index (`serving_features`).

    Returns:
      {"start_top_index", "start_top_log_probs": [B, K], "end_top_index",
      "end_top_log_probs": [B, K, E], "answerability_score": [B] (-cls_logits: higher is
      more answerable)}.
    """
    outputs = self(features, training=False)
    return {"start_top_index": outputs["start_top_index"],
            "start_top_log_probs": outputs["start_top_log_probs"],
            "end_top_index": outputs["end_top_index"],
            "end_top_log_probs": outputs["end_top_log_probs"],
            "answerability_score": -outputs["cls_logits"]}  # higher = more answerable

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    """The SQuAD loss, for Model.fit on feature dicts that hold the answers.

    Args:
      x: the batch's features, with start_positions, end_positions and is_impossible [B].
      y: unused (the targets are in `x`).
      y_pred: what `call` returned with start_positions.
      sample_weight: unused.
      training: unused.

    Returns:
      The mean over the examples of (start + end cross-entropy) / 2 + answerability
      cross-entropy / 2 (the original's), a float32 scalar.
    """
    return squad_loss(y_pred, x["start_positions"], x["end_positions"], x["is_impossible"])

  def loss_counts(self, x, y=None):
    """What the loss is a mean over (the examples), from the data alone.

    A custom training loop sums it over replicas and micro-batches
    (training.distributed_steps).

    Args:
      x: the batch's features (start_positions [B]).
      y: unused.

    Returns:
      The number of examples, a float32 scalar.
    """
    return tf.cast(tf.shape(x["start_positions"])[0], tf.float32)

  def loss_sums(self, x, y, y_pred):
    """The loss summed over this batch's examples (compute_loss = it / loss_counts).

    Args:
      x: the batch's features, with start_positions, end_positions and is_impossible [B].
      y: unused.
      y_pred: what `call` returned with start_positions.

    Returns:
      A float32 scalar.
    """
    return squad_loss_sum(y_pred, x["start_positions"], x["end_positions"], x["is_impossible"])

  def original_head_variables(self):
    """The head's weights under their names in the original TF1 checkpoints.

    Returns:
      {original name: variable}: model/start_logits/dense,
      model/end_logits/{dense_0,LayerNorm,dense_1}, model/answer_class/{dense_0,dense_1}.
    """
    names = {"model/start_logits/dense/kernel": self.start_dense.kernel,
             "model/start_logits/dense/bias": self.start_dense.bias,
             "model/end_logits/dense_0/kernel": self.end_dense_0.kernel,
             "model/end_logits/dense_0/bias": self.end_dense_0.bias,
             "model/end_logits/LayerNorm/gamma": self.end_norm.gamma,
             "model/end_logits/LayerNorm/beta": self.end_norm.beta,
             "model/end_logits/dense_1/kernel": self.end_dense_1.kernel,
             "model/end_logits/dense_1/bias": self.end_dense_1.bias,
             "model/answer_class/dense_0/kernel": self.answer_dense_0.kernel,
             "model/answer_class/dense_0/bias": self.answer_dense_0.bias,
             "model/answer_class/dense_1/kernel": self.answer_dense_1.kernel}
    return names

  def huggingface_head_names(self):
    """How Hugging Face's XLNetForQuestionAnswering names this head's weights.

    Returns:
      {HF name: (original name, transpose)}: start_logits.dense.*,
      end_logits.{dense_0,LayerNorm,dense_1}.*, answer_class.{dense_0,dense_1}.*.
    """
    names = {}
    for original in self.original_head_variables():
      scope, layer, kind = original.split("/")[1:]
      hf_kind = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}[kind]
      names[f"{scope}.{layer}.{hf_kind}"] = (original, kind == "kernel")
    return names

  def head_config(self):
    """The constructor arguments head.json stores, besides the backbone.

    Returns:
      {"start_n_top": start_n_top, "end_n_top": end_n_top}.
    """
    return {"start_n_top": self.start_n_top, "end_n_top": self.end_n_top}


def squad_loss_sum(outputs, start_positions, end_positions, is_impossible):
  """Summed over the examples: (start + end cross-entropy) / 2 + answerability
  cross-entropy / 2, as the original's per-example loss."""
  def span_loss(log_probs, positions):
    return -tf.reduce_sum(tf.gather(log_probs, tf.cast(positions, tf.int32), batch_dims=1))
  loss = 0.5 * (span_loss(outputs["start_log_probs"], start_positions)
                + span_loss(outputs["end_log_probs"], end_positions))
  answerable = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(is_impossible, tf.float32), logits=outputs["cls_logits"])
  return loss + 0.5 * tf.reduce_sum(answerable)


def squad_loss(outputs, start_positions, end_positions, is_impossible):
  """The mean over the examples of squad_loss_sum's per-example loss (the original's)."""
  examples = tf.cast(tf.shape(outputs["cls_logits"])[0], tf.float32)
  return squad_loss_sum(outputs, start_positions, end_positions, is_impossible) / examples
