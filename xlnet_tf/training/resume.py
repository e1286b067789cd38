"""A training run's checkpoints, whole or invisible: what pretraining (pretraining.run_checkpoints)
and fine-tuning (tasks.finetuning_checkpoints) save every save_steps and resume from.

`RunCheckpoints` keeps a tf.train.CheckpointManager's `ckpt-STEP.*` in a directory (any file
system: utils.files) and adds what a resume needs from it:

- whole or invisible when written: TensorFlow writes a checkpoint's data files, then its index,
  and only then rewrites the `checkpoint` state file (atomically: a temporary file renamed) to
  name it; a process killed before that leaves the previous state, a checkpoint cut short is
  never named. A save that fails (no space left, a directory that went away) stops the run with
  `CheckpointWriteError`, one line naming the directory and the latest complete checkpoint; the
  pieces of the failed one are removed unless the state file names it already (TensorFlow then
  failed after writing it whole);
- whole when read: `restore` tries the newest checkpoint the state file lists and, when it does
  not read whole (cut short, corrupt, a file missing: every tensor is read back to tell this
  from a checkpoint of another model), the one before, with one warning line naming the damaged
  ones; with none readable, a UserInputError naming the directory. It prints one line saying
  the step it resumes from;
- of this run: `check_record` refuses to resume checkpoints whose record (the model, and for
  fine-tuning the run's options: RECORD_FILE beside them) differs from this run's, one line
  naming each difference.

Several workers: every worker restores from the run's directory (so it must be one they all
read: a shared or gs:// one), and only the chief writes there; the others write their copies
into a temporary directory (what tf.distribute asks of a multi-worker save).
"""

import json
import os
import re
import tempfile
from typing import Callable, Dict, List, Optional

from absl import logging
import tensorflow as tf

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json_object, write_json
from xlnet_tf.utils.progress import print_line

RECORD_FILE = "checkpoint_model.json"  # what the checkpoints are of (check_record)
STATE_FILE = "checkpoint"              # tf.train.CheckpointManager's list of checkpoints
PREFIX = "ckpt"                         # its checkpoints: ckpt-STEP.index, ckpt-STEP.data-*


class CheckpointWriteError(UserInputError):
  """A checkpoint could not be written (no space left, no permission, ...): the run stops, one
  line naming the directory; the previous checkpoints stay whole."""


class DamagedCheckpoint(Exception):
  """Raised by a `restore` step to say the checkpoint it reads is damaged (e.g. pretraining's
  memory file beside it): the next older one is tried."""


def record_differences(saved: Dict[str, object], current: Dict[str, object]) -> List[str]:
  """'KEY SAVED (checkpoints) vs CURRENT (this run)' for each key of `current` (and of its
  "config") whose value differs in `saved`."""
  saved, current = json.loads(json.dumps(saved)), json.loads(json.dumps(current, default=float))
  saved_config, current_config = saved.get("config", {}), current.get("config", {})
  differences = [f"{key} {saved_config.get(key)!r} (checkpoints) vs "
                 f"{current_config.get(key)!r} (this run)"
                 for key in sorted(set(saved_config) | set(current_config))
                 if saved_config.get(key) != current_config.get(key)]
  differences += [f"{key} {saved.get(key)!r} (checkpoints) vs {current[key]!r} (this run)"
                  for key in current if key != "config" and saved.get(key) != current[key]]
  return differences


def check_record(directory: str, record: Dict[str, object], what: str, advice: str) -> None:
  """Refuses to resume from `directory` when its RECORD_FILE differs from `record` (a dict:
  "config", the model's config dict, and other keys compared one by one): one line, "DIR: its
  checkpoints are of another `what`: <differences>; `advice`"."""
  path = os.path.join(directory, RECORD_FILE)
  if not files.exists(path):
    return
  differences = record_differences(read_json_object(path), record)
  if differences:
    raise UserInputError(f"{directory}: its checkpoints are of another {what}: "
                         f"{'; '.join(differences)}; {advice}")


def write_record(directory: str, record: Dict[str, object]) -> None:
  """RECORD_FILE in `directory`, whole (written beside, then moved into place)."""
  path = os.path.join(directory, RECORD_FILE)
  files.move(write_json(path + ".tmp", json.loads(json.dumps(record, default=float))), path)


def checkpoint_step(prefix: str) -> int:
  """The step of `.../ckpt-STEP`."""
  return int(re.search(r"-(\d+)$", prefix).group(1))


def _first_line(error: BaseException) -> str:
  if isinstance(error, OSError) and error.filename is not None and error.strerror:
    # As TensorFlow's errors say it ("path: No space left on device"), not "[Errno 28] ...".
    return f"{error.filename}: {error.strerror}"
  text = (getattr(error, "message", None) or str(error) or type(error).__name__).strip()
  # TensorFlow's runtime errors start with the function that failed: "{{function_node ...}} ".
  text = re.sub(r"^\{\{[^}]*\}\}\s*", "", text)
  return text.splitlines()[0] if text else type(error).__name__


def damage(prefix: str) -> Optional[str]:
  """Why the checkpoint `prefix` does not read whole (every tensor is read, checksums checked),
  or None when it does."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except Exception as error:  # TensorFlow's readers raise OpError, IndexError, ValueError, ...
    return _first_line(error)
  return None


class RunCheckpoints:
  """The checkpoints of `checkpoint` (a tf.train.Checkpoint) in `directory`, `keep` of them
  (at least 2: one to fall back to); `chief`: whether this worker writes there (see the module
  docstring)."""

  def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, keep: int,
               chief: bool = True):
    self.checkpoint, self.directory, self.chief = checkpoint, directory, chief
    self.write_directory = directory if chief else tempfile.mkdtemp(prefix="xlnet-checkpoints-")
    self.manager = tf.train.CheckpointManager(checkpoint, self.write_directory,
                                              max_to_keep=max(keep, 2))

  def prefix(self, step: int) -> str:
    """The checkpoint of `step` in the run's directory: DIR/ckpt-STEP."""
    return os.path.join(self.directory, f"{PREFIX}-{step}")

  def latest(self) -> Optional[str]:
    """The newest checkpoint the state file names (None: none)."""
    paths = self.listed()
    return paths[0] if paths else None

  def kept(self) -> str:
    """What a stopped run leaves to resume from, in words."""
    latest = self.latest()
    return f"latest checkpoint: {latest}" if latest else f"no checkpoint in {self.directory}"

  def listed(self) -> List[str]:
    """The checkpoints the state file names, newest first."""
    if not files.exists(os.path.join(self.directory, STATE_FILE)):
      return []
    state = tf.train.get_checkpoint_state(self.directory)
    if state is None:
      return []
    paths = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path and state.model_checkpoint_path not in paths:
      paths.append(state.model_checkpoint_path)
    return sorted(paths, key=checkpoint_step, reverse=True)

  # ---- writing ------------------------------------------------------------------------------
  def save(self, step: int, write_beside: Optional[Callable[[], None]] = None) -> str:
    """Writes the checkpoint of `step` (after `write_beside()`, which writes the files that
    must be complete before the checkpoint names them); returns its path in the run's
    directory. A failure: CheckpointWriteError, the run's previous checkpoints untouched."""
    files.makedirs(self.write_directory)
    try:
      if write_beside is not None:
        write_beside()
      self.manager.save(checkpoint_number=step)
    except (OSError, tf.errors.OpError) as error:
      self._remove_unlisted(step)
      latest = self.latest()
      kept = (f"its latest complete checkpoint, {latest}, is kept: " if latest else
              "it has no complete checkpoint: ")
      raise CheckpointWriteError(
          f"{self.directory}: cannot write the checkpoint of step {step} ({_first_line(error)})"
          f"; the run stopped, and {kept}make room (or fix the directory) and rerun the same "
          "command to " + ("resume" if latest else "start again")) from None
    return self.prefix(step)

  def _remove_unlisted(self, step: int) -> None:
    """Removes what a failed save of `step` left, unless the state file names it (then it is
    whole: TensorFlow failed after writing it)."""
    prefix = os.path.join(self.write_directory, f"{PREFIX}-{step}")
    try:
      state = tf.train.get_checkpoint_state(self.write_directory)
      if state is not None and any(checkpoint_step(path) == step
                                   for path in state.all_model_checkpoint_paths):
        return
    except Exception:  # an unreadable state file: leave the files to the next resume
      return
    for path in files.glob(prefix + ".*") + files.glob(prefix + "_temp*"):
      try:
        if files.isdir(path):
          files.rmtree(path, ignore_errors=True)
        else:
          files.remove(path)
      except OSError:
        pass  # best effort: the directory may be what failed

  def remove_all(self) -> None:
    """Removes the checkpoints and the state file (what a run that finished no longer needs),
    leaving the directory's other files."""
    if not self.chief:
      return
    for path in files.glob(os.path.join(self.directory, f"{PREFIX}-*")):
      if files.isdir(path):
        files.rmtree(path, ignore_errors=True)
      else:
        files.remove(path)
    state = os.path.join(self.directory, STATE_FILE)
    if files.exists(state):
      files.remove(state)

  # ---- reading ------------------------------------------------------------------------------
  def restore(self, restore_one: Optional[Callable[[str], None]] = None,
              total_steps: Optional[int] = None) -> Optional[str]:
    """Restores the newest checkpoint that reads whole and returns its path (None: there is
    none, nothing restored). `restore_one(prefix)` restores one (default: the checkpoint's
    objects, all of them matched); it raises DamagedCheckpoint for a damaged file of its own.
    Prints "Resuming from step S[ of TOTAL]: PATH"."""
    restore_one = restore_one or self.restore_checkpoint
    damaged = []
    for prefix in self.listed():
      try:
        restore_one(prefix)
      except DamagedCheckpoint as error:
        damaged.append(f"{prefix} ({error})")
        continue
      except Exception:
        problem = damage(prefix)
        if problem is None:
          raise  # it reads whole: not damaged but not this run's (the caller's message)
        damaged.append(f"{prefix} ({problem})")
        continue
      if damaged:
        logging.warning("%s: cut short or damaged, not resumed from; resuming from the "
                        "checkpoint before: %s", ", ".join(damaged), prefix)
      step = checkpoint_step(prefix)
      print_line(f"Resuming from step {step}" + (f" of {total_steps}" if total_steps else "")
                 + f": {prefix}")
      return prefix
    if damaged:
      raise UserInputError(
          f"{self.directory}: no checkpoint reads whole: {', '.join(damaged)}; restore them "
          f"from a copy, or remove them (or train into another directory) to start over")
    return None

  def restore_checkpoint(self, prefix: str) -> None:
    """Every object of the checkpoint read from `prefix`, matched to this run's."""
    self.checkpoint.restore(prefix).assert_existing_objects_matched()
