"""Dynamic loss scaling: the rule of training.loss_scale, the fused update's skip, and the
fine-tuning path (the same DynamicLossScale in the shared distributed step)."""

import keras
import numpy as np
import tensorflow as tf

from model_inputs import tiny_config
from xlnet_tf import XLNetModel
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.finetuning_steps import distributed_batches, finetuning_steps
from xlnet_tf.training.loss_scale import DynamicLossScale
from xlnet_tf.training.optimization import XLNetAdamW


def test_scale_halves_on_a_skipped_step_and_doubles_after_growth_steps_finite_ones():
  loss_scale = DynamicLossScale(initial_scale=8.0, growth_steps=3)
  update = tf.function(loss_scale.update)  # as in the training step: a graph
  finite = [True, True, True, False, True, True, False, True, True, True]
  expected = [8, 8, 16, 8, 8, 8, 4, 4, 4, 8]  # a skipped step also restarts the count
  scales = []
  for step_finite in finite:
    update(tf.constant(step_finite))
    scales.append(float(loss_scale.scale.numpy()))
  assert scales == expected
  assert int(loss_scale.skipped_steps.numpy()) == 2


def test_a_skipped_update_leaves_variables_and_moments_and_counts_the_step():
  variable = keras.Variable(np.arange(4, dtype=np.float32), name="weight")
  optimizer = XLNetAdamW(1e-1, weight_decay=0.01, global_clipnorm=None)
  optimizer.build([variable])
  state = [variable] + [v for v in optimizer.variables if v is not optimizer.iterations]
  gradient = tf.constant([1.0, -2.0, 3.0, -4.0])
  optimizer.apply_scaled_gradients([(gradient, variable)], 1.0, apply_update=tf.constant(True))
  before = [v.numpy().copy() for v in state]
  inf = tf.constant([np.inf, 1.0, 1.0, 1.0])  # with scale 0, as the loop passes it
  optimizer.apply_scaled_gradients([(inf, variable)], 0.0, apply_update=tf.constant(False))
  for value, after in zip(before, state):
    np.testing.assert_array_equal(after.numpy(), value)
  assert int(optimizer.iterations.numpy()) == 2
  optimizer.apply_scaled_gradients([(gradient, variable)], 1.0, apply_update=tf.constant(True))
  assert np.abs(variable.numpy() - before[0]).min() > 1e-3  # updates go on


def test_finetuning_in_float16_scales_the_loss_dynamically(policy):
  """Fine-tuning's steps (the distributed step pretraining uses) keep a DynamicLossScale: an
  overflowing scale is halved and the step skipped; a good step updates the weights."""
  policy("mixed_float16")
  keras.utils.set_random_seed(0)
  model = XLNetClassifier(XLNetModel(tiny_config()), num_classes=2)
  rng = np.random.default_rng(0)
  input_ids = rng.integers(0, 50, [64, 8]).astype(np.int32)
  features = dict(input_ids=input_ids, segment_ids=np.zeros_like(input_ids),
                  input_mask=np.ones([64, 8], np.float32),
                  label=(input_ids[:, 0] >= 25).astype(np.int32))
  dataset = finetuning.feature_dataset(features, 16, label_key="label", repeat=True)
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  options = finetuning.FinetuningOptions(train_steps=2, batch_size=16, learning_rate=1e-3)
  strategy = tf.distribute.get_strategy()
  steps = finetuning_steps(strategy, model, options, loss)
  batches = distributed_batches(strategy, dataset, 16)
  assert isinstance(steps.loss_scale, DynamicLossScale)
  steps.loss_scale.scale.assign(1e30)  # every float16 gradient overflows
  weights = [w.numpy().copy() for w in model.trainable_weights]
  steps.train_step(batches)
  assert float(steps.loss_scale.scale.numpy()) == np.float32(5e29)
  assert int(steps.loss_scale.skipped_steps.numpy()) == 1
  for before, weight in zip(weights, model.trainable_weights):
    np.testing.assert_array_equal(weight.numpy(), before)
  steps.loss_scale.scale.assign(1024.0)
  steps.train_step(batches)
  assert int(steps.loss_scale.skipped_steps.numpy()) == 1
  assert max(np.abs(weight.numpy() - before).max()
             for before, weight in zip(weights, model.trainable_weights)) > 0
