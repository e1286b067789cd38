"""Fine-tuning on training.distributed_steps (the step pretraining uses): the task's loss as
sums over global counts, the training batches spread over workers and replicas, and the
optimizer, so a step on any strategy (one device, mirrored, multi-worker, TPU) and with any
number of micro-batches equals one step of one device on the same global batch.

Training batches are what tasks.finetuning.feature_dataset yields: a dict of inputs (the
targets among them for heads with their own loss) or (inputs, labels).
"""

from typing import Optional

import keras
import tensorflow as tf

from xlnet_tf.training import loss_scale as loss_scale_lib
from xlnet_tf.training.distributed_steps import (DistributedSteps, LossTerms, StepOptions,
                                                 step_optimizer)


def _inputs_and_labels(batch):
  return batch if isinstance(batch, tuple) else (batch, None)


def _rows(batch):
  return tf.cast(tf.shape(tf.nest.flatten(batch)[0])[0], tf.float32)


def finetuning_loss(model, loss: Optional[keras.losses.Loss] = None) -> LossTerms:
  """The task's loss over the global batch: `loss`, a Keras loss of (labels, outputs) that
  averages over the examples (cross-entropy, squared error: mean x examples = their sum), or,
  when None, the head's own (its loss_sums over its loss_counts: QA, token tagging)."""
  if loss is None:
    if not hasattr(model, "loss_sums"):
      raise ValueError(f"finetune: {type(model).__name__} has no loss of its own (loss_sums); "
                       "pass `loss`")

    def counts(batch):
      return tf.reshape(model.loss_counts(*_inputs_and_labels(batch)), [1])

    def sums(batch, mems, training):
      inputs, labels = _inputs_and_labels(batch)
      return (model.loss_sums(inputs, labels, model(inputs, training=training)),), ()
    return LossTerms(counts, sums)
  reduction = getattr(loss, "reduction", None)
  if reduction not in ("sum_over_batch_size", "sum"):
    raise ValueError(f"finetune: the loss must average or sum over the examples "
                     f"(reduction 'sum_over_batch_size' or 'sum'); got {reduction!r}")

  def keras_sums(batch, mems, training):
    inputs, labels = _inputs_and_labels(batch)
    value = tf.cast(loss(labels, model(inputs, training=training)), tf.float32)
    # Under tf.distribute Keras' Loss.__call__ divides by the replicas in sync (its
    # scale_loss_for_distribution, for Model.fit); here the global count normalises: undone.
    value = value * float(tf.distribute.get_strategy().num_replicas_in_sync)
    return (value * _rows(batch) if reduction == "sum_over_batch_size" else value,), ()
  return LossTerms(lambda batch: tf.reshape(_rows(batch), [1]), keras_sums)


def distributed_batches(strategy: tf.distribute.Strategy, dataset: tf.data.Dataset,
                        batch_size: int):
  """An iterator over `dataset`'s global batches of `batch_size` rows under `strategy`: each
  worker takes its consecutive share of every global batch, each of its replicas the next
  consecutive rows, so the global batch is one device's whatever the layout."""
  per_replica = batch_size // strategy.num_replicas_in_sync

  def dataset_fn(context: tf.distribute.InputContext):
    batches = dataset
    if context.num_input_pipelines > 1:
      rows = batch_size // context.num_input_pipelines
      start = context.input_pipeline_id * rows

      def worker_rows(*element):
        share = tf.nest.map_structure(lambda tensor: tensor[start:start + rows], element)
        return share if len(element) > 1 else share[0]
      batches = batches.map(worker_rows)
    # Successive elements go to successive local replicas.
    return batches.rebatch(per_replica, drop_remainder=True)
  return iter(strategy.distribute_datasets_from_function(dataset_fn))


def finetuning_steps(strategy: tf.distribute.Strategy, model, options, loss=None
                     ) -> DistributedSteps:
  """The train step of `model` under `strategy` with the optimizer of XLNet runs made from
  `options` (a FinetuningOptions): AdamW, warmup + linear decay, clipping after the all-reduce;
  float16 with a dynamic loss scale (training.loss_scale)."""
  with strategy.scope():
    optimizer = step_optimizer(model, options.optimizer, options.train_steps)
    loss_scale = (loss_scale_lib.DynamicLossScale() if model.compute_dtype == "float16"
                  else None)
  # "auto" as Keras resolves it for the TensorFlow backend: XLA.
  step_options = StepOptions(clip_norm=options.optimizer.clip_norm, seed=options.runtime.seed,
                             jit_compile=options.jit_compile in (True, "auto"),
                             accumulation_steps=options.gradient_accumulation_steps,
                             zero_unused_gradients=False)
  return DistributedSteps(strategy, model, optimizer, finetuning_loss(model, loss),
                          step_options, loss_scale)
