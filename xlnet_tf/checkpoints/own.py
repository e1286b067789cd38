"""The project's own format: a directory with the full config JSON and a Keras weights file
(and, for a head, head.json: its class and constructor arguments; for a classifier or tagger,
labels.json; for a multi-label classifier, thresholds.json; with its tokenizer, spiece.model and
tokenizer_config.json; with a head's preprocessor, also preprocessor.json; for a model after
`quantize("int8")`, quantization.json, the weights file then holding its int8 kernels and
scales: loaded into the model it came from only, quantized before its weights load).

head.json is read here only (`read_head_file`), for loading, conversion and export; which class
its name stands for is the heads' registry's business (xlnet_tf.heads.registry).

The directory may be remote (gs://...: utils.files): Keras writes the weights file through a
local temporary copy, and h5py reads one (`files.local_copy`).
"""

import os
import tempfile
from typing import Optional, Tuple

import h5py

from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.checkpoints.keras_h5_io import open_hdf5
from xlnet_tf.checkpoints.labels import save_labels, save_thresholds
from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.utils.json_files import read_json_object, write_json

CONFIG_FILE = "xlnet_config.json"
WEIGHTS_FILE = "model.weights.h5"
HEAD_FILE = "head.json"
QUANTIZATION_FILE = "quantization.json"  # {"mode": "int8"} for a quantized model's weights
# The group of a head's weights file that holds its backbone's weights (the attribute name).
BACKBONE_GROUP = "backbone"


def save_pretrained(model_or_head, directory: str) -> str:
  """Writes a self-contained directory: `xlnet_config.json` (every config field) and
  `model.weights.h5`; for a head also `head.json`; `labels.json` (and a multi-label head's
  `thresholds.json`) when it carries `labels`; `spiece.model` and `tokenizer_config.json` when
  it, or its backbone, knows its `tokenizer`; a head's `preprocessor` writes its own tokenizer
  there and `preprocessor.json`. Returns `directory`."""
  backbone = backbone_of(model_or_head)
  quantized = getattr(model_or_head, "quantization", None)
  labels = getattr(model_or_head, "labels", None)
  count = class_count(model_or_head)
  if labels is not None:
    require(count is not None and len(labels) == count, f"{type(model_or_head).__name__}.labels",
            f"one label per output class ({count})", len(labels))
  files.makedirs(directory)
  backbone.config.to_json_file(os.path.join(directory, CONFIG_FILE))
  model_or_head.save_weights(os.path.join(directory, WEIGHTS_FILE))
  quantization_path = os.path.join(directory, QUANTIZATION_FILE)
  if quantized is not None:
    write_json(quantization_path, {"mode": quantized})
  elif files.exists(quantization_path):  # a float model saved over a quantized one
    files.remove(quantization_path)
  if hasattr(model_or_head, "head_config"):
    write_json(os.path.join(directory, HEAD_FILE),
               {"class": type(model_or_head).__name__, **model_or_head.head_config()})
  if labels is not None:
    save_labels(directory, labels)
    if getattr(model_or_head, "multi_label", False):
      save_thresholds(directory, labels, model_or_head.thresholds)
  preprocessor = getattr(model_or_head, "preprocessor", None)
  tokenizer = getattr(model_or_head, "tokenizer", None) or getattr(backbone, "tokenizer", None)
  if preprocessor is not None:  # its tokenizer (what the head reads text with) and settings
    preprocessor.save_pretrained(directory)
  elif tokenizer is not None:
    tokenizer.save_pretrained(directory)
  return directory


def class_count(model) -> Optional[int]:
  """The number of output classes of a classifier or tagger; None for other models."""
  return getattr(model, "num_classes", None) or getattr(model, "num_labels", None)


def check_config_overrides(config_overrides, source: str) -> None:
  """Overrides may set run-time options (mem_len, dropout, ...), not the architecture, which
  comes from the checkpoint; UserInputError naming `source` otherwise."""
  bad = sorted(set(config_overrides) & set(ARCHITECTURE_KEYS))
  if bad:
    raise UserInputError(f"{source}: the architecture comes from the checkpoint; cannot "
                         f"override {bad}")


def stored_config(directory: str, config_overrides) -> XLNetConfig:
  """directory/xlnet_config.json with `config_overrides` (run-time options only)."""
  check_config_overrides(config_overrides, directory)
  return XLNetConfig.from_json_file(os.path.join(directory, CONFIG_FILE), **config_overrides)


def read_head_file(directory: str) -> Optional[Tuple[str, dict]]:
  """(the head's class name, its constructor arguments) from directory/head.json; None without
  the file (a backbone). Errors name the file."""
  path = os.path.join(directory, HEAD_FILE)
  if not files.exists(path):
    return None
  arguments = read_json_object(path, expected="a JSON object: the head's class and arguments")
  name = arguments.pop("class", None)
  require(isinstance(name, str), f"{path}: class", "the name of a head class", repr(name))
  return name, arguments


def load_pretrained_head(directory: str, head_class, **config_overrides):
  """A new `head_class` (e.g. XLNetPretrainer) from a directory `save_pretrained` wrote for
  such a head; `config_overrides` set run-time options (mem_len, dropout, ...)."""
  path = os.path.join(directory, HEAD_FILE)
  if not files.exists(path):
    raise FileNotFoundError(f"{path}: missing; {directory} holds no head (a backbone only?). "
                            f"Expected a {head_class.__name__} saved with save_pretrained")
  try:
    stored_name, arguments = read_head_file(directory)
  except UserInputError as error:
    raise CheckpointMismatchError(f"{error}; expected a {head_class.__name__}") from None
  if stored_name != head_class.__name__:
    raise CheckpointMismatchError(f"{path}: holds a {stored_name}, not a {head_class.__name__}")
  head = head_class(stored_config(directory, config_overrides), **arguments)
  load_own_checkpoint(head, directory)
  return head


def stored_quantization(directory: str) -> Optional[str]:
  """The quantization mode of the weights `save_pretrained` wrote in `directory` ("int8"), or
  None (float weights)."""
  path = os.path.join(directory, QUANTIZATION_FILE)
  if not files.exists(path):
    return None
  mode = read_json_object(path, expected='a JSON object such as {"mode": "int8"}').get("mode")
  require(mode == "int8", f"{path}: mode", '"int8"', repr(mode))
  return mode


def load_own_checkpoint(model_or_head, directory: str) -> None:
  """Loads `model.weights.h5` after checking the stored architecture equals the model's. A
  quantized directory's weights load into the same model quantized: a float model is quantized
  first (its own values are then replaced), a model quantized otherwise is refused."""
  weights_path = _checked_weights_file(model_or_head, directory)
  stored = stored_quantization(directory)
  current = getattr(model_or_head, "quantization", None)
  if stored != current and not (stored and current is None):
    raise CheckpointMismatchError(
        f"{directory}: holds {stored or 'float'} weights; {type(model_or_head).__name__} "
        f"'{model_or_head.name}' is {current or 'float'}"
        + (" (load the float weights, then quantize)" if current else ""))
  if stored and current is None:
    model_or_head.quantize(stored)
  _load_weights_strictly(model_or_head, weights_path)


def load_own_backbone(model, directory: str) -> None:
  """Loads an XLNetModel's weights from a directory `save_pretrained` wrote for a backbone or
  for any head (the part of the head's weights file that holds its backbone)."""
  weights_path = _checked_weights_file(model, directory)
  if not files.exists(os.path.join(directory, HEAD_FILE)):
    load_own_checkpoint(model, directory)
    return
  if stored_quantization(directory):
    raise CheckpointMismatchError(
        f"{directory}: holds a quantized head ({stored_quantization(directory)}); its weights "
        "load only into that head (its class's from_pretrained), not as the backbone of "
        "another: start from the float checkpoint")
  with tempfile.TemporaryDirectory() as folder, files.local_copy(weights_path) as local_path:
    backbone_path = os.path.join(folder, WEIGHTS_FILE)
    with open_hdf5(local_path, shown=weights_path) as source:
      if not isinstance(source.get(BACKBONE_GROUP), h5py.Group):
        raise CheckpointMismatchError(f"{weights_path}: no '{BACKBONE_GROUP}' weights, though "
                                      f"{HEAD_FILE} says it holds a head; nothing was loaded")
      with h5py.File(backbone_path, "w") as target:
        for key in source[BACKBONE_GROUP]:
          source.copy(source[BACKBONE_GROUP][key], target, name=key)
    _load_weights_strictly(model, backbone_path, shown=f"{weights_path} ({BACKBONE_GROUP})")


def _checked_weights_file(model_or_head, directory: str) -> str:
  """directory's weights file, once its config's architecture equals the model's."""
  config_path = os.path.join(directory, CONFIG_FILE)
  weights_path = os.path.join(directory, WEIGHTS_FILE)
  for path in (config_path, weights_path):
    if not files.exists(path):
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
  return weights_path


def _load_weights_strictly(model_or_head, weights_path: str, shown: Optional[str] = None) -> None:
  """Keras' load_weights, all or nothing, its errors one line naming the file.

  Keras assigns layer by layer and raises at the first layer whose weights do not fit, so the
  values from before are put back: a failed load leaves the model as it was.
  """
  with files.local_copy(weights_path) as local_path:  # h5py reads local files only
    _load_local_weights(model_or_head, local_path, shown or weights_path)


def _load_local_weights(model_or_head, weights_path: str, shown: str) -> None:
  """_load_weights_strictly on a local file; errors name `shown`."""
  with open_hdf5(weights_path, shown=shown):  # a damaged file fails here, before any assignment
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
        f"{shown}: does not hold the weights of {type(model_or_head).__name__} "
        f"'{model_or_head.name}' ({detail}); nothing was loaded") from None
