"""The pretraining loop: memory, XLA, overfitting, compiled evaluation, bad input, divergence."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tiny_pretraining import config_for, make_run
from xlnet_reference import randomize_weights
from xlnet_tf import checkpoints
from xlnet_tf.pretraining.data.records import pretraining_dataset
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.heads.pretrainer import masked_lm_loss
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun, TrainingDivergedError


def test_a_non_finite_loss_stops_the_run_before_anything_is_saved(small_data, tmp_path):
  """Learning rate 1e30: step 1's update makes step 2's loss NaN; the run stops naming step 2,
  keeps the checkpoint of step 1 (finite weights) and saves nothing more."""
  run = make_run(small_data["bi"], tmp_path / "run", 6, learning_rate=1e30, warmup_steps=0,
                 save_steps=1, log_steps=3, jit_compile=False)
  latest = str(tmp_path / "run" / "ckpt-1")
  with pytest.raises(TrainingDivergedError) as raised:
    run.train()
  assert str(raised.value) == (
      f"step 2: the training loss is nan; stopped without saving (latest checkpoint: {latest});"
      " lower the learning rate or check the data")
  assert tf.train.latest_checkpoint(str(tmp_path / "run")) == latest
  assert sorted(os.listdir(tmp_path / "run")) == [
      "checkpoint", "checkpoint_model.json", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "mems-1-worker0.npz"]
  reader = tf.train.load_checkpoint(latest)
  for name, dtype in reader.get_variable_to_dtype_map().items():
    if dtype.is_floating:
      assert np.isfinite(reader.get_tensor(name)).all(), name


def test_resuming_with_another_model_is_refused_by_name(small_data, tmp_path):
  data = small_data["bi"]
  make_run(data, tmp_path / "run", 1, jit_compile=False).train()
  smaller = dict(d_model=16, d_head=4, dropout=0.1)
  with pytest.raises(UserInputError) as raised:
    make_run(data, tmp_path / "run", 2, model=smaller, jit_compile=False).train()
  assert str(raised.value) == (
      f"{tmp_path / 'run'}: its checkpoints are of another model: d_head 8 (checkpoints) vs 4 "
      "(this run); d_model 32 (checkpoints) vs 16 (this run); dropout 0.0 (checkpoints) vs 0.1 "
      "(this run); resume with the same model config or train into another model directory")
  # Checkpoints written before the model was recorded: the first variable that differs.
  os.remove(tmp_path / "run" / "checkpoint_model.json")
  with pytest.raises(UserInputError, match=r"^\S+/ckpt-1: cannot resume from this checkpoint: "
                     r".*incompatible tensor with shape \(1, 1, 32\) .* shape \(1, 1, 16\)"):
    make_run(data, tmp_path / "run", 2, model=smaller, jit_compile=False).train()


def test_memory_is_used_and_carried(small_data, tmp_path):
  data = small_data["bi"]
  run = make_run(data, tmp_path / "run", 2, learning_rate=0.0, warmup_steps=0, weight_decay=0.0)
  randomize_weights(run.model.backbone, 0)  # weights that make every input matter; lr 0 keeps them
  history = run.train()["history"]
  batches = list(pretraining_dataset(data, repeat=False).take(2))
  model = run.model
  keys = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
  zero_mems = [tf.zeros([4, 16, 32])] * 2
  first = model({**{k: batches[0][k] for k in keys}, "mems": zero_mems})
  with_memory = model({**{k: batches[1][k] for k in keys}, "mems": first["new_mems"]})
  without = model({**{k: batches[1][k] for k in keys}, "mems": zero_mems})
  loss_with = float(masked_lm_loss(with_memory["logits"], batches[1]["target"],
                                   batches[1]["target_mask"]))
  loss_without = float(masked_lm_loss(without["logits"], batches[1]["target"],
                                      batches[1]["target_mask"]))
  np.testing.assert_allclose(history[1]["loss"], loss_with, rtol=1e-5)
  assert abs(loss_with - loss_without) > 1e-3


def test_tiny_model_overfits_a_fixed_batch(small_data):
  data = small_data["uni"]
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(config_for(data, mem_len=0))
  model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
  fixed = pretraining_dataset(data, repeat=False).take(1).cache().repeat()
  initial = model.evaluate(fixed, steps=1, verbose=0, return_dict=True)["loss"]
  assert initial > 3.0
  model.fit(fixed, steps_per_epoch=150, epochs=1, verbose=0)
  final = model.evaluate(fixed, steps=1, verbose=0, return_dict=True)["loss"]
  assert final < 0.05


def test_fit_carries_memory(small_data):
  data = small_data["bi"]
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(config_for(data))
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  model.fit(pretraining_dataset(data), steps_per_epoch=3, epochs=1, verbose=0)
  memory = model._memory.variable.numpy()
  assert memory.shape == (2, 4, 16, 32) and np.abs(memory).max() > 0



def test_bad_settings_fail_before_training(small_data, tmp_path):
  data = small_data["bi"]
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  options = PretrainingOptions(model_dir=str(tmp_path), train_data=data, summaries=False)
  with pytest.raises(ValueError, match="reuse_len: data 16, model 8"):
    PretrainingRun(strategy, config_for(data, reuse_len=8), options)
  with pytest.raises(ValueError, match="bi_data: data True, model False"):
    PretrainingRun(strategy, config_for(data, bi_data=False), options)
  with pytest.raises(ValueError, match="global batch 8 must be the data's bsz_per_host"):
    PretrainingRun(strategy, config_for(data),
                   PretrainingOptions(model_dir=str(tmp_path), train_data=data,
                                      global_batch_size=8))
  with pytest.raises(FileNotFoundError, match="no record info"):
    PretrainingRun(strategy, config_for(data),
                   PretrainingOptions(model_dir=str(tmp_path), train_data=str(tmp_path / "x")))
  small = XLNetPretrainer(config_for(data, d_model=16, d_head=4, d_inner=32))
  checkpoints.save_pretrained(small.backbone, str(tmp_path / "small"))
  run = PretrainingRun(strategy, config_for(data), PretrainingOptions(
      model_dir=str(tmp_path / "m"), train_data=data, summaries=False,
      init_checkpoint=str(tmp_path / "small")))
  with pytest.raises(checkpoints.CheckpointMismatchError, match="d_model: checkpoint 16, model 32"):
    run.train()


def test_train_step_compiles_with_xla(small_data, tmp_path):
  run = make_run(small_data["bi"], tmp_path / "xla", 1)
  batch = next(iter(pretraining_dataset(small_data["bi"])))
  mems = tuple(tf.zeros([4, 16, 32]) for _ in range(2))
  normalizers = tf.constant([24.0, 4.0])  # global target and example counts
  dropout_seed = tf.constant([0, 0], tf.int64)
  hlo = run.steps.compute.experimental_get_compiler_ir(batch, mems, normalizers, None,
                                                  dropout_seed)(stage="hlo")
  assert "HloModule" in hlo


def test_final_evaluation_reuses_the_compiled_step(small_data, tmp_path):
  """Evaluations before and after training (run/pretrain.py's) trace each step function once,
  so the final one compiles nothing (XLA compiles per trace and shape; off here, for speed)."""
  data = small_data["bi"]
  run = make_run(data, tmp_path / "run", 4, valid_data=data, eval_batches=3, jit_compile=False)
  run.evaluate()
  run.train()
  run.evaluate()
  assert run.steps.eval_step.experimental_get_tracing_count() == 1
  assert run.steps.evaluate_replica.experimental_get_tracing_count() == 1
  assert run.steps.train_step.experimental_get_tracing_count() == 1
  assert run.steps.compute.experimental_get_tracing_count() == 1
  assert run.evaluation_seconds > 0


