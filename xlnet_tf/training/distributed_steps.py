"""One training step under any tf.distribute strategy, shared by pretraining and fine-tuning.

The loss is a sum of terms, each a per-replica sum divided by a GLOBAL count (`LossTerms`:
LM targets, examples, scored tokens), so it is the mean over the whole global batch whatever the
number of replicas or micro-batches:

  counts of the replica's batch (from the data alone) -> summed over replicas
  -> per micro-batch (gradient accumulation, K of them one after another): forward/backward of
     sum / global count (XLA when jit_compile), gradients added up
  -> gradients summed over replicas -> global-norm clipping -> one AdamW update.

So loss and update equal a single-device step on the same global batch, and K micro-batches
equal one step on the whole batch (the sums are linear; only the order of additions differs).
Dropout draws its masks from a seed fixed by (seed, step, micro-batch, replica)
(ops.random.step_seed): a killed run resumed draws the masks of an uninterrupted one. With
float16 the loss is scaled (a static scale, or training.loss_scale's dynamic one that skips the
update of a step whose gradients are not finite).
"""

import dataclasses
from typing import Callable, Optional, Sequence, Tuple

import tensorflow as tf

from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.modeling.ops import random as random_ops
from xlnet_tf.training.optimization import XLNetAdamW, create_optimizer, global_norm
from xlnet_tf.training.options import OptimizerOptions


@dataclasses.dataclass(frozen=True)
class LossTerms:
  """A loss as terms sum_k / count_k with counts over the global batch.

  counts(batch) -> float32 [k]: what each term is a mean over (targets, examples), from the
    data alone, so they can be summed over replicas before the forward pass.
  sums(batch, mems, training) -> ([k] float32 scalars, new mems tuple): the forward pass and
    the per-term sums over this batch (mems: the memory of a model with mem_len, else ()).
  """
  counts: Callable[..., tf.Tensor]
  sums: Callable[..., Tuple[Sequence[tf.Tensor], tuple]]


@dataclasses.dataclass(frozen=True)
class StepOptions:
  """How a step runs, from the run's options (its OptimizerOptions' clip_norm, its
  RuntimeOptions' seed, ...)."""
  clip_norm: Optional[float]         # global-norm clipping after the all-reduce (None: none)
  seed: int                          # dropout masks: a function of (seed, step, replica)
  jit_compile: bool
  loss_scale: Optional[float] = None  # a static loss scale (float16)
  accumulation_steps: int = 1        # micro-batches per step (gradient accumulation)
  # Rows of a batch that belong together in every micro-batch: 2 with bi_data (a micro-batch
  # takes its share of the forward and of the backward half).
  row_groups: int = 1
  # A variable the loss does not reach (masked LM: mask_emb): a zero gradient (its weight decay
  # still applies: pretraining's rule), or, when False, left alone as Keras' apply_gradients
  # leaves it (fine-tuning: the update Model.fit made).
  zero_unused_gradients: bool = True


def step_optimizer(model, options: OptimizerOptions, train_steps: int,
                   adjustable_total: bool = False) -> XLNetAdamW:
  """The optimizer `options` say for DistributedSteps, built on the model's variables (in the
  strategy's scope). It does not clip: the step clips the summed gradients after the
  all-reduce, as one device would, at StepOptions.clip_norm (options.clip_norm)."""
  optimizer = create_optimizer(model, dataclasses.replace(options, clip_norm=None), train_steps,
                               adjustable_total=adjustable_total)
  optimizer.build(model.trainable_variables)
  return optimizer


def check_accumulation(accumulation_steps: int, batch_size: int, replicas: int = 1,
                       row_groups: int = 1, batch_flag: str = "--train_batch_size") -> None:
  """Refuses accumulation steps below 1 or not dividing each replica's batch (in each row
  group): one line naming the flags."""
  require(accumulation_steps >= 1, "--gradient_accumulation_steps", "at least 1",
          accumulation_steps)
  per_replica, rest = divmod(batch_size, replicas)
  if rest:
    raise UserInputError(f"{batch_flag}={batch_size} must be divisible by the {replicas} "
                         "replicas")
  if per_replica % (row_groups * accumulation_steps) == 0:
    return
  where = f"{batch_flag}={batch_size}"
  if replicas > 1 or row_groups > 1:
    parts = [f"{replicas} replicas"] if replicas > 1 else []
    parts += ["the forward and backward halves (bi_data)"] if row_groups > 1 else []
    where = f"the {per_replica // row_groups} rows of {where} for each of {' x '.join(parts)}"
  raise UserInputError(f"--gradient_accumulation_steps={accumulation_steps} must divide "
                       f"{where}: each step's batch is split into that many equal "
                       "micro-batches")


class DistributedSteps:
  """The train step of `model` and `optimizer` (an XLNetAdamW) under `strategy`, with the loss
  `loss` (LossTerms) and `options` (StepOptions); `loss_scale`: a DynamicLossScale or None."""

  def __init__(self, strategy: tf.distribute.Strategy, model, optimizer, loss: LossTerms,
               options: StepOptions, loss_scale=None):
    self.strategy, self.model, self.optimizer = strategy, model, optimizer
    self.loss, self.step_options, self.loss_scale = loss, options, loss_scale
    self.compute = tf.function(self.forward_backward, jit_compile=options.jit_compile,
                               autograph=False)

  def trained_variables(self):
    """The variables a step computes gradients for and updates (the one place they are
    chosen)."""
    return self.model.trainable_variables

  def forward_backward(self, batch, mems, normalizers, loss_scale, dropout_seed):
    """The replica's share of the global loss (sums over the global counts `normalizers`) and
    gradients (computed from the loss times `loss_scale`, unless None, and divided by it
    again); the dropout masks derive from `dropout_seed` (int64 [2])."""
    with tf.GradientTape() as tape, random_ops.seeds_derived_from(dropout_seed):
      sums, new_mems = self.loss.sums(batch, mems, True)
      loss = sums[0] / normalizers[0]
      for index in range(1, len(sums)):
        loss = loss + sums[index] / normalizers[index]
      scaled = loss if loss_scale is None else loss * loss_scale
    variables = self.trained_variables()
    gradients = tape.gradient(scaled, variables)
    if self.step_options.zero_unused_gradients:
      gradients = [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]
    if loss_scale is not None:
      gradients = [None if g is None else g / loss_scale for g in gradients]
    return loss, gradients, tuple(new_mems)

  def _current_loss_scale(self):
    """This step's loss scale: the dynamic scale's value, the static one, or None."""
    if self.loss_scale is not None:
      return tf.convert_to_tensor(self.loss_scale.scale)
    if self.step_options.loss_scale:
      return tf.constant(self.step_options.loss_scale, tf.float32)
    return None

  def _dropout_seed(self, context, micro_batch: int = 0):
    steps = self.step_options.accumulation_steps
    step = self.optimizer.iterations if steps == 1 else (
        tf.cast(self.optimizer.iterations, tf.int64) * steps + micro_batch)
    return random_ops.step_seed(self.step_options.seed, step, context.replica_id_in_sync_group,
                                context.num_replicas_in_sync)

  def _micro_rows(self, tensor, index: int):
    """Micro-batch `index` of K of a [B, ...] tensor: rows index*B/K... of each row group."""
    groups, parts = self.step_options.row_groups, self.step_options.accumulation_steps
    rest = tensor.shape[1:]
    rest = rest.as_list() if rest.is_fully_defined() else tf.unstack(tf.shape(tensor)[1:])
    return tf.reshape(tf.reshape(tensor, [groups, parts, -1, *rest])[:, index], [-1, *rest])

  def _joined_rows(self, pieces):
    """The inverse of _micro_rows: K [B/K, ...] tensors -> [B, ...]."""
    groups = self.step_options.row_groups
    rest = pieces[0].shape[1:].as_list()
    stacked = tf.stack([tf.reshape(piece, [groups, -1, *rest]) for piece in pieces], axis=1)
    return tf.reshape(stacked, [-1, *rest])

  def _accumulated(self, batch, mems, normalizers, loss_scale, context):
    """(loss, gradients, new mems) of the replica's batch as K micro-batches, one after
    another: each starts after the previous one's gradients exist (peak memory of one)."""
    loss, gradients, new_mems = None, None, []
    for index in range(self.step_options.accumulation_steps):
      with tf.control_dependencies([g for g in gradients or [] if g is not None]):
        micro_batch = tf.nest.map_structure(lambda t, i=index: self._micro_rows(t, i), batch)
        micro_mems = tuple(self._micro_rows(m, index) for m in mems)
      micro_loss, micro_gradients, micro_new_mems = self.compute(
          micro_batch, micro_mems, normalizers, loss_scale, self._dropout_seed(context, index))
      # Dense, with the variables' static shapes (an embedding's IndexedSlices made dense have
      # none, and replicas must pack their all-reduce alike).
      micro_gradients = [None if g is None else
                         tf.reshape(tf.cast(tf.convert_to_tensor(g), tf.float32), v.shape)
                         for g, v in zip(micro_gradients, self.trained_variables())]
      if gradients is None:
        loss, gradients = micro_loss, micro_gradients
      else:
        loss = loss + micro_loss
        gradients = [None if a is None else a + b for a, b in zip(gradients, micro_gradients)]
      new_mems.append(micro_new_mems)
    return loss, gradients, tuple(self._joined_rows(list(layer)) for layer in zip(*new_mems))

  def _replica_step(self, batch, mems):
    context = tf.distribute.get_replica_context()
    # The counts depend on the data only: summed over replicas first, each replica's loss is
    # its share of the global mean, and the summed gradients are the global mean's.
    normalizers = tf.maximum(
        context.all_reduce(tf.distribute.ReduceOp.SUM, self.loss.counts(batch)), 1.0)
    if self.step_options.accumulation_steps == 1:
      loss, gradients, new_mems = self.compute(batch, mems, normalizers,
                                               self._current_loss_scale(),
                                               self._dropout_seed(context))
    else:
      loss, gradients, new_mems = self._accumulated(batch, mems, normalizers,
                                                    self._current_loss_scale(), context)
    updated = [(g, v) for g, v in zip(gradients, self.trained_variables()) if g is not None]
    loss = context.all_reduce(tf.distribute.ReduceOp.SUM, loss)
    gradients = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                   [tf.cast(g, tf.float32) for g, _ in updated])
    # Clip to the global norm and hand each replica its equal share (the optimizer sums over
    # replicas again), as one factor applied inside the optimizer's fused update; a non-finite
    # norm makes it 0 (a zero gradient), or, with a dynamic loss scale, skips the update.
    norm = global_norm(gradients)
    finite = tf.math.is_finite(norm)
    clip_norm = self.step_options.clip_norm
    clip = tf.minimum(1.0, clip_norm / norm) if clip_norm else 1.0
    scale = tf.where(finite, clip / context.num_replicas_in_sync, 0.0)
    self.optimizer.apply_scaled_gradients(zip(gradients, [v for _, v in updated]), scale,
                                          apply_update=None if self.loss_scale is None else finite)
    if self.loss_scale is not None:
      self.loss_scale.update(finite)
    return loss, norm, new_mems

  @tf.function(autograph=False)
  def train_step(self, iterator, mems=()):
    """(loss, gradient norm, new memory) of the next global batch of `iterator`."""
    loss, norm, new_mems = self.strategy.run(self._replica_step, args=(next(iterator), mems))
    return (self.strategy.experimental_local_results(loss)[0],
            self.strategy.experimental_local_results(norm)[0], new_mems)
