"""A pretraining run's checkpoints: what it saves every save_steps and resumes from.

In the run's directory:
  ckpt-STEP.*                model, optimizer (its step is the data position) and the dynamic
                             loss scale, whole or invisible (training.resume: a damaged newest
                             one is passed over for the one before, a failed save stops the run);
  mems-STEP-workerW.npz      worker W's memory after STEP (its replicas' rows, concatenated),
                             complete before the checkpoint that refers to it is written, and
                             removed with it (every worker writes its own here);
  checkpoint_model.json      the model they are of, so a resume with another model is refused
                             by name rather than by the shapes of the first variable that
                             differs.
The directory may be remote (gs://...: utils.files); every file goes through tf.io.gfile.
"""

import io
import os
import re
from typing import Dict, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.modeling.memory import RecurrenceMemory
from xlnet_tf.training import resume
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

CHECKPOINT_MODEL_FILE = resume.RECORD_FILE


def check_checkpoint_model(directory: str, model_record: Dict[str, object]) -> None:
  """Refuses to resume a model that differs from the checkpoints' in `directory` (one line
  naming both); `model_record` holds "config" (a dict) and the head's other arguments."""
  resume.check_record(directory, model_record, "model", "resume with the same model config or "
                      "train into another model directory")


class RunCheckpoints:
  """Saves and restores `checkpoint` (holding "model" and "optimizer") with each worker's
  memory, in `directory` (training.resume.RunCheckpoints: only the chief writes checkpoints
  there; every worker writes its memory file there and reads from there).

  `memory` is the run's RecurrenceMemory (per replica under its strategy): a save writes the
  rows of this worker's replicas (none for a model without memory), a restore loads them back.
  """

  def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, keep: int, worker: int,
               model_record: Dict[str, object], memory: RecurrenceMemory, chief: bool = True):
    self.checkpoint, self.directory, self.worker = checkpoint, directory, worker
    self.model_record = model_record
    self.files = resume.RunCheckpoints(checkpoint, directory, keep, chief)
    self.manager = self.files.manager
    self.memory = memory

  def kept(self) -> str:
    """What a stopped run leaves to resume from, in words."""
    return self.files.kept()

  def latest(self) -> Optional[str]:
    return self.files.latest()

  def _mems_path(self, step: int) -> str:
    return os.path.join(self.directory, f"mems-{step}-worker{self.worker}.npz")

  def save(self, step: int) -> str:
    """Writes the checkpoint of `step` with the memory's state now; returns its path."""
    def write_beside():
      if self.memory.enabled:
        arrays = {f"layer_{i}": rows for i, rows in enumerate(self.memory.local_rows())}
        archive = io.BytesIO()
        np.savez(archive, **arrays)
        files.makedirs(self.directory)
        # Whole or absent (written beside it, renamed), before the checkpoint exists; a failed
        # write names this file.
        files.write_bytes(self._mems_path(step), archive.getvalue())
      if self.files.chief:
        resume.write_record(self.directory, self.model_record)
    saved = self.files.save(step, write_beside)
    # (another worker's checkpoints are the chief's: those the run's directory lists)
    kept = {resume.checkpoint_step(prefix)
            for prefix in [*self.manager.checkpoints, *self.files.listed()]}
    for path in files.glob(os.path.join(self.directory, f"mems-*-worker{self.worker}.npz")):
      if int(re.search(r"mems-(\d+)-", os.path.basename(path)).group(1)) not in kept:
        files.remove(path)
    return saved

  def restore(self, init_checkpoint: Optional[str] = None, init_checkpoint_format: str = "own",
              total_steps: Optional[int] = None) -> int:
    """The step of the newest checkpoint that reads whole, restored with its memory (zeros
    when its memory file is missing); without one 0, the memory zeros and the model first
    loaded from `init_checkpoint` if given (a backbone in the own format, or a whole model of
    checkpoints.LOADERS)."""
    restored = {}

    def restore_one(prefix):
      try:
        self.checkpoint.restore(prefix).assert_existing_objects_matched()
      except (AssertionError, ValueError, IndexError, tf.errors.OpError) as error:
        # Checkpoints from before CHECKPOINT_MODEL_FILE: the first variable that differs
        # (unless the file is damaged: training.resume then tries the one before).
        raise UserInputError(f"{prefix}: cannot resume from this checkpoint: "
                             f"{str(error).strip().splitlines()[0]}") from None
      step = int(self.checkpoint.optimizer.iterations.numpy())
      self._read_memory(step)
      restored["step"] = step

    if self.files.restore(restore_one, total_steps) is None:
      self._initialize_from(init_checkpoint, init_checkpoint_format)
      self.memory.reset()
      return 0
    return restored["step"]

  def _read_memory(self, step: int) -> None:
    """The memory saved with `step` into self.memory (zeros when no file was saved)."""
    if not self.memory.enabled:
      return
    path = self._mems_path(step)
    if not files.exists(path):
      logging.warning("No memory saved at %s; resuming with zero memory", path)
      self.memory.reset()
      return
    try:
      with np.load(io.BytesIO(files.read_bytes(path))) as saved:
        layers = [saved[f"layer_{i}"] for i in range(self.memory.config.n_layer)]
    except Exception as error:  # zipfile's, NumPy's: a file cut short or corrupt
      raise resume.DamagedCheckpoint(f"{path}: {error}") from None
    self.memory.load_rows(layers)

  def _initialize_from(self, path: Optional[str], file_format: str) -> None:
    if not path:
      return
    model = self.checkpoint.model
    target = model if file_format != "own" else backbone_of(model)
    checkpoints.LOADERS[file_format](target, path)
    logging.info("Initialized from %s", path)
