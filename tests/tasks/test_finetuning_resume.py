"""Fine-tuning resumes: stopped by SIGTERM (a real signal, in this process), with its newest
checkpoint cut short, after a failed save; and it ends with the weights, best/ and dev history of
an uninterrupted run, dropout on. The CLIs' kill -9, SIGTERM and full-disk runs:
tests/tasks/test_finetuning_resume_cli.py."""

import json
import logging
import os
import shutil
import signal
import threading
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.finetuning import FinetuningOptions, feature_dataset, finetune
from xlnet_tf.tasks.finetuning_checkpoints import FINISHED_FILE, FinetuningCheckpoints
from xlnet_tf.training import resume
from xlnet_tf.utils.errors import StoppedBySignal, UserInputError

STEPS = 6


def _features(count=24, length=8, seed=0):
  rng = np.random.default_rng(seed)
  return {"input_ids": rng.integers(5, 50, (count, length)).astype(np.int32),
          "segment_ids": rng.integers(0, 2, (count, length)).astype(np.int32),
          "input_mask": np.ones((count, length), np.float32),
          "label": rng.integers(0, 2, count).astype(np.int32)}


def _run(directory, *, stop_at=None, fail_save_at=None, learning_rate=3e-3):
  """A tiny classifier (dropout 0.1) fine-tuned 6 steps into `directory` (checkpoints every 2
  steps, an evaluation every 2), from the same initial weights and batches each time: what a
  CLI run into one --output_dir does. `stop_at`: SIGTERM to this process during that step;
  `fail_save_at`: the checkpoint writer fails at that step (no space left). Returns (model,
  result)."""
  keras.utils.set_random_seed(0)
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", n_token=50, dropout=0.1,
                                                        dropatt=0.1)), 2)
  train = feature_dataset(_features(), 4, label_key="label", shuffle=True, seed=3, repeat=True)
  options = FinetuningOptions(train_steps=STEPS, batch_size=4, learning_rate=learning_rate,
                              eval_every=2,
                              jit_compile=False, progress="none", seed=3, save_steps=2,
                              checkpoint_dir=os.path.join(directory, "checkpoints"))
  # A dev score that moves with every weight: the best step is any of them.
  evaluate = lambda: {"score": float(np.sin(1e3 * np.sum(model.get_weights()[-1])))}  # noqa: E731
  steps_of = finetuning.finetuning_steps

  def interrupting_steps(*args, **kwargs):
    steps = steps_of(*args, **kwargs)
    train_step = steps.train_step

    def step(*step_args):
      if int(steps.optimizer.iterations.numpy()) + 1 == stop_at:
        os.kill(os.getpid(), signal.SIGTERM)  # arrives during the step; it stops after it
      return train_step(*step_args)
    steps.train_step = step
    return steps

  writer = tf.train.Checkpoint._write

  def failing_write(self, prefix, options=None):
    if prefix.endswith(f"ckpt-{fail_save_at}"):  # as a full disk: a piece written, then ENOSPC
      tf.io.gfile.makedirs(prefix + "_temp")
      tf.io.gfile.GFile(prefix + "_temp/part-00000-of-00001.data-00000-of-00001", "wb").write(
          b"\0" * 100)
      raise tf.errors.ResourceExhaustedError(None, None, f"{prefix}_temp: No space left on "
                                             "device")
    return writer(self, prefix, options)

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(finetuning, "finetuning_steps", interrupting_steps)
    patch.setattr(tf.train.Checkpoint, "_write", failing_write)
    result = finetune(model, train, options, evaluate=evaluate, metric="score",
                      best_dir=os.path.join(directory, "best"),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model, result


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  assert threading.current_thread() is threading.main_thread()  # where the signals go
  directory = str(tmp_path_factory.mktemp("uninterrupted"))
  model, result = _run(directory)
  return {"weights": model.get_weights(), "result": result, "best": _best_weights(directory)}


def _best_weights(directory):
  keras.utils.set_random_seed(0)
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", n_token=50)), 2)
  assert finetuning.restore_best(model, os.path.join(directory, "best"))
  return model.get_weights()


def _assert_as_uninterrupted(uninterrupted, model, result, directory):
  for expected, actual in zip(uninterrupted["weights"], model.get_weights()):
    np.testing.assert_allclose(actual, expected, atol=1e-6, rtol=0)
  assert json.dumps(result) == json.dumps(uninterrupted["result"])
  for expected, actual in zip(uninterrupted["best"], _best_weights(directory)):
    np.testing.assert_allclose(actual, expected, atol=1e-6, rtol=0)


def _cut_short(prefix):
  data = prefix + ".data-00000-of-00001"
  with open(data, "r+b") as handle:
    handle.truncate(os.path.getsize(data) // 2)


def test_a_failed_save_a_sigterm_and_a_cut_short_checkpoint_end_as_an_uninterrupted_run(
    uninterrupted, tmp_path, capsys, caplog):
  """One run into one directory: its checkpoint writer fails at step 4 (no space left); the
  same call again resumes from step 2 and is stopped by SIGTERM during step 5; the newest
  checkpoint (step 5's) is then cut short, and the same call resumes from step 4's. It ends
  with the weights, best/ and dev history (its best step included) of the uninterrupted run;
  the same call after the end trains no more and says so."""
  directory = str(tmp_path / "run")
  checkpoints = os.path.join(directory, "checkpoints")
  with pytest.raises(resume.CheckpointWriteError) as error:
    _run(directory, fail_save_at=4)
  assert str(error.value) == (
      f"{checkpoints}: cannot write the checkpoint of step 4 ({checkpoints}/ckpt-4_temp: No "
      f"space left on device); the run stopped, and its latest complete checkpoint, "
      f"{checkpoints}/ckpt-2, is kept: make room (or fix the directory) and rerun the same "
      "command to resume")
  assert tf.train.latest_checkpoint(checkpoints) == f"{checkpoints}/ckpt-2"
  assert not [name for name in os.listdir(checkpoints) if name.startswith("ckpt-4")]
  assert resume.damage(f"{checkpoints}/ckpt-2") is None
  assert os.path.isdir(os.path.join(directory, "best"))  # resumable: kept
  capsys.readouterr()

  with pytest.raises(StoppedBySignal) as stop:
    _run(directory, stop_at=5)
  assert capsys.readouterr().out == f"Resuming from step 2 of 6: {checkpoints}/ckpt-2\n"
  assert str(stop.value) == (f"Stopped by SIGTERM at step 5: checkpoint written to "
                             f"{checkpoints}/ckpt-5; rerun the same command to resume")
  assert stop.value.exit_status == 143
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back
  assert tf.train.latest_checkpoint(checkpoints) == f"{checkpoints}/ckpt-5"

  # Other flags are refused, naming each difference, before anything is restored.
  with pytest.raises(UserInputError) as error:
    _run(directory, learning_rate=1e-3)
  assert str(error.value) == (
      f"{checkpoints}: its checkpoints are of another run: learning_rate 0.003 (checkpoints) vs "
      f"0.001 (this run); rerun with the same flags to resume, or remove {checkpoints} (or use "
      "another --output_dir) to start over")
  nothing_whole = str(tmp_path / "nothing_whole")
  shutil.copytree(directory, nothing_whole)
  _cut_short(f"{checkpoints}/ckpt-5")
  with caplog.at_level(logging.WARNING):
    model, result = _run(directory)
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert warnings == [f"{checkpoints}/ckpt-5 (Read less bytes than requested): cut short or "
                      f"damaged, not resumed from; resuming from the checkpoint before: "
                      f"{checkpoints}/ckpt-4"]
  assert capsys.readouterr().out == f"Resuming from step 4 of 6: {checkpoints}/ckpt-4\n"
  _assert_as_uninterrupted(uninterrupted, model, result, directory)
  assert os.listdir(checkpoints) == [FINISHED_FILE]
  _, again = _run(directory)
  assert capsys.readouterr().out == (
      f"Fine-tuning finished earlier (6 steps, {checkpoints}/{FINISHED_FILE}): not training "
      f"again; best dev score {result['best']['score']:.4g} at step {result['best']['step']} in "
      f"{directory}/best\n")
  assert again == result

  # No checkpoint whole: one line naming the directory.
  for step in (4, 5):
    _cut_short(f"{nothing_whole}/checkpoints/ckpt-{step}")
  with pytest.raises(UserInputError) as error:
    _run(nothing_whole)
  assert str(error.value) == (
      f"{nothing_whole}/checkpoints: no checkpoint reads whole: {nothing_whole}/checkpoints/"
      f"ckpt-5 (Read less bytes than requested), {nothing_whole}/checkpoints/ckpt-4 (Read less "
      "bytes than requested); restore them from a copy, or remove them (or train into another "
      "directory) to start over")


def test_a_finished_run_of_other_flags_is_forgotten_with_a_line(tmp_path, capsys):
  """The same command again finds its finished run (see above); another one trains anew."""
  steps = types.SimpleNamespace(optimizer=tf.Variable(0), loss_scale=None)
  record = {"config": {"d_model": 32}, "learning_rate": 0.003}
  saved = FinetuningCheckpoints(str(tmp_path), tf.Variable(0.0), steps, record)
  saved.finish({"history": [], "best": None, "metric": None})
  assert saved.finished() == {"history": [], "best": None, "metric": None}
  other = FinetuningCheckpoints(str(tmp_path), tf.Variable(0.0), steps,
                                dict(record, learning_rate=0.001))
  assert other.finished() is None
  assert capsys.readouterr().out == (f"{tmp_path}: the finished run it holds had other settings "
                                     "(learning_rate 0.003 (checkpoints) vs 0.001 (this run)); "
                                     "training anew\n")
  assert os.listdir(tmp_path) == []
