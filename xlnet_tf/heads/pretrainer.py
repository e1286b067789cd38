"""XLNetPretrainer: the permutation language-modelling head over XLNetModel.

Shapes: B batch, T length, P predictions, V vocabulary, D d_model, M memory length, L layers.
"""

import keras
import tensorflow as tf

from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.model import backbone_inputs


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


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetPretrainer(XLNetHead):
  """Query stream -> logits over the vocabulary, weights tied to the word embedding.

  Call with the backbone's inputs (extra keys such as `target` are ignored); returns
  {"logits": [B, P, V], "new_mems": [...] when mem_len > 0}. `model.fit` on batches of
  `xlnet_tf.pretraining.pretraining_dataset` trains it, carrying the memory from one batch to the
  next (see `train_step`).
  """

  def __init__(self, backbone, **kwargs):
    super().__init__(backbone, **kwargs)
    self.lm_bias = self.add_weight(name="lm_loss_bias", shape=(self.backbone.config.n_token,),
                                   initializer="zeros")
    self._memory = None  # memory carried across fit steps (see train_step)
    self.loss_tracker = keras.metrics.Mean(name="loss")

  def call(self, inputs, training=False):
    features = backbone_inputs(inputs)
    if "target_mapping" not in features:
      raise ValueError("XLNetPretrainer needs 'target_mapping' [B, P, T] (the predictions)")
    outputs = self.backbone(features, training=training)
    query = outputs["query_output"]  # [B, P, D]
    embedding = tf.cast(self.backbone.word_embedding, query.dtype)
    logits = tf.einsum("bpd,vd->bpv", query, embedding) + tf.cast(self.lm_bias, query.dtype)
    result = {"logits": logits}
    if "new_mems" in outputs:
      result["new_mems"] = outputs["new_mems"]
    return result

  def original_head_variables(self):
    return {"model/lm_loss/bias": self.lm_bias}

  # ---- Model.fit with memory ---------------------------------------------------------------
  def _memory_state(self, batch_size):
    """Non-trainable memory carried across fit steps: [L, B, M, D] (one machine)."""
    config = self.backbone.config
    if self._memory is None:
      self._memory = self.add_weight(
          name="fit_memory", shape=(config.n_layer, batch_size, config.mem_len, config.d_model),
          initializer="zeros", trainable=False)
    return self._memory

  def train_step(self, data):
    """One optimizer step; with mem_len > 0 the memory of the previous batch is fed in.

    The batches must come in stream order (as `pretraining_dataset` yields them) with a static
    batch size. Memory is kept on one machine; distributed runs use run/pretrain.py's loop.
    """
    config = self.backbone.config
    inputs = dict(data)
    memory_state = None
    if config.mem_len > 0:
      memory_state = self._memory_state(int(inputs["input_ids"].shape[0]))
      inputs["mems"] = tf.unstack(tf.cast(memory_state, self.compute_dtype))
    with tf.GradientTape() as tape:
      outputs = self(inputs, training=True)
      loss = masked_lm_loss(outputs["logits"], inputs["target"], inputs["target_mask"])
      scaled = self.optimizer.scale_loss(loss) if hasattr(self.optimizer, "scale_loss") else loss
    variables = self.trainable_variables
    gradients = tape.gradient(scaled, variables)
    self.optimizer.apply_gradients(zip(gradients, variables))
    if memory_state is not None:
      memory_state.assign(tf.cast(tf.stack(outputs["new_mems"]), memory_state.dtype))
    self.loss_tracker.update_state(loss)
    return {"loss": self.loss_tracker.result()}

  def test_step(self, data):
    outputs = self(dict(data), training=False)
    self.loss_tracker.update_state(
        masked_lm_loss(outputs["logits"], data["target"], data["target_mask"]))
    return {"loss": self.loss_tracker.result()}

  @property
  def metrics(self):
    return [self.loss_tracker]

