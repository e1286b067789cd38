"""One pretraining step and one held-out evaluation step under a tf.distribute strategy (the
per-replica computation of pretraining.loop).

The training step is training.distributed_steps' (shared with fine-tuning): the loss is the LM
loss summed over the replica's targets over the global number of targets (plus, with the
next-sentence loss, its sum over the global number of examples), gradients summed over replicas,
global-norm clipping, one AdamW update; so loss and update equal a single-device run on the same
global batch, with or without gradient accumulation (micro-batches carry their rows' memory).
"""

import tensorflow as tf

from xlnet_tf.modeling.backbone import backbone_inputs
from xlnet_tf.training.distributed_steps import DistributedSteps, LossTerms, StepOptions


class PretrainingSteps(DistributedSteps):
  """The step functions of `model` (an XLNetPretrainer) and `optimizer` under `strategy`.

  options: the run's PretrainingOptions (optimizer.clip_norm, runtime.seed, a static
  loss_scale, jit_compile, gradient_accumulation_steps); loss_scale: a
  training.loss_scale.DynamicLossScale, or None.
  """

  def __init__(self, strategy: tf.distribute.Strategy, model, optimizer, loss_scale, options):
    self.options = options
    step_options = StepOptions(
        clip_norm=options.optimizer.clip_norm, seed=options.runtime.seed,
        jit_compile=options.jit_compile,
        loss_scale=None if options.loss_scale == "dynamic" else options.loss_scale,
        accumulation_steps=options.gradient_accumulation_steps,
        row_groups=2 if model.backbone.config.bi_data else 1)
    super().__init__(strategy, model, optimizer, LossTerms(self.counts, self.training_sums),
                     step_options, loss_scale)
    self.evaluate_replica = tf.function(self.forward, jit_compile=options.jit_compile,
                                        autograph=False)

  def model_inputs(self, batch, mems):
    inputs = backbone_inputs(batch)
    if self.model.backbone.config.mem_len:
      inputs["mems"] = list(mems)
    return inputs

  @staticmethod
  def counts(batch):
    """The global loss's denominators: LM targets and examples."""
    return tf.stack([tf.reduce_sum(tf.cast(batch["target_mask"], tf.float32)),
                     tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)])

  def training_sums(self, batch, mems, training):
    outputs = self.model(self.model_inputs(batch, mems), training=training)
    lm_sum, _, ns_sum, _ = self.model.pretraining_loss_sums(outputs, batch)
    return (lm_sum, ns_sum), tuple(outputs.get("new_mems", ()))

  def forward(self, batch, mems):
    outputs = self.model(self.model_inputs(batch, mems), training=False)
    sums = tf.stack(self.model.pretraining_loss_sums(outputs, batch))
    return sums, tuple(outputs.get("new_mems", ()))

  @tf.function(autograph=False)
  def eval_step(self, iterator, mems):
    """(the loss sums of pretraining_loss_sums over all replicas, new memory)."""
    # A Python function around the compiled one, as the train step's: MirroredStrategy.run
    # given a tf.function itself wraps every replica's call in one function, and an XLA one
    # then reads the other CPU replicas' variables from the first device (an error).
    sums, new_mems = self.strategy.run(lambda batch, memory: self.evaluate_replica(batch, memory),
                                       args=(next(iterator), mems))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, sums, axis=None), new_mems
