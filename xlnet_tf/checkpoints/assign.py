"""Strict assignment of named arrays to a model: everything or nothing.

Every variable of the target must be in the source with its exact shape; every source name must
be used, or be known not to belong to the model (optimizer slots, step counters, weights of
another task's head), in which case it is listed in the report. Any other difference raises
`CheckpointMismatchError` naming each variable, before a single weight is assigned.
"""

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from absl import logging
import numpy as np

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.checkpoints.naming import BACKBONE_SCOPE, TRAINING_STATE, original_variable_map


class CheckpointMismatchError(UserInputError):
  """The checkpoint and the model disagree; the message names every variable concerned."""


@dataclasses.dataclass
class LoadReport:
  """What a strict load assigned, and what it set aside.

  Attributes:
    source: the checkpoint read (a TF1 prefix, or the Hugging Face weights file or index).
    loaded: the original names of the variables assigned, sorted.
    skipped: {name in the source: why it was not loaded} (optimizer slots, step counters,
      weights of a task head the model does not have).
  """
  source: str
  loaded: List[str]
  skipped: Dict[str, str]  # name -> why it was not loaded

  def summary(self) -> str:
    """The report as text: how many variables were loaded, and each name set aside.

    Returns:
      "Loaded N variables from SOURCE." and, when some were set aside, a line
      "Not part of this model (K):" and one "  name: why" line for each.
    """
    lines = [f"Loaded {len(self.loaded)} variables from {self.source}."]
    if self.skipped:
      lines.append(f"Not part of this model ({len(self.skipped)}):")
      lines.extend(f"  {name}: {why}" for name, why in sorted(self.skipped.items()))
    return "\n".join(lines)


BIAS_NAMES = ("r_w_bias", "r_r_bias", "r_s_bias")


def _kind_of(dtype: np.dtype) -> str:
  """"float", "int" or "bool" of a NumPy dtype (ml_dtypes' bfloat16 and float8 types, which TF
  checkpoints give, are floats); "other" for complex, string, object and record types."""
  if dtype.kind == "f":
    return "float"
  if dtype.kind in "iu":
    return "int"
  if dtype.kind == "b":
    return "bool"
  if dtype.kind == "V":
    try:
      import ml_dtypes  # a TensorFlow dependency; its types are NumPy "V" (void) kinds
      ml_dtypes.finfo(dtype)
      return "float"
    except (ImportError, TypeError, ValueError):
      pass
  return "other"


def _check_value(value: np.ndarray, variable, where: str) -> None:
  """The array read for `variable` can be assigned to it as the same numbers: the same kind of
  number (a float variable takes any float width, never integers, bools or complex numbers: a
  damaged header's dtype reads float bytes as those), its shape, and finite values. `where`
  ("<source>: <name>") starts the message."""
  want = np.dtype(variable.dtype)
  if _kind_of(value.dtype) == "other" or _kind_of(value.dtype) != _kind_of(want):
    raise CheckpointMismatchError(f"{where} holds {value.dtype} values; the model's variable is "
                                  f"{want}")
  if tuple(value.shape) != tuple(variable.shape):
    raise CheckpointMismatchError(f"{where} holds {value.size} values of shape "
                                  f"{list(value.shape)}; the model's variable is "
                                  f"{list(variable.shape)}")
  if _kind_of(want) == "float" and not np.isfinite(value.astype(np.float32)).all():
    raise CheckpointMismatchError(f"{where} holds NaN or infinity")


def assign_by_original_name(target, shapes: Mapping[str, Sequence[int]],
                            read: Callable[[str], np.ndarray], source: str,
                            aliases: Optional[Mapping[str, str]] = None,
                            skipped: Optional[Dict[str, str]] = None) -> LoadReport:
  """Checks `shapes` against the target's variables, then assigns `read(name)` to each.

  Args:
    target: XLNetModel or a head.
    shapes: {original name: shape} of everything the source holds.
    read: returns the array of one name.
    source: the file or directory, for messages.
    aliases: {original name: the source's own name}, shown in messages (Hugging Face names).
    skipped: names the caller already set aside, with reasons.
  """
  aliases = aliases or {}
  expected = original_variable_map(target)
  problems = []

  def label(name):
    return f"{name} ({aliases[name]})" if name in aliases else name

  for name, variable in expected.items():
    want = tuple(variable.shape)
    if name not in shapes:
      problems.append(f"missing: {label(name)}, shape {list(want)}")
    elif tuple(shapes[name]) != want:
      hint = ""
      if name.rsplit("/", 1)[-1] in BIAS_NAMES and len(shapes[name]) != len(want):
        tied = len(shapes[name]) == 2
        hint = (f" (the checkpoint's attention biases are {'tied' if tied else 'untied'}: "
                f"set untie_r={not tied} in the config)")
      problems.append(f"misshaped: {label(name)}: checkpoint {list(shapes[name])}, model "
                      f"{list(want)}{hint}")
  skipped = dict(skipped or {})
  for name in shapes:
    if name in expected or name in skipped:
      continue
    if TRAINING_STATE.search(name):
      skipped[name] = "training state (optimizer slot or step counter)"
    elif name.startswith("model/") and not name.startswith(BACKBONE_SCOPE):
      skipped[name] = "weights of a task head this model does not have"
    else:
      problems.append(f"unexpected: {label(name)}, shape {list(shapes[name])} (a different "
                      "n_layer, untie_r or a renamed variable?)")
  if problems:
    raise CheckpointMismatchError(
        f"{source}: does not match {type(target).__name__} '{target.name}' "
        f"({len(problems)} problem(s)); nothing was loaded:\n  " + "\n  ".join(problems))

  values = {}
  for name, variable in expected.items():
    value = np.asarray(read(name))
    _check_value(value, variable, f"{source}: {label(name)}")
    values[name] = value
  for name, variable in expected.items():
    variable.assign(values[name].astype(np.dtype(variable.dtype)))
  for name, why in sorted(skipped.items()):
    logging.info("%s: not loaded: %s (%s)", source, name, why)
  return LoadReport(source=source, loaded=sorted(expected), skipped=skipped)
