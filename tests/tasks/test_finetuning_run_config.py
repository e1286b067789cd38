"""A fine-tuning run's settings, recorded whole in --output_dir/run_config.json: the command
repeats the run from it (--config_file, its paths given again as flags) to the same weights;
a run resuming from its checkpoints is refused other settings than the recorded ones, in one
line naming them, and takes operational ones; a failed run leaves the record as it was."""

import dataclasses
import json
import os

import h5py
import numpy as np
import pytest

from cli_output import run_tool
from task_files import reordering_task, tiny_config_file
from xlnet_tf.cli import common_flags
from xlnet_tf.tasks import FinetuningOptions, ModelSource, run_finetuning
from xlnet_tf.tasks.classification import ClassificationOptions, ClassificationTask
from xlnet_tf.tasks.finetuning_checkpoints import CHECKPOINTS_DIR
from xlnet_tf.training import run_config
from xlnet_tf.utils.errors import UserInputError


def best_weights(output_dir):
  """Every array of best/model.weights.h5, by its path in the file."""
  values = {}
  with h5py.File(os.path.join(output_dir, "best", "model.weights.h5"), "r") as weights:
    weights.visititems(lambda name, item: values.__setitem__(name, item[()])
                       if isinstance(item, h5py.Dataset) else None)
  return values


def test_a_run_repeated_from_its_run_config_gives_the_same_weights(sp_model, tmp_path):
  """Dropout on (the classifier's default 0.1), a dev file, a given label delimiter: the
  repeat with --config_file and the paths alone trains the same weights; a path left out is
  one line naming its flag; a flag given beside the file changes its setting only."""
  config = tiny_config_file(tmp_path / "xlnet_config.json", sp_model)
  train = reordering_task(tmp_path / "train.csv", 24, 0)
  dev = reordering_task(tmp_path / "dev.csv", 8, 1)
  paths = [f"--train_file={train}", f"--dev_file={dev}", f"--sp_path={sp_model}",
           f"--model_config={config}"]
  first = run_tool("run/classifier.py", *paths, "--max_seq_length=16", "--train_batch_size=4",
                   "--num_train_epochs=0.5", "--eval_every=2", "--learning_rate=1e-3",
                   "--seed=7", "--nojit_compile", "--progress=none",
                   f"--output_dir={tmp_path}/first")
  assert first.returncode == 0, first.stderr[-3000:]
  recorded = tmp_path / "first" / "run_config.json"
  tree = json.loads(recorded.read_text())
  # Resolved: the epochs as the steps they came to; the flags' defaults written out.
  assert tree["finetuning"]["train_steps"] == 3 and tree["finetuning"]["num_train_epochs"] is None
  assert tree["finetuning"]["runtime"]["seed"] == 7 and tree["dropout"] == 0.1
  assert tree["output_dir"] == f"{tmp_path}/first"

  repeated = run_tool("run/classifier.py", f"--config_file={recorded}", *paths,
                      f"--output_dir={tmp_path}/repeated")
  assert repeated.returncode == 0, repeated.stderr[-3000:]
  expected, actual = best_weights(tmp_path / "first"), best_weights(tmp_path / "repeated")
  assert sorted(actual) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_allclose(actual[name], value, rtol=0, atol=1e-6, err_msg=name)
  assert (json.loads((tmp_path / "repeated" / "run_config.json").read_text())
          == dict(tree, output_dir=f"{tmp_path}/repeated", finetuning=dict(
              tree["finetuning"], summary_dir=f"{tmp_path}/repeated/train",
              checkpoint_dir=f"{tmp_path}/repeated/checkpoints")))

  left_out = run_tool("run/classifier.py", f"--config_file={recorded}", *paths[1:],
                      f"--output_dir={tmp_path}/left_out")
  assert left_out.returncode == 1
  assert left_out.stderr.splitlines() == [
      f"error: --config_file={recorded}: train_file is '{train}'; a config file's paths are not "
      "followed: give --train_file"]
  assert not (tmp_path / "left_out").exists()


def _failing_evaluation(task, at_call):
  """`task` whose dev evaluation fails at its `at_call`-th call (a crash after a checkpoint)."""
  evaluator, calls = task.evaluator, []

  def failing(model, batch_size):
    evaluate = evaluator(model, batch_size)

    def evaluation():
      calls.append(1)
      if len(calls) == at_call:
        raise RuntimeError("evaluation failed")
      return evaluate()
    return evaluation
  task.evaluator = failing
  return task


def test_a_resumed_run_takes_operational_settings_and_refuses_the_others(sp_model, tmp_path):
  config = tiny_config_file(tmp_path / "xlnet_config.json", sp_model)
  out = str(tmp_path / "out")
  options = ClassificationOptions(
      train_file=reordering_task(tmp_path / "train.csv", 16, 0),
      dev_file=reordering_task(tmp_path / "dev.csv", 8, 1), max_seq_length=16,
      output_dir=out, model=ModelSource(model_config=config, sp_path=sp_model),
      finetuning=FinetuningOptions(train_steps=4, batch_size=4, learning_rate=1e-3,
                                   eval_every=2, save_steps=1, jit_compile=False,
                                   progress="none",
                                   checkpoint_dir=os.path.join(out, CHECKPOINTS_DIR)))
  with pytest.raises(RuntimeError, match="evaluation failed"):  # at step 2, after ckpt-1
    run_finetuning(_failing_evaluation(ClassificationTask(options), at_call=1))
  assert os.path.exists(os.path.join(out, CHECKPOINTS_DIR, "ckpt-1.index"))
  recorded = os.path.join(out, run_config.RUN_CONFIG_FILE)
  names = {**common_flags.FINETUNING_FLAGS, "dropout": "dropout"}
  other = dataclasses.replace(options, dropout=0.2, finetuning=dataclasses.replace(
      options.finetuning, learning_rate=3e-3))
  with pytest.raises(UserInputError) as error:
    run_finetuning(ClassificationTask(other), setting_names=lambda paths: [
        f"--{name}" for path in paths for name, field in names.items() if field == path])
  assert str(error.value) == (
      f"{out} holds a run with other settings: --learning_rate, --dropout differ from "
      f"{recorded}; resume with them (--config_file={recorded}), or give another --output_dir")
  # Where it shows its progress, what it does after training: the recorded run resumes.
  operational = dataclasses.replace(options, do_eval=True, finetuning=dataclasses.replace(
      options.finetuning, progress="lines", save_steps=3))
  results = run_finetuning(ClassificationTask(operational))
  assert [h["step"] for h in results["train"]["history"]] == [2, 4]
  assert run_config.read(recorded, ClassificationOptions) == operational
  # A run that fails leaving nothing to resume from leaves the record as it found it.
  unsaved = dataclasses.replace(other, finetuning=dataclasses.replace(
      other.finetuning, checkpoint_dir=None))
  with pytest.raises(RuntimeError, match="evaluation failed"):
    run_finetuning(_failing_evaluation(ClassificationTask(unsaved), at_call=1))
  assert run_config.read(recorded, ClassificationOptions) == operational
