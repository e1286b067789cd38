"""One pretraining step and one held-out evaluation step under a tf.distribute strategy (the
per-replica computation of pretraining.loop).

A training step: the global number of targets (and of examples) summed over replicas ->
forward/backward per replica of the loss divided by them (XLA when jit_compile) -> gradients
summed over replicas -> global-norm clipping -> AdamW update; so the loss and the update equal a
single-device run on the same global batch. With float16 the loss is scaled (training.loss_scale)
and a dynamic scale skips the update of a step whose gradients are not finite.
"""

import tensorflow as tf

from xlnet_tf.model import backbone_inputs
from xlnet_tf.ops import random as random_ops
from xlnet_tf.training.optimization import global_norm


class PretrainingSteps:
  """The step functions of `model` (an XLNetPretrainer) and `optimizer` under `strategy`.

  options: the run's PretrainingOptions (clip_norm, seed, a static loss_scale, jit_compile);
  loss_scale: a training.loss_scale.DynamicLossScale, or None.
  """

  def __init__(self, strategy: tf.distribute.Strategy, model, optimizer, loss_scale, options):
    self.strategy, self.model, self.optimizer = strategy, model, optimizer
    self.loss_scale, self.options = loss_scale, options
    self.compute = tf.function(self.forward_backward, jit_compile=options.jit_compile)
    self.evaluate_replica = tf.function(self.forward, jit_compile=options.jit_compile)

  def model_inputs(self, batch, mems):
    inputs = backbone_inputs(batch)
    if self.model.backbone.config.mem_len:
      inputs["mems"] = list(mems)
    return inputs

  def forward(self, batch, mems):
    outputs = self.model(self.model_inputs(batch, mems), training=False)
    sums = tf.stack(self.model.pretraining_loss_sums(outputs, batch))
    return sums, tuple(outputs.get("new_mems", ()))

  def forward_backward(self, batch, mems, normalizers, loss_scale, dropout_seed):
    """The replica's share of the global loss (sums over the global counts) and gradients
    (computed from the loss times `loss_scale`, unless None, and divided by it again); the
    dropout masks derive from `dropout_seed` (int64 [2])."""
    with tf.GradientTape() as tape, random_ops.seeds_derived_from(dropout_seed):
      outputs = self.model(self.model_inputs(batch, mems), training=True)
      lm_sum, _, ns_sum, _ = self.model.pretraining_loss_sums(outputs, batch)
      loss = lm_sum / normalizers[0] + ns_sum / normalizers[1]
      scaled = loss if loss_scale is None else loss * loss_scale
    variables = self.model.trainable_variables
    gradients = tape.gradient(scaled, variables)
    # Unused by the objective (masked LM has no query stream: mask_emb): a zero update.
    gradients = [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]
    if loss_scale is not None:
      gradients = [g / loss_scale for g in gradients]
    return loss, gradients, tuple(outputs.get("new_mems", ()))

  def _current_loss_scale(self):
    """This step's loss scale: the dynamic scale's value, the static one, or None."""
    if self.loss_scale is not None:
      return tf.convert_to_tensor(self.loss_scale.scale)
    if self.options.loss_scale:
      return tf.constant(self.options.loss_scale, tf.float32)
    return None

  def _replica_step(self, batch, mems):
    context = tf.distribute.get_replica_context()
    # The counts depend on the data only: summed over replicas first, each replica's loss is
    # its share of the global mean, and the summed gradients are the global mean's.
    counts = tf.stack([tf.reduce_sum(tf.cast(batch["target_mask"], tf.float32)),
                       tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)])
    normalizers = tf.maximum(context.all_reduce(tf.distribute.ReduceOp.SUM, counts), 1.0)
    dropout_seed = random_ops.step_seed(self.options.seed, self.optimizer.iterations,
                                        context.replica_id_in_sync_group,
                                        context.num_replicas_in_sync)
    loss, gradients, new_mems = self.compute(batch, mems, normalizers,
                                             self._current_loss_scale(), dropout_seed)
    loss = context.all_reduce(tf.distribute.ReduceOp.SUM, loss)
    gradients = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                   [tf.cast(g, tf.float32) for g in gradients])
    # Clip to the global norm and hand each replica its equal share (the optimizer sums over
    # replicas again), as one factor applied inside the optimizer's fused update; a non-finite
    # norm makes it 0 (a zero gradient), or, with a dynamic loss scale, skips the update.
    norm = global_norm(gradients)
    finite = tf.math.is_finite(norm)
    clip = tf.minimum(1.0, self.options.clip_norm / norm) if self.options.clip_norm else 1.0
    scale = tf.where(finite, clip / context.num_replicas_in_sync, 0.0)
    self.optimizer.apply_scaled_gradients(zip(gradients, self.model.trainable_variables), scale,
                                          apply_update=None if self.loss_scale is None else finite)
    if self.loss_scale is not None:
      self.loss_scale.update(finite)
    return loss, norm, new_mems

  @tf.function
  def train_step(self, iterator, mems):
    """(loss, gradient norm, new memory) of the next global batch of `iterator`."""
    loss, norm, new_mems = self.strategy.run(self._replica_step, args=(next(iterator), mems))
    return (self.strategy.experimental_local_results(loss)[0],
            self.strategy.experimental_local_results(norm)[0], new_mems)

  @tf.function
  def eval_step(self, iterator, mems):
    """(the loss sums of pretraining_loss_sums over all replicas, new memory)."""
    sums, new_mems = self.strategy.run(self.evaluate_replica, args=(next(iterator), mems))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, sums, axis=None), new_mems
