"""The pretraining loop in other precisions: bfloat16, float16 loss scaling, recompute."""

import keras
import numpy as np
import pytest

from event_files import scalar_series
from tiny_pretraining import make_run


@pytest.mark.parametrize("policy,options", [("mixed_bfloat16", {}),
                                            ("mixed_float16", {"loss_scale": 1024.0}),
                                            ("float32", {"recompute_blocks": True})])
def test_precisions_and_recomputation_train(small_data, tmp_path, policy, options):
  keras.mixed_precision.set_global_policy(policy)
  try:
    run = make_run(small_data["bi"], tmp_path / policy, 8, **options)
    history = run.train()["history"]
  finally:
    keras.mixed_precision.set_global_policy("float32")
  losses = [record["loss"] for record in history]
  assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_float16_overflow_skips_the_step_halves_the_scale_and_good_steps_double_it(
    small_data, tmp_path, policy):
  policy("mixed_float16")
  run = make_run(small_data["bi"], tmp_path / "run", 10, loss_scale="dynamic",
                 loss_scale_growth_steps=2)
  iterator = run._distributed_data(small_data["bi"])
  mems = run.memory.zeros()
  state = run.model.trainable_variables + run.optimizer.variables
  run.loss_scale.scale.assign(2.0 ** 40)  # float16 gradients of a loss times 2^40 overflow
  before = [v.numpy().copy() for v in state if v is not run.optimizer.iterations]
  _, norm, mems = run.steps.train_step(iterator, mems)
  assert not np.isfinite(float(norm))
  for value, variable in zip(before, [v for v in state if v is not run.optimizer.iterations]):
    np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.path)
  assert float(run.loss_scale.scale.numpy()) == 2.0 ** 39
  assert int(run.loss_scale.skipped_steps.numpy()) == 1
  assert int(run.optimizer.iterations.numpy()) == 1  # the batch was consumed
  run.loss_scale.scale.assign(2.0 ** 10)
  for _ in range(2):
    _, norm, mems = run.steps.train_step(iterator, mems)
    assert np.isfinite(float(norm))
  assert float(run.loss_scale.scale.numpy()) == 2.0 ** 11  # doubled after 2 good steps
  assert int(run.loss_scale.skipped_steps.numpy()) == 1
  moved = [np.abs(v.numpy() - value).max() for v, value in zip(run.model.trainable_variables,
                                                               before)]
  assert min(moved) > 0


def test_float16_with_a_dynamic_scale_trains_and_reports_skipped_steps(small_data, tmp_path,
                                                                        policy):
  """From a scale that overflows (2^30), the run skips steps until the scale fits, counts them
  in its log records, result and TensorBoard, and the loss still falls."""
  policy("mixed_float16")
  run = make_run(small_data["bi"], tmp_path / "run", 40, loss_scale="dynamic",
                 initial_loss_scale=2.0 ** 30, summaries=True)
  result = run.train()
  skipped = result["skipped_steps"]
  assert 1 <= skipped < 30
  history = result["history"]
  assert history[-1]["skipped_steps"] == skipped
  assert [record["skipped_steps"] for record in history] == sorted(
      record["skipped_steps"] for record in history)
  assert history[-1]["loss_scale"] == 2.0 ** 30 / 2 ** skipped  # 40 steps: no growth yet
  losses = [record["loss"] for record in history]
  assert all(np.isfinite(losses)) and np.mean(losses[-5:]) < np.mean(losses[:5])
  scalars = scalar_series(str(tmp_path / "run" / "train"))
  assert scalars["skipped_steps"][-1][1] == skipped
  assert scalars["loss_scale"][-1][1] == history[-1]["loss_scale"]
