"""The project's own format: a directory with the full config JSON and a Keras weights file
(and, for a head, head.json: its class and constructor arguments; for a classifier or tagger,
labels.json; for a multi-label classifier, thresholds.json).

`load(directory)` reads any such directory back: the model or head, its labels and
thresholds. head.json is read here only (`read_head_file`), for loading, conversion and export.
"""

import dataclasses
import os
from typing import List, Optional, Tuple

from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.checkpoints.keras_h5_io import open_hdf5
from xlnet_tf.checkpoints.labels import LABELS_FILE, saved_labels, saved_thresholds
from xlnet_tf.modeling.backbone import XLNetModel, backbone_of
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.heads.registry import head_class as registered_head_class
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json_object, write_json

CONFIG_FILE = "xlnet_config.json"
WEIGHTS_FILE = "model.weights.h5"
HEAD_FILE = "head.json"


def save_pretrained(model_or_head, directory: str) -> str:
  """Writes `xlnet_config.json` (every config field) and `model.weights.h5`; for a head also
  `head.json`."""
  os.makedirs(directory, exist_ok=True)
  backbone_of(model_or_head).config.to_json_file(os.path.join(directory, CONFIG_FILE))
  model_or_head.save_weights(os.path.join(directory, WEIGHTS_FILE))
  if hasattr(model_or_head, "head_config"):
    write_json(os.path.join(directory, HEAD_FILE),
               {"class": type(model_or_head).__name__, **model_or_head.head_config()})
  return directory


def load_pretrained(directory: str, **config_overrides):
  """A new XLNetModel from a directory written by `save_pretrained`.

  `config_overrides` set run-time options (mem_len, dropout, ...); the architecture comes from
  the file.
  """
  model = XLNetModel(_stored_config(directory, config_overrides))
  load_own_checkpoint(model, directory)
  return model


def _stored_config(directory: str, config_overrides) -> XLNetConfig:
  bad = sorted(set(config_overrides) & set(ARCHITECTURE_KEYS))
  if bad:
    raise ValueError(f"load_pretrained: the architecture comes from the checkpoint; cannot "
                     f"override {bad}")
  return XLNetConfig.from_json_file(os.path.join(directory, CONFIG_FILE), **config_overrides)


def read_head_file(directory: str) -> Optional[Tuple[type, dict]]:
  """(head class, constructor arguments) from directory/head.json; None without the file
  (a backbone). Errors name the file."""
  path = os.path.join(directory, HEAD_FILE)
  if not os.path.exists(path):
    return None
  arguments = read_json_object(path, expected="a JSON object: the head's class and arguments")
  return registered_head_class(arguments.pop("class", None), path), arguments


def load_pretrained_head(directory: str, head_class, **config_overrides):
  """A new `head_class` (e.g. XLNetPretrainer) from a directory `save_pretrained` wrote for
  such a head; `config_overrides` as in `load_pretrained`."""
  path = os.path.join(directory, HEAD_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: missing; {directory} holds no head (a backbone only?). "
                            f"Expected a {head_class.__name__} saved with save_pretrained")
  try:
    stored_class, arguments = read_head_file(directory)
  except UserInputError as error:
    raise CheckpointMismatchError(f"{error}; expected a {head_class.__name__}") from None
  if stored_class is not head_class:
    raise CheckpointMismatchError(f"{path}: holds a {stored_class.__name__}, not a "
                                  f"{head_class.__name__}")
  head = head_class(XLNetModel(_stored_config(directory, config_overrides)), **arguments)
  load_own_checkpoint(head, directory)
  return head


@dataclasses.dataclass(frozen=True)
class SavedModel:
  """What an own-format directory holds: the model (an XLNetModel, or the head head.json
  names), the label of each class (labels.json) and a multi-label head's thresholds."""
  model: object
  labels: Optional[List[str]] = None
  thresholds: Optional[List[float]] = None


def class_count(model) -> Optional[int]:
  """The number of output classes of a classifier or tagger; None for other models."""
  return getattr(model, "num_classes", None) or getattr(model, "num_labels", None)


def load(directory: str, **config_overrides) -> SavedModel:
  """The model or head saved in `directory`, with its labels and thresholds (a multi-label
  head's thresholds are also set on it); labels.json must count the head's classes."""
  head_file = read_head_file(directory)
  if head_file is None:
    return SavedModel(load_pretrained(directory, **config_overrides))
  model = load_pretrained_head(directory, head_file[0], **config_overrides)
  labels = saved_labels(directory)
  count = class_count(model)
  if labels is not None and count is not None and len(labels) != count:
    raise UserInputError(f"{os.path.join(directory, LABELS_FILE)}: lists {len(labels)} labels, "
                         f"but the {type(model).__name__} in "
                         f"{os.path.join(directory, HEAD_FILE)} has {count} classes")
  thresholds = None
  if getattr(model, "multi_label", False) and labels is not None:
    thresholds = saved_thresholds(directory, labels)
    if thresholds is not None:
      model.thresholds = thresholds
  return SavedModel(model, labels, thresholds)


def load_own_checkpoint(model_or_head, directory: str) -> None:
  """Loads `model.weights.h5` after checking the stored architecture equals the model's."""
  config_path = os.path.join(directory, CONFIG_FILE)
  weights_path = os.path.join(directory, WEIGHTS_FILE)
  for path in (config_path, weights_path):
    if not os.path.exists(path):
      raise FileNotFoundError(f"{path}: missing; an xlnet_tf checkpoint directory holds "
                              f"{CONFIG_FILE} and {WEIGHTS_FILE}")
  stored = XLNetConfig.from_json_file(config_path)
  config = backbone_of(model_or_head).config
  differences = [f"{key}: checkpoint {getattr(stored, key)!r}, model {getattr(config, key)!r}"
                 for key in ARCHITECTURE_KEYS + ("pos_encoding",)
                 if getattr(stored, key) != getattr(config, key)]
  if differences:
    raise CheckpointMismatchError(f"{directory}: the stored config does not match the model:\n  "
                                  + "\n  ".join(differences))
  _load_weights_strictly(model_or_head, weights_path)


def _load_weights_strictly(model_or_head, weights_path: str) -> None:
  """Keras' load_weights, all or nothing, its errors one line naming the file.

  Keras assigns layer by layer and raises at the first layer whose weights do not fit, so the
  values from before are put back: a failed load leaves the model as it was.
  """
  with open_hdf5(weights_path):  # a damaged file fails here, before anything is assigned
    pass
  before = [(variable, variable.numpy()) for variable in model_or_head.weights]  # host copy
  try:
    model_or_head.load_weights(weights_path)
  except (ValueError, KeyError, OSError) as error:
    for variable, value in before:
      variable.assign(value)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # Keras' first line only counts the failures ("A total of 3 objects could not be
    # loaded. Example error message for object ...:"); the next one says what did not fit.
    detail = lines[1] if len(lines) > 1 and lines[0].startswith("A total of") else \
        (lines[0] if lines else type(error).__name__)
    raise CheckpointMismatchError(
        f"{weights_path}: does not hold the weights of {type(model_or_head).__name__} "
        f"'{model_or_head.name}' ({detail}); nothing was loaded") from None
