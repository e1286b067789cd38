"""Original zihangdai/xlnet TF1 checkpoints (`xlnet_model.ckpt`): read and write by name, on
any file system (gs://...: utils.files)."""

import math
import os

import tensorflow as tf

from xlnet_tf.checkpoints.assign import LoadReport, assign_by_original_name
from xlnet_tf.checkpoints.naming import TRAINING_STATE, original_variable_map
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError


CHECKPOINT_STATE_FILE = "checkpoint"


def resolve_prefix(path: str) -> str:
  """A checkpoint prefix, or a directory whose latest checkpoint is wanted."""
  # The prefix first: a file system keyed by whole paths (ram://) calls any start of a file's
  # path a directory, DIR/xlnet_model.ckpt of DIR/xlnet_model.ckpt.index too.
  if files.isfile(path + ".index"):
    return path
  if files.isdir(path):
    return _prefix_in_directory(path)
  raise FileNotFoundError(f"No TF checkpoint at {path!r} (expected {path}.index and "
                          f"{path}.data-*; pass the prefix, e.g. dir/xlnet_model.ckpt)")


def _prefix_in_directory(directory: str) -> str:
  """The checkpoint the directory's `checkpoint` file names, looked up in the directory itself,
  or the directory's only `*.index` checkpoint when there is no such file.

  The name is looked up by its base name: TF1's Saver writes an absolute path there, which in
  a copied or moved directory still names the original's weights.
  """
  try:
    # TF logs a state file it cannot parse and returns None (the *.index fallback below), but
    # raises on one that is not UTF-8 text.
    state = tf.train.get_checkpoint_state(directory)
  except (UnicodeDecodeError, tf.errors.OpError) as error:
    raise _damaged(os.path.join(directory, CHECKPOINT_STATE_FILE), error,
                   what="unreadable checkpoint state file") from None
  if state is not None and state.model_checkpoint_path:
    prefix = os.path.join(directory, os.path.basename(state.model_checkpoint_path))
    if not files.exists(prefix + ".index"):
      raise FileNotFoundError(
          f"{os.path.join(directory, CHECKPOINT_STATE_FILE)}: names the checkpoint "
          f"{state.model_checkpoint_path!r}, but {prefix}.index is not there; pass the "
          "checkpoint prefix")
    return prefix
  candidates = sorted(name[:-len(".index")] for name in files.listdir(directory)
                      if name.endswith(".index"))
  if len(candidates) != 1:
    raise FileNotFoundError(f"{directory}: a directory without a 'checkpoint' file and with "
                            f"{len(candidates)} '*.index' files; pass the checkpoint prefix")
  return os.path.join(directory, candidates[0])


def load_original_checkpoint(model_or_head, prefix: str) -> LoadReport:
  """Loads an original XLNet TF1 checkpoint into an XLNetModel or a head.

  All of the model's variables must be present with their shapes; optimizer slots, the step
  counter and other tasks' head weights are reported as skipped; anything else raises
  `CheckpointMismatchError` naming the variables. Nothing is assigned unless all match.

  Args:
    model_or_head: the XLNetModel or head to load into (a float one: a quantized model is
      refused with AttributeError).
    prefix: the checkpoint prefix (DIR/xlnet_model.ckpt), or a directory: the checkpoint its
      `checkpoint` file names, else its only *.index one. Local or remote.

  Returns:
    The LoadReport of what was assigned and what was set aside.

  Raises:
    FileNotFoundError: when there is no checkpoint at `prefix`.
    UserInputError: for a checkpoint TensorFlow cannot read (damaged or cut short).
    CheckpointMismatchError: when a variable is missing, misshaped or unexpected.
  """
  prefix = resolve_prefix(prefix)
  try:
    reader = _reader(prefix)
    shapes = reader.get_variable_to_shape_map()
  except tf.errors.OpError as error:
    raise _damaged(prefix, error) from None

  def read(name):
    try:
      return reader.get_tensor(name)
    except (tf.errors.OpError, IndexError) as error:  # IndexError: a .data file cut short
      raise _damaged(prefix, error, name) from None

  # Every tensor is read before the first is assigned, so a damaged file changes nothing.
  return assign_by_original_name(model_or_head, shapes, read, source=prefix)


def _reader(prefix: str):
  """TensorFlow's reader of the checkpoint at exactly `prefix` (resolve_prefix's answer):
  tf.train.load_checkpoint would take a prefix for a directory on a file system keyed by
  whole paths (ram://) and look for a `checkpoint` file in it."""
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def stored_value_count(prefix: str) -> int:
  """The number of values of the model weights the TF1 checkpoint at `prefix` holds (its
  index read; optimizer slots and step counters not counted)."""
  try:
    shapes = _reader(prefix).get_variable_to_shape_map()
  except tf.errors.OpError as error:
    raise _damaged(prefix, error) from None
  return sum(math.prod(shape) for name, shape in shapes.items()
             if not TRAINING_STATE.search(name))


def holds_variable(prefix: str, name: str) -> bool:
  """Whether the TF1 checkpoint at `prefix` holds a variable `name`."""
  try:
    return _reader(prefix).has_tensor(name)
  except tf.errors.OpError as error:
    raise _damaged(prefix, error) from None


def _damaged(prefix: str, error: Exception, variable: str = "",
             what: str = "unreadable TF checkpoint") -> UserInputError:
  """The one-line UserInputError of a checkpoint file TF cannot read: its reason's first line.

  TF verifies the .index file's block checksums and each tensor's CRC32C in the .data file, so
  a changed byte of either reaches here (a DataLossError), as does a .data file cut short (an
  IndexError "Read less bytes than requested").
  """
  reason = str(getattr(error, "message", error)).strip()
  reason = reason.splitlines()[0] if reason else type(error).__name__
  if variable:
    what = f"cannot read {variable}"
  return UserInputError(f"{prefix}: {what} ({reason}); damaged or cut short while copying?")


def save_original_checkpoint(model_or_head, prefix: str) -> str:
  """Writes the model's weights under the original names, readable by the original code.

  Also writes the `checkpoint` state file beside it, so `tf.train.latest_checkpoint(dir)` and
  the original scripts' `init_checkpoint` both find it.

  Args:
    model_or_head: the XLNetModel or head to save (its head's weights under the original
      names, e.g. model/lm_loss/bias).
    prefix: the checkpoint prefix, e.g. DIR/xlnet_model.ckpt; its directory is created.

  Returns:
    `prefix`.

  Raises:
    UserInputError: for a model whose pos_encoding is not "relative".
    AttributeError: for a quantized model (the format holds float weights).
  """
  variables = original_variable_map(model_or_head)
  directory = os.path.dirname(files.absolute(prefix))
  files.makedirs(directory)
  names = sorted(variables)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.convert_to_tensor(variables[name]) for name in names])
  _write_checkpoint_state(directory, os.path.basename(prefix))
  return prefix


def _write_checkpoint_state(directory: str, checkpoint_name: str) -> str:
  """Writes `directory/checkpoint` naming `checkpoint_name` relative to the directory.

  Relative, so a copied or moved directory reads its own weights: TF's
  update_checkpoint_state would write an absolute path (or one relative to the working
  directory). TF resolves a relative name against the directory, as the original scripts do.
  """
  quoted = checkpoint_name.replace("\\", "\\\\").replace('"', '\\"')
  path = os.path.join(directory, CHECKPOINT_STATE_FILE)
  with files.open_file(path, "w") as handle:
    handle.write(f'model_checkpoint_path: "{quoted}"\nall_model_checkpoint_paths: "{quoted}"\n')
  return path
