"""The project's own format: a directory with the full config JSON and a Keras weights file
(and, for a head, head.json: its class and constructor arguments)."""

import os

from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.checkpoints.keras_h5_io import open_hdf5
from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.json_files import read_json_object

CONFIG_FILE = "xlnet_config.json"
WEIGHTS_FILE = "model.weights.h5"
HEAD_FILE = "head.json"


def save_pretrained(model_or_head, directory: str) -> str:
  """Writes `xlnet_config.json` (every config field) and `model.weights.h5`; for a head also
  `head.json`."""
  from xlnet_tf.json_files import write_json
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
  from xlnet_tf.model import XLNetModel
  model = XLNetModel(_stored_config(directory, config_overrides))
  load_own_checkpoint(model, directory)
  return model


def _stored_config(directory: str, config_overrides) -> XLNetConfig:
  bad = sorted(set(config_overrides) & set(ARCHITECTURE_KEYS))
  if bad:
    raise ValueError(f"load_pretrained: the architecture comes from the checkpoint; cannot "
                     f"override {bad}")
  return XLNetConfig.from_json_file(os.path.join(directory, CONFIG_FILE), **config_overrides)


def load_pretrained_head(directory: str, head_class, **config_overrides):
  """A new `head_class` (e.g. XLNetPretrainer) from a directory `save_pretrained` wrote for
  such a head; `config_overrides` as in `load_pretrained`."""
  path = os.path.join(directory, HEAD_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: missing; {directory} holds no head (a backbone only?). "
                            f"Expected a {head_class.__name__} saved with save_pretrained")
  arguments = read_json_object(path, expected="a JSON object: the head's class and arguments")
  stored_class = arguments.pop("class", None)
  if stored_class != head_class.__name__:
    raise CheckpointMismatchError(f"{path}: holds a {stored_class}, not a {head_class.__name__}")
  from xlnet_tf.model import XLNetModel
  head = head_class(XLNetModel(_stored_config(directory, config_overrides)), **arguments)
  load_own_checkpoint(head, directory)
  return head


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
