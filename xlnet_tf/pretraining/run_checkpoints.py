"""A pretraining run's checkpoints: what it saves every save_steps and resumes from.

In the run's directory:
  ckpt-STEP.*                model, optimizer (its step is the data position) and the dynamic
                             loss scale, through a tf.train.CheckpointManager;
  mems-STEP-workerW.npz      worker W's memory after STEP (its replicas' rows, concatenated),
                             complete before the checkpoint that refers to it is written, and
                             removed with it;
  checkpoint_model.json      the model they are of, so a resume with another model is refused
                             by name rather than by the shapes of the first variable that
                             differs.
The directory may be remote (gs://...: utils.files); every file goes through tf.io.gfile.
"""

import io
import json
import os
import re
from typing import Callable, Dict, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json, write_json

CHECKPOINT_MODEL_FILE = "checkpoint_model.json"


def check_checkpoint_model(directory: str, model_record: Dict[str, object]) -> None:
  """Refuses to resume a model that differs from the checkpoints' in `directory` (one line
  naming both); `model_record` holds "config" (a dict) and the head's other arguments."""
  path = os.path.join(directory, CHECKPOINT_MODEL_FILE)
  if not files.exists(path):
    return
  saved, current = read_json(path), json.loads(json.dumps(model_record))
  saved_config, current_config = saved.get("config", {}), current["config"]
  differences = [f"{key} {saved_config.get(key)!r} (checkpoints) vs "
                 f"{current_config.get(key)!r} (this run)"
                 for key in sorted(set(saved_config) | set(current_config))
                 if saved_config.get(key) != current_config.get(key)]
  differences += [f"{key} {saved.get(key)!r} (checkpoints) vs {current[key]!r} (this run)"
                  for key in current if key != "config" and saved.get(key) != current[key]]
  if differences:
    raise UserInputError(f"{directory}: its checkpoints are of another model: "
                         f"{'; '.join(differences)}; resume with the same model config or "
                         "train into another model directory")


class RunCheckpoints:
  """Saves and restores `checkpoint` (holding "model" and "optimizer") with each worker's
  memory.

  The memory is per replica under `strategy`: `memory_layers` tensors of [per_replica_batch,
  M, d_model] (0 layers: a model without memory) in `memory_dtype`; each worker saves the rows
  of its `local_replicas` replicas.
  """

  def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, keep: int, worker: int,
               model_record: Dict[str, object], strategy: tf.distribute.Strategy,
               memory_layers: int, per_replica_batch: int, local_replicas: int, memory_dtype):
    self.checkpoint, self.directory, self.worker = checkpoint, directory, worker
    self.model_record = model_record
    self.manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=keep)
    self.strategy, self.memory_layers, self.memory_dtype = strategy, memory_layers, memory_dtype
    self.per_replica_batch, self.local_replicas = per_replica_batch, local_replicas

  def kept(self) -> str:
    """What a stopped run leaves to resume from, in words."""
    latest = self.manager.latest_checkpoint
    return f"latest checkpoint: {latest}" if latest else f"no checkpoint in {self.directory}"

  def _mems_path(self, step: int) -> str:
    return os.path.join(self.directory, f"mems-{step}-worker{self.worker}.npz")

  def save(self, step: int, mems) -> None:
    if self.memory_layers:
      per_replica = [self.strategy.experimental_local_results(layer) for layer in mems]
      arrays = {f"layer_{i}": np.concatenate([np.asarray(t, np.float32) for t in replicas])
                for i, replicas in enumerate(per_replica)}
      temporary = self._mems_path(step) + ".tmp.npz"
      archive = io.BytesIO()
      np.savez(archive, **arrays)
      files.write_bytes(temporary, archive.getvalue())
      files.move(temporary, self._mems_path(step))  # complete before the checkpoint exists
    model_file = os.path.join(self.directory, CHECKPOINT_MODEL_FILE)
    files.move(write_json(model_file + ".tmp", self.model_record), model_file)
    self.manager.save(checkpoint_number=step)
    kept = {int(re.search(r"-(\d+)$", path).group(1)) for path in self.manager.checkpoints}
    for path in files.glob(os.path.join(self.directory, f"mems-*-worker{self.worker}.npz")):
      if int(re.search(r"mems-(\d+)-", os.path.basename(path)).group(1)) not in kept:
        files.remove(path)

  def restore(self, zero_mems: Callable[[], object], init_checkpoint: Optional[str] = None,
              init_checkpoint_format: str = "own") -> Tuple[int, object]:
    """(step, memory) from the latest complete checkpoint (`zero_mems()` when its memory is
    missing); without one (0, `zero_mems()`), the model first loaded from `init_checkpoint`
    if given (a backbone in the own format, or a whole model of checkpoints.LOADERS)."""
    latest = self.manager.latest_checkpoint
    if latest is None:
      self._initialize_from(init_checkpoint, init_checkpoint_format)
      return 0, zero_mems()
    try:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
      # Checkpoints from before CHECKPOINT_MODEL_FILE: the first variable that differs.
      raise UserInputError(f"{latest}: cannot resume from this checkpoint: "
                           f"{str(error).strip().splitlines()[0]}") from None
    step = int(self.checkpoint.optimizer.iterations.numpy())
    logging.info("Resumed from %s at step %d", latest, step)
    if not self.memory_layers:
      return step, ()
    path = self._mems_path(step)
    if not files.exists(path):
      logging.warning("No memory saved at %s; resuming with zero memory", path)
      return step, zero_mems()
    with np.load(io.BytesIO(files.read_bytes(path))) as saved:
      layers = [saved[f"layer_{i}"] for i in range(self.memory_layers)]

    def replica_mems(context):
      start = context.replica_id_in_sync_group % self.local_replicas * self.per_replica_batch
      return tuple(tf.constant(layer[start:start + self.per_replica_batch], self.memory_dtype)
                   for layer in layers)
    return step, self.strategy.experimental_distribute_values_from_function(replica_mems)

  def _initialize_from(self, path: Optional[str], file_format: str) -> None:
    if not path:
      return
    model = self.checkpoint.model
    target = model if file_format != "own" else backbone_of(model)
    checkpoints.LOADERS[file_format](target, path)
    logging.info("Initialized from %s", path)
