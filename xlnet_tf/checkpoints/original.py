"""Original zihangdai/xlnet TF1 checkpoints (`xlnet_model.ckpt`): read and write by name."""

import os

import tensorflow as tf

from xlnet_tf.checkpoints.assign import LoadReport, assign_by_original_name
from xlnet_tf.checkpoints.naming import original_variable_map


def resolve_prefix(path: str) -> str:
  """A checkpoint prefix, or a directory whose latest checkpoint is wanted."""
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      candidates = sorted(name[:-len(".index")] for name in os.listdir(path)
                          if name.endswith(".index"))
      if len(candidates) != 1:
        raise FileNotFoundError(f"{path}: a directory without a 'checkpoint' file and with "
                                f"{len(candidates)} '*.index' files; pass the checkpoint prefix")
      latest = os.path.join(path, candidates[0])
    return latest
  if not os.path.exists(path + ".index"):
    raise FileNotFoundError(f"No TF checkpoint at {path!r} (expected {path}.index and "
                            f"{path}.data-*; pass the prefix, e.g. dir/xlnet_model.ckpt)")
  return path


def load_original_checkpoint(model_or_head, prefix: str) -> LoadReport:
  """Loads an original XLNet TF1 checkpoint into an XLNetModel or a head.

  All of the model's variables must be present with their shapes; optimizer slots, the step
  counter and other tasks' head weights are reported as skipped; anything else raises
  `CheckpointMismatchError` naming the variables. Nothing is assigned unless all match.
  """
  prefix = resolve_prefix(prefix)
  reader = tf.train.load_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  return assign_by_original_name(model_or_head, shapes, reader.get_tensor, source=prefix)


def save_original_checkpoint(model_or_head, prefix: str) -> str:
  """Writes the model's weights under the original names, readable by the original code.

  Also writes the `checkpoint` state file beside it, so `tf.train.latest_checkpoint(dir)` and
  the original scripts' `init_checkpoint` both find it. Returns the prefix.
  """
  variables = original_variable_map(model_or_head)
  directory = os.path.dirname(os.path.abspath(prefix))
  os.makedirs(directory, exist_ok=True)
  names = sorted(variables)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.convert_to_tensor(variables[name]) for name in names])
  tf.compat.v1.train.update_checkpoint_state(directory, os.path.abspath(prefix))
  return prefix
