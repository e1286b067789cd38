"""What a fine-tuning run saves every save_steps to resume from, in --output_dir/checkpoints.

  ckpt-STEP.*            the model, the optimizer (its step fixes the dropout masks: the steps
                         draw them from (seed, step, replica), training.distributed_steps), the
                         dynamic loss scale (float16) and the loop's state as JSON: the step
                         (the data position: the training batches are a deterministic shuffle,
                         so a resumed run skips that many and reads the ones an uninterrupted
                         run reads next), the dev history, the best scores so far, the losses of
                         the unfinished evaluation period and whether this run made best/;
                         whole or invisible (training.resume: a damaged newest one is passed
                         over for the one before, a failed save stops the run)
  checkpoint_model.json  the run they are of: the model config, the head, the options that
                         change its updates; a resume with others is refused, naming each
  finished.json          left, alone, by a run that finished (its checkpoints removed): its
                         record and result, so the same command again says so and trains no
                         more; another command trains anew

The best weights are best/ (tasks.finetuning): a resumed run replays the evaluations after its
checkpoint, so best/ ends as an uninterrupted run leaves it.
"""

import json
import os
from typing import Dict, Optional

import tensorflow as tf

from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.training import resume
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json_object, write_json
from xlnet_tf.utils.progress import print_line

CHECKPOINTS_DIR = "checkpoints"  # under --output_dir
FINISHED_FILE = "finished.json"
KEEP = 2  # the newest and one to fall back to


class _LoopState(tf.train.experimental.PythonState):
  """The loop's state (a JSON-able dict) inside the checkpoint, so the two are saved and
  restored together."""

  def __init__(self):
    self.value = {}

  def serialize(self):
    return json.dumps(self.value, default=float)

  def deserialize(self, string_value):
    self.value = json.loads(string_value)


def run_record(model, options, metric: Optional[str]) -> Dict[str, object]:
  """What a fine-tuning run's checkpoints are of: the backbone's config, the head and the
  options that change the run's updates (options: a FinetuningOptions). The strategy and XLA
  are not among them: the update is the same under any."""
  optimizer = options.optimizer
  return {"config": backbone_of(model).config.to_dict(), "head": type(model).__name__,
          "dtype": model.dtype_policy.name, "metric": metric,
          "train_steps": options.train_steps, "train_batch_size": options.batch_size,
          "eval_every": options.eval_every, "seed": options.runtime.seed,
          "gradient_accumulation_steps": options.gradient_accumulation_steps,
          "learning_rate": optimizer.learning_rate, "warmup_steps": optimizer.warmup_steps,
          "weight_decay": optimizer.weight_decay,
          "lr_layer_decay_rate": optimizer.lr_layer_decay_rate,
          "min_lr_ratio": optimizer.min_lr_ratio, "clip_norm": optimizer.clip_norm}


class FinetuningCheckpoints:
  """The checkpoints of `model` and the optimizer and loss scale of `steps` (a
  training.distributed_steps.DistributedSteps) in `directory`, of the run `record`
  (run_record); `chief`: whether this worker writes (training.resume)."""

  def __init__(self, directory: str, model, steps, record: Dict[str, object], chief: bool = True):
    self.directory, self.record, self.chief = directory, record, chief
    self.state = _LoopState()
    objects = {"model": model, "optimizer": steps.optimizer, "loop": self.state}
    if steps.loss_scale is not None:
      objects["loss_scale"] = steps.loss_scale
    self.files = resume.RunCheckpoints(tf.train.Checkpoint(**objects), directory, KEEP, chief)

  def finished(self) -> Optional[Dict]:
    """The result of the finished run of this record in the directory (None: none). A finished
    run of another record is forgotten (its finished.json removed): this one trains anew."""
    path = os.path.join(self.directory, FINISHED_FILE)
    if not files.exists(path):
      return None
    saved = read_json_object(path, 'a JSON object {"record": ..., "result": ...}')
    differences = resume.record_differences(saved.get("record", {}), self.record)
    if differences:
      print_line(f"{self.directory}: the finished run it holds had other settings "
                 f"({'; '.join(differences)}); training anew")
      self.forget_finished()
      return None
    return saved["result"]

  def forget_finished(self) -> None:
    """Removes finished.json: the run in the directory trains anew."""
    path = os.path.join(self.directory, FINISHED_FILE)
    if self.chief and files.exists(path):
      files.remove(path)

  def restore(self, total_steps: int) -> Optional[Dict]:
    """The loop's state at the newest checkpoint that reads whole, with the model, optimizer
    and loss scale restored (None: no checkpoint; nothing restored). Checkpoints of another
    run are refused, one line naming what differs."""
    resume.check_record(self.directory, self.record, "run", "rerun with the same flags to "
                        f"resume, or remove {self.directory} (or use another --output_dir) to "
                        "start over")

    def restore_one(prefix):
      try:
        self.files.restore_checkpoint(prefix)
      except (AssertionError, ValueError, IndexError, tf.errors.OpError) as error:
        raise UserInputError(f"{prefix}: cannot resume from this checkpoint: "
                             f"{str(error).strip().splitlines()[0]}") from None

    if self.files.restore(restore_one, total_steps) is None:
      return None
    return dict(self.state.value)

  def save(self, step: int, state: Dict) -> str:
    """Writes the checkpoint of `step` holding the loop's `state`; returns its path."""
    self.state.value = dict(state, step=step)

    def write_record():
      if self.chief:
        resume.write_record(self.directory, self.record)
    return self.files.save(step, write_record)

  def saved_any(self) -> bool:
    return self.files.latest() is not None

  def finish(self, result: Dict) -> None:
    """The run finished with `result`: finished.json in place of the checkpoints."""
    if not self.chief:
      return
    write_json(os.path.join(self.directory, FINISHED_FILE),
               {"record": json.loads(json.dumps(self.record, default=float)),
                "result": json.loads(json.dumps(result, default=float))})
    self.files.remove_all()
    record = os.path.join(self.directory, resume.RECORD_FILE)
    if files.exists(record):
      files.remove(record)

  def discard(self) -> None:
    """Removes the directory (a run whose weights are not kept: the non-finite stop)."""
    if self.chief and files.exists(self.directory):
      files.rmtree(self.directory, ignore_errors=True)
