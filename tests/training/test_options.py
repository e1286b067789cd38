"""The options every run shares (training.options): one definition of each value, held by the
pretraining and fine-tuning options, which also take a group's fields by name."""

import dataclasses

import pytest

from model_inputs import tiny_config
from xlnet_tf import XLNetModel
from xlnet_tf.pretraining import PretrainingOptions
from xlnet_tf.tasks import FinetuningOptions
from xlnet_tf.training import OptimizerOptions, RuntimeOptions, create_optimizer
from xlnet_tf.training.options import accepted_names, accepts_group_fields, group_field


def test_run_options_hold_the_groups_and_take_their_fields_by_name():
  options = PretrainingOptions(model_dir="m", train_data="d", learning_rate=1e-3, seed=3,
                               save_steps=5)
  assert options.optimizer == OptimizerOptions(learning_rate=1e-3)
  assert options.runtime == RuntimeOptions(seed=3)
  assert options.save_steps == 5
  # Given with its group, a field is set over the group given.
  grouped = PretrainingOptions(optimizer=OptimizerOptions(warmup_steps=7), learning_rate=1e-3)
  assert grouped.optimizer == OptimizerOptions(learning_rate=1e-3, warmup_steps=7)
  # dataclasses.replace too, keeping the rest of the group.
  replaced = dataclasses.replace(grouped, weight_decay=0.0, seed=2)
  assert replaced.optimizer == OptimizerOptions(learning_rate=1e-3, warmup_steps=7,
                                                weight_decay=0.0)
  assert (replaced.runtime.seed, grouped.runtime.seed) == (2, 0)
  assert {"learning_rate", "clip_norm", "seed", "dtype", "model_dir"} <= accepted_names(
      PretrainingOptions)


def test_each_kind_of_run_keeps_its_defaults():
  assert PretrainingOptions().optimizer == OptimizerOptions()
  assert OptimizerOptions() == OptimizerOptions(1e-4, 0, 0.01, 1.0, 0.0, 1.0)
  finetuning = FinetuningOptions(train_steps=10, batch_size=4, learning_rate=1e-3)
  assert finetuning.optimizer == OptimizerOptions(learning_rate=1e-3, weight_decay=0.0)
  assert FinetuningOptions(10, 4, OptimizerOptions(2e-5)).optimizer.learning_rate == 2e-5


def test_unknown_names_and_a_field_given_twice_are_refused():
  with pytest.raises(TypeError, match="not_a_field"):
    PretrainingOptions(not_a_field=1)
  with pytest.raises(TypeError, match="'model_dir' again by name"):
    PretrainingOptions("m", model_dir="n")


def test_a_name_two_fields_take_is_refused_when_the_class_is_defined():
  """No name goes to one of two fields: the class that would route it is not made."""
  with pytest.raises(TypeError, match="'seed' is a field of Twice and of runtime"):
    @accepts_group_fields
    @dataclasses.dataclass
    class Twice:
      seed: int = 0
      runtime: RuntimeOptions = group_field(RuntimeOptions)
  with pytest.raises(TypeError, match="'clip_norm' is a field of first and of second"):
    @accepts_group_fields
    @dataclasses.dataclass
    class TwoOptimizers:
      first: OptimizerOptions = group_field(OptimizerOptions)
      second: OptimizerOptions = group_field(OptimizerOptions)


def test_create_optimizer_takes_the_options_or_their_fields():
  model = XLNetModel(tiny_config())
  options = OptimizerOptions(learning_rate=1e-3, warmup_steps=10, weight_decay=0.5,
                             lr_layer_decay_rate=0.8, clip_norm=2.0)
  from_options = create_optimizer(model, options, 100)
  from_fields = create_optimizer(model, 1e-3, 100, 10, lr_layer_decay_rate=0.8,
                                 weight_decay=0.5, clip_norm=2.0)
  for optimizer in (from_options, from_fields):
    schedule = optimizer.schedule
    assert (schedule.peak, schedule.warmup_steps, schedule.total_steps) == (1e-3, 10, 100)
    assert (optimizer.decay_rate, optimizer.global_clipnorm) == (0.5, 2.0)
  assert from_options.get_config() == from_fields.get_config()
  with pytest.raises(TypeError, match="the fields are theirs"):
    create_optimizer(model, options, 100, warmup_steps=3)
