"""XLNetPretrainer: the language-modelling head over XLNetModel, for each objective
(`xlnet_tf.objectives`: which stream predicts, at which positions):

- perm: XLNet's permutation LM; the query stream predicts the targets (perm_mask and
  target_mapping from the data).
- mlm: BERT's masked LM on the same backbone (the paper's Table 6 baseline); the content
  stream at each target position predicts it, attending to the whole corrupted input.
- clm: Transformer-XL's left-to-right LM (backbone attn_type "uni"); the content stream at
  every position predicts the next token (no target_mapping; logits [B, T, V]).
Optionally a next-sentence loss (B follows A or not) from the content stream at <cls>.

Shapes: B batch, T length, P predictions, V vocabulary, D d_model, M memory length, L layers.
"""

import keras
import tensorflow as tf

from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.modeling.backbone import backbone_inputs
from xlnet_tf.modeling.memory import RecurrenceMemory
from xlnet_tf.modeling.ops.flat_matmul import flat_matmul
from xlnet_tf.modeling.ops.int8_packing import quantize_kernel
from xlnet_tf.modeling.ops.int8_products import int8_matmul
from xlnet_tf import objectives


def lm_loss_sum(logits, target, target_mask):
  """(sum of cross-entropy over real targets, their count), float32 scalars.

  logits [B, P, V], target int [B, P], target_mask [B, P] (1 = a real target). The sum and the
  count separately, so that a distributed step can divide by the global count."""
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(target, tf.int32), logits=tf.cast(logits, tf.float32))
  target_mask = tf.cast(target_mask, tf.float32)
  return tf.reduce_sum(losses * target_mask), tf.reduce_sum(target_mask)


def masked_lm_loss(logits, target, target_mask):
  """The mean cross-entropy per real target (see lm_loss_sum)."""
  loss_sum, count = lm_loss_sum(logits, target, target_mask)
  return loss_sum / tf.maximum(count, 1.0)


def next_sentence_loss_sum(logits, label):
  """(sum of cross-entropy of the is-next labels, their count), float32 scalars."""
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(label, tf.int32), logits=tf.cast(logits, tf.float32))
  return tf.reduce_sum(losses), tf.cast(tf.size(losses), tf.float32)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetPretrainer(XLNetHead):
  """Predicted positions -> logits over the vocabulary, weights tied to the word embedding.

  Call with the backbone's inputs (extra keys such as `target` are ignored); returns
  {"logits": [B, P, V], "new_mems": [...] when mem_len > 0, "next_sentence_logits": [B, 2]
  with next_sentence}. `model.fit` on batches of `xlnet_tf.pretraining.pretraining_dataset`
  trains it, carrying the memory from one batch to the next (see `train_step`).

  Args:
    backbone: the XLNetModel, or an XLNetConfig (or a dict of its fields) to build one from.
    objective: "perm" (query stream), "mlm" (content stream at the targets; any perm_mask
      in the inputs is ignored: masked LM attends to the whole input) or "clm" (content
      stream at every position of a "uni" backbone; logits [B, T, V]).
    next_sentence: add a 2-way classifier at the last position (<cls>) for the A/B label.
    **kwargs: Keras Model arguments (name).

  Raises:
    UserInputError: for an unknown objective, or one the backbone's attn_type cannot serve.

  >>> import numpy as np
  >>> from xlnet_tf import XLNetConfig, XLNetModel, XLNetPretrainer
  >>> pretrainer = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny")))  # objective perm
  >>> perm_mask = np.zeros([2, 5, 5], np.float32); perm_mask[:, :, 2] = 1  # none sees 2
  >>> target_mapping = np.zeros([2, 1, 5], np.float32); target_mapping[:, 0, 2] = 1
  >>> outputs = pretrainer({"input_ids": np.array([[5, 17, 42, 8, 3], [0, 0, 12, 9, 3]]),
  ...                       "input_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]),
  ...                       "perm_mask": perm_mask, "target_mapping": target_mapping})
  >>> tuple(outputs["logits"].shape)  # [B, P, V]: position 2 over the 1000 tokens
  (2, 1, 1000)
  """

  LOADED_CONFIG_DEFAULTS = {}  # bi_data as the directory stores it: pretraining uses it
  RUN_TIME_ARGUMENTS = ("objective",)  # the same weights predict in any factorization order

  def __init__(self, backbone, objective: str = "perm", next_sentence: bool = False, **kwargs):
    super().__init__(backbone, **kwargs)
    self.lm_objective = objectives.named(objective)
    self.lm_objective.check_backbone(self.backbone.config.attn_type)
    self.objective, self.next_sentence = objective, next_sentence
    config = self.backbone.config
    self.lm_bias = self.add_weight(name="lm_loss_bias", shape=(config.n_token,),
                                   initializer="zeros")
    self.next_sentence_logit = None
    if next_sentence:
      self.next_sentence_logit = keras.layers.Dense(
          2, kernel_initializer=keras.initializers.RandomNormal(stddev=config.init_std),
          name="next_sentence")
      self.next_sentence_logit.build((None, config.d_model))
    self._memory = None  # the RecurrenceMemory carried across fit steps (see train_step)
    self.loss_tracker = keras.metrics.Mean(name="loss")
    self.lm_output_int8 = self.lm_output_scale = None  # made by quantize("int8")

  def head_config(self):
    """The constructor arguments head.json stores, besides the backbone.

    Returns:
      {"objective": objective, "next_sentence": next_sentence}.
    """
    return {"objective": self.objective, "next_sentence": self.next_sentence}

  def call(self, inputs, training=False):
    """The logits over the vocabulary at the predicted positions.

    Args:
      inputs: the backbone's inputs (input_ids, segment_ids, input_mask, perm_mask,
        target_mapping [B, P, T], mems); other keys (target, ...) are ignored. perm and mlm
        need target_mapping; mlm ignores perm_mask, clm both.
      training: apply dropout.

    Returns:
      {"logits": [B, P, V] ([B, T, V] for clm), "next_sentence_logits": [B, 2] with
      next_sentence, "new_mems": a list of L [B, M', D] when mem_len > 0}.

    Raises:
      ValueError: for perm or mlm inputs without target_mapping.
    """
    features = backbone_inputs(inputs)
    if self.lm_objective.consecutive_segments:
      features.pop("target_mapping", None)
      features.pop("perm_mask", None)
      outputs = self.backbone(features, training=training)
      predicting = outputs["sequence_output"]  # [B, T, D]: every position predicts the next
    elif "target_mapping" not in features:
      raise ValueError("XLNetPretrainer needs 'target_mapping' [B, P, T] (the predictions)")
    elif self.lm_objective.stream == objectives.QUERY_STREAM:
      outputs = self.backbone(features, training=training)
      predicting = outputs["query_output"]  # [B, P, D]
    else:  # the content stream at the targets, attending to the whole input
      target_mapping = features.pop("target_mapping")
      features.pop("perm_mask", None)
      outputs = self.backbone(features, training=training)
      sequence = outputs["sequence_output"]
      predicting = tf.einsum("bpt,btd->bpd", tf.cast(target_mapping, sequence.dtype), sequence)
    result = {"logits": self.lm_logits(predicting)}
    if self.next_sentence_logit is not None:
      result["next_sentence_logits"] = self.next_sentence_logit(
          outputs["sequence_output"][:, -1])  # <cls> ends every example
    if "new_mems" in outputs:
      result["new_mems"] = outputs["new_mems"]
    return result

  def lm_logits(self, hidden):
    """The logits over the vocabulary of hidden states: [..., D] -> [..., V].

    The output projection is the word embedding (tied), plus lm_loss/bias; once quantized,
    the embedding's int8 copy (`quantize`).

    Args:
      hidden: states [..., D] of the stream that predicts.

    Returns:
      The logits [..., V].
    """
    if self.lm_output_int8 is not None:
      logits = int8_matmul(hidden, self.lm_output_int8, self.lm_output_scale,
                           transpose_kernel=True)
    else:
      # Not einsum("...d,vd->...v"): its gradient into the embedding writes out [V, D, ...]
      # (ops/flat_matmul.py; that made training 2.2x slower).
      logits = flat_matmul(hidden, self.backbone.word_embedding, transpose_kernel=True)
    return logits + tf.cast(self.lm_bias, hidden.dtype)

  def _quantize_head_layers(self, mode, config):
    """Also the tied output projection: an int8 copy of the word embedding [V, D], a scale
    per token. The embedding itself stays float (the inputs' lookup reads one row a token);
    the projection reads all of it for every prediction: at batch 1 a decoding step's
    largest single read (98 MB in float32 at base size, 25 MB in int8)."""
    super()._quantize_head_layers(mode, config)
    shape = tuple(self.backbone.word_embedding.shape)
    self.lm_output_int8 = self.add_weight(name="lm_output_int8", shape=shape, dtype="int8",
                                          initializer="zeros", trainable=False)
    self.lm_output_scale = self.add_weight(name="lm_output_scale", shape=shape[:1],
                                           initializer="ones", trainable=False,
                                           dtype="float32", autocast=False)
    if self.backbone.quantization is None:  # quantize(); from_config loads the weights next
      values, scale = quantize_kernel(self.backbone.word_embedding.numpy(), axis=1)
      self.lm_output_int8.assign(values)
      self.lm_output_scale.assign(scale)

  def original_head_variables(self):
    """The head's weights under their names in the original TF1 checkpoints.

    Returns:
      {original name: variable}: model/lm_loss/bias and, with next_sentence,
      model/next_sentence/{kernel,bias}.
    """
    variables = {"model/lm_loss/bias": self.lm_bias}
    if self.next_sentence_logit is not None:
      variables["model/next_sentence/kernel"] = self.next_sentence_logit.kernel
      variables["model/next_sentence/bias"] = self.next_sentence_logit.bias
    return variables

  def pretraining_loss_sums(self, outputs, batch):
    """The losses summed, with what their means divide by (a distributed step's global counts).

    Args:
      outputs: what `call` returned for the batch.
      batch: the data's batch: target int [B, P], target_mask [B, P] (1 = a real target) and,
        with next_sentence, label int [B].

    Returns:
      (LM loss sum, LM target count, next-sentence loss sum, example count), float32
      scalars; the last two 0 without next_sentence.
    """
    lm_sum, lm_count = lm_loss_sum(outputs["logits"], batch["target"], batch["target_mask"])
    if self.next_sentence_logit is None:
      return lm_sum, lm_count, tf.constant(0.0), tf.constant(0.0)
    ns_sum, ns_count = next_sentence_loss_sum(outputs["next_sentence_logits"], batch["label"])
    return lm_sum, lm_count, ns_sum, ns_count

  def pretraining_loss(self, outputs, batch):
    """The mean LM loss per target, plus the mean next-sentence loss with next_sentence.

    Args:
      outputs: what `call` returned for the batch.
      batch: the data's batch, as `pretraining_loss_sums` takes it.

    Returns:
      The loss, a float32 scalar.
    """
    lm_sum, lm_count, ns_sum, ns_count = self.pretraining_loss_sums(outputs, batch)
    return lm_sum / tf.maximum(lm_count, 1.0) + ns_sum / tf.maximum(ns_count, 1.0)

  # ---- Model.fit with memory ---------------------------------------------------------------
  def _fit_memory(self, batch_size):
    """The memory carried across fit steps (one machine), kept in a non-trainable weight
    "fit_memory" [L, B, M, D]."""
    if self._memory is None:
      memory = RecurrenceMemory(self.backbone.config, batch_size, self.compute_dtype)
      memory.keep_in(self.add_weight(name="fit_memory", shape=memory.stacked_shape,
                                     initializer="zeros", trainable=False))
      self._memory = memory
    return self._memory

  def train_step(self, data):
    """One optimizer step of Model.fit; with mem_len > 0 the previous batch's memory is fed in.

    The batches must come in stream order (as `pretraining_dataset` yields them) with a static
    batch size. Memory is kept on one machine; distributed runs use run/pretrain.py's loop.

    Args:
      data: a batch of `pretraining_dataset`: the model's inputs with target and target_mask
        (and label with next_sentence).

    Returns:
      {"loss": the running mean of the loss}.
    """
    inputs = dict(data)
    memory = None
    if self.backbone.config.mem_len > 0:
      memory = self._fit_memory(int(inputs["input_ids"].shape[0]))
      inputs["mems"] = memory.state
    with tf.GradientTape() as tape:
      outputs = self(inputs, training=True)
      loss = self.pretraining_loss(outputs, inputs)
      scaled = self.optimizer.scale_loss(loss) if hasattr(self.optimizer, "scale_loss") else loss
    variables = self.trainable_variables
    gradients = tape.gradient(scaled, variables)
    self.optimizer.apply_gradients(zip(gradients, variables))
    if memory is not None:
      memory.update(outputs["new_mems"])
    self.loss_tracker.update_state(loss)
    return {"loss": self.loss_tracker.result()}

  def test_step(self, data):
    """One step of Model.evaluate: the loss of a batch, with no memory fed in.

    Args:
      data: a batch of `pretraining_dataset`.

    Returns:
      {"loss": the running mean of the loss}.
    """
    outputs = self(dict(data), training=False)
    self.loss_tracker.update_state(self.pretraining_loss(outputs, data))
    return {"loss": self.loss_tracker.result()}

  @property
  def metrics(self):
    """The running mean of the loss that train_step and test_step report."""
    return [self.loss_tracker]

