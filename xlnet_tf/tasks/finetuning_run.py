"""A whole fine-tuning run of any task (tasks.task.FinetuningTask), in one call: what each
fine-tuning command does, and what Python code calls to fine-tune.

  run_finetuning(task)   checks the options (one line for a setting no run can use, before
                         anything is read or written), resolves the pretrained model, starts
                         the runtime (seed, precision, strategy), reads and encodes the data,
                         builds the head over the pretrained backbone, then trains (dev
                         evaluations, the best weights kept in output_dir/best, train_history.json)
                         or takes the weights a training run kept, and evaluates and predicts.

A run that trains records its settings, whole and resolved (its training length in steps), in
output_dir/run_config.json (training.run_config): the commands' --config_file repeats the run
from it. A run resuming from its checkpoints (finetuning.finetune) is refused, in one line
naming them, settings other than the recorded ones; task.OPERATIONAL_FIELDS (and the task's
operational_fields) may differ. A run that fails leaving no checkpoints to resume from puts
the record back as it found it, as it leaves no weights.
"""

import contextlib
import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from absl import logging
import tensorflow as tf

from xlnet_tf.tasks.finetuning import (attach_tokenizer, check_best_dir_kind,
                                       check_sequence_length, restore_best, training_length)
from xlnet_tf.tasks.pretrained_model import (PretrainedModel, check_freezing,
                                             pretrained_backbone)
from xlnet_tf.tasks.task import OPERATIONAL_FIELDS, FinetuningTask
from xlnet_tf.training import resume
from xlnet_tf.training import run_config
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.training.distributed_steps import check_accumulation
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json

TRAIN_HISTORY_FILE = "train_history.json"  # in output_dir: a training run's dev history


def run_finetuning(task: FinetuningTask, pretrained: Optional[PretrainedModel] = None, *,
                   setting_names: Optional[Callable[[Sequence[str]], List[str]]] = None,
                   progress_stream: Optional[TextIO] = None) -> Dict:
  """Runs `task` from start to end (see the module docstring).

  Args:
    task: the task, holding its options.
    pretrained: what the backbone starts from; default: the model task.options.model names
      (PretrainedModel.from_source).
    setting_names: how messages name the settings, given their dotted paths in the options
      tree (the commands: their flags); default: the paths.
    progress_stream: where training progress is shown (default stdout).

  Returns:
    {"train": finetune's result (a run that trains), then what task.write_outputs computed:
    "dev" (the dev scores of do_eval), ...}.

  Raises:
    UserInputError: for settings no run can use, bad data, or settings a resumed run changes.
  """
  options = task.options
  if not (options.do_train or options.do_eval or options.do_predict):
    raise UserInputError("nothing to do: pass --do_train, --do_eval and/or --do_predict")
  task.check()
  pretrained = pretrained or PretrainedModel.from_source(options.model)
  config = pretrained.config.for_finetuning(**task.config_overrides())
  check_freezing(options.freeze_layers, config)
  training = options.finetuning
  check_sequence_length(config, options.max_seq_length,
                        training.batch_size // training.gradient_accumulation_steps
                        * task.sequences_per_example)
  config = task.prepare(config)
  strategy = training.runtime.start()
  check_accumulation(training.gradient_accumulation_steps, training.batch_size,
                     strategy.num_replicas_in_sync)
  # output_dir is made by what writes there first: a run that fails before leaves nothing.
  task.load_data(pretrained.tokenizer)
  if options.do_train:
    training = training_length(training, task.train_examples(), task.training_rows)
  results = {}
  with strategy.scope():
    model = task.build_head(pretrained_backbone(config, pretrained, options.recompute,
                                                options.freeze_layers))
    attach_tokenizer(model, pretrained.tokenizer, options.max_seq_length)  # saved in best/
    if options.do_train:
      recording = contextlib.nullcontext()
      if strategy_lib.is_chief(strategy):  # the writer of best/ and of the record
        check_best_dir_kind(model, task.best_dir)  # before the run's settings are recorded
        recording = recorded_settings(task, dataclasses.replace(options, finetuning=training),
                                      setting_names)
      with recording:
        results["train"] = result = task.train(model, training, progress_stream)
      task.write_json(TRAIN_HISTORY_FILE, task.history(result))
      line = task.best_line(result)
      if line:
        print(line)
    else:
      restore_best(model, task.best_dir)
    results.update(task.write_outputs(model))
  return results


@contextlib.contextmanager
def recorded_settings(task: FinetuningTask, options,
                      setting_names: Optional[Callable[[Sequence[str]], List[str]]] = None):
  """While the training of `options` (the run's, resolved) runs, output_dir/run_config.json
  records them (record_settings). A run that fails and leaves no checkpoints to resume from
  leaves the record as it found it: the earlier run's, or none."""
  path = os.path.join(options.output_dir, run_config.RUN_CONFIG_FILE)
  earlier = files.read_bytes(path) if files.exists(path) else None
  record_settings(task, options, setting_names)
  try:
    yield
  except BaseException:
    if not _resumable(options.finetuning.checkpoint_dir):
      try:
        if earlier is None:
          files.remove(path)
        else:
          files.write_bytes(path, earlier)
      except (OSError, tf.errors.OpError) as error:  # the fault that stopped the run, again
        logging.warning("%s: not put back as it was (%s)", path, error)
    raise


def _resumable(checkpoint_dir: Optional[str]) -> bool:
  """Whether `checkpoint_dir` holds checkpoints of an unfinished run (their record beside)."""
  return bool(checkpoint_dir) and files.exists(os.path.join(checkpoint_dir, resume.RECORD_FILE))


def record_settings(task: FinetuningTask, options,
                    setting_names: Optional[Callable[[Sequence[str]], List[str]]] = None
                    ) -> str:
  """Writes `options` (the run's, resolved) as output_dir/run_config.json; when the run
  resumes from checkpoints, first refuses settings that differ from the recorded ones (other
  than the operational ones), naming them. Returns the file's path."""
  path = os.path.join(options.output_dir, run_config.RUN_CONFIG_FILE)
  if _resumable(options.finetuning.checkpoint_dir) and files.exists(path):
    operational = set(OPERATIONAL_FIELDS) | set(task.operational_fields)
    changed = [name for name in run_config.differences(
        read_json(path, "a run config (run_config.json)"), run_config.to_dict(options))
               if name not in operational]
    if changed:
      shown = (setting_names or list)(changed)
      raise UserInputError(
          f"{options.output_dir} holds a run with other settings: {', '.join(shown)} differ "
          f"from {path}; resume with them (--config_file={path}), or give another --output_dir")
  return run_config.write(options.output_dir, options)
