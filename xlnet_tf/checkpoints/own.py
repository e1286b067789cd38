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

import collections
import io
import os
import tempfile
from typing import Dict, Optional, Tuple

import h5py
import numpy as np

from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.checkpoints.keras_h5_io import open_hdf5
from xlnet_tf.checkpoints.labels import save_head_labels
from xlnet_tf.checkpoints.naming import backbone_of, minimum_weight_count
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError, is_int, require
from xlnet_tf.utils.json_files import read_json_object, write_json
from xlnet_tf.utils.whole_directories import RUN_LOCK_FILE, staged_directory

CONFIG_FILE = "xlnet_config.json"
WEIGHTS_FILE = "model.weights.h5"
HEAD_FILE = "head.json"
QUANTIZATION_FILE = "quantization.json"  # {"mode": "int8"} for a quantized model's weights
# What a model directory holds, in any format a tool writes (own, original, Hugging Face), with
# its tokenizer and labels: save_pretrained and conversion replace a directory of these only.
MODEL_DIRECTORY_FILES = frozenset({
    CONFIG_FILE, WEIGHTS_FILE, HEAD_FILE, QUANTIZATION_FILE, "labels.json", "thresholds.json",
    "spiece.model", "tokenizer_config.json", "preprocessor.json", "config.json",
    "model.safetensors", "pytorch_model.bin", "tf_model.h5", "model.safetensors.index.json",
    "pytorch_model.bin.index.json", "tf_model.h5.index.json", "checkpoint",
    "special_tokens_map.json", "generation_config.json"})
MODEL_DIRECTORY_PREFIXES = ("xlnet_model.ckpt", "model-0", "pytorch_model-0", "tf_model-0")
# The group of a head's weights file that holds its backbone's weights (the attribute name).
BACKBONE_GROUP = "backbone"


def save_pretrained(model_or_head, directory: str) -> str:
  """Writes a self-contained directory that the classes' `from_pretrained` read back.

  The files: `xlnet_config.json` (every config field) and `model.weights.h5`; for a head also
  `head.json`; `labels.json` (and a multi-label head's `thresholds.json`) when it carries
  `labels`; `spiece.model` and `tokenizer_config.json` when it, or its backbone, knows its
  `tokenizer`; a head's `preprocessor` writes its own tokenizer there and `preprocessor.json`.
  A quantized model or head is saved as it is: `quantization.json` ({"mode": "int8"}) beside
  a weights file holding its int8 kernels and float32 scales, which load_own_checkpoint (and
  so from_pretrained) loads into the same class, quantized.

  The directory appears whole or not at all: written beside it and renamed into place, over an
  existing one swapped in whole, so no file of the model it replaces survives and a process
  killed at any point leaves the old model or the new one (utils.whole_directories; remote:
  `xlnet_config.json` copied last). An existing directory holding other files than a model's
  is refused, not replaced.

  Args:
    model_or_head: the XLNetModel or head to save.
    directory: where to write, local or remote (gs://...).

  Returns:
    `directory`.

  Raises:
    UserInputError: when `directory` holds files that are not a model's, or the `labels`
      carried do not name one label per class.
  """
  labels = getattr(model_or_head, "labels", None)
  count = class_count(model_or_head)
  if labels is not None:
    require(count is not None and len(labels) == count, f"{type(model_or_head).__name__}.labels",
            f"one label per output class ({count})", len(labels))
  check_replaceable(directory)
  with staged_directory(directory, last=CONFIG_FILE) as staging:
    _write_model_files(model_or_head, staging)
  return directory


def check_replaceable(directory: str) -> None:
  """Refuses (UserInputError naming the directory and the files) to replace an existing
  directory that holds files a model directory does not: it is someone's other data."""
  if not files.isdir(directory):
    return
  foreign = sorted(name for name in files.listdir(directory) if not _model_file(name))
  if foreign:
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise UserInputError(f"{directory}: holds files that are not a model's ({shown}); a model "
                         "is saved into a new directory or over a model directory, which it "
                         "replaces whole")


def _model_file(name: str) -> bool:
  """Whether `name` is a file a saved or converted model directory holds (any format), or the
  run lock of a run writing it."""
  return (name in MODEL_DIRECTORY_FILES or name.startswith(MODEL_DIRECTORY_PREFIXES)
          or name == RUN_LOCK_FILE)


def _write_model_files(model_or_head, directory: str) -> None:
  """save_pretrained's files, into the (new, empty) `directory`."""
  backbone = backbone_of(model_or_head)
  quantized = getattr(model_or_head, "quantization", None)
  backbone.config.to_json_file(os.path.join(directory, CONFIG_FILE))
  write_weights(model_or_head, os.path.join(directory, WEIGHTS_FILE))
  if quantized is not None:
    write_json(os.path.join(directory, QUANTIZATION_FILE), {"mode": quantized})
  if hasattr(model_or_head, "head_config"):
    write_json(os.path.join(directory, HEAD_FILE),
               {"class": type(model_or_head).__name__, **model_or_head.head_config()})
  save_head_labels(directory, model_or_head)
  preprocessor = getattr(model_or_head, "preprocessor", None)
  tokenizer = getattr(model_or_head, "tokenizer", None) or getattr(backbone, "tokenizer", None)
  if preprocessor is not None:  # its tokenizer (what the head reads text with) and settings
    preprocessor.save_pretrained(directory)
  elif tokenizer is not None:
    tokenizer.save_pretrained(directory)


class _WeightsInMemory(io.BytesIO):
  """An HDF5 weights file built in memory: Keras' save_weights takes it (its HDF5 store writes
  to a BytesIO), and its name ends in `.weights.h5` as Keras requires of a path."""

  def __str__(self):
    return WEIGHTS_FILE


def write_weights(model_or_head, path: str) -> str:
  """Keras' save_weights into `path`, built in memory and written in one Python write.

  h5py writing straight to a disk that fills up loses its file's state, and its File.close
  then crashes the interpreter (a segmentation fault, nothing to catch); written here, a full
  disk (or any failing write) is an OSError naming `path`."""
  buffer = _WeightsInMemory()
  model_or_head.save_weights(buffer)
  files.write_bytes(path, buffer.getbuffer())
  return path


def class_count(model) -> Optional[int]:
  """The number of output classes of a classifier or tagger; None for other models."""
  return getattr(model, "num_classes", None) or getattr(model, "num_labels", None)


def check_config_overrides(config_overrides, source: str) -> None:
  """Overrides may set run-time options (mem_len, dropout, ...) and ff_activation (which shapes
  no weight: the form of gelu a checkpoint's library computed with is a choice), not the sizes,
  which come from the checkpoint; UserInputError naming `source` otherwise."""
  bad = sorted(set(config_overrides) & set(ARCHITECTURE_KEYS) - {"ff_activation"})
  if bad:
    raise UserInputError(f"{source}: the architecture comes from the checkpoint; cannot "
                         f"override {bad}")


def stored_config(directory: str, config_overrides) -> XLNetConfig:
  """directory/xlnet_config.json with `config_overrides` (run-time options only)."""
  check_config_overrides(config_overrides, directory)
  return XLNetConfig.from_json_file(os.path.join(directory, CONFIG_FILE), **config_overrides)


def stored_weight_count(directory: str) -> int:
  """The number of values in directory's weights file (its HDF5 structure only is read)."""
  weights_path = os.path.join(directory, WEIGHTS_FILE)
  with files.local_copy(weights_path) as local_path, \
      open_hdf5(local_path, shown=weights_path) as stored:
    try:
      return sum(int(dataset.size) for dataset in stored_datasets(stored, weights_path).values())
    except (TypeError, ValueError, OSError, RuntimeError) as error:
      raise CheckpointMismatchError(f"{weights_path}: damaged HDF5 dataset ({error})") from None


def check_weight_count(config: XLNetConfig, head_arguments, held: int, config_source: str,
                       weights_source: str) -> None:
  """Before the model is built: the weights file holds at least the values a model of `config`
  (and a head of `head_arguments`: its classes' output kernel) needs. Else one
  CheckpointMismatchError naming both files: sizes a file states are not believed before the
  weights confirm them (a huge n_layer would take minutes to build, or the memory)."""
  needed = minimum_weight_count(config)
  classes = class_count_argument(head_arguments or {})
  needed += config.d_model * classes if is_int(classes) and classes > 0 else 0
  if held < needed:
    sizes = ", ".join(f"{key} {getattr(config, key)}" for key in
                      ("n_token", "n_layer", "d_model", "n_head", "d_head", "d_inner"))
    head = f" and {classes} classes" if classes else ""
    raise CheckpointMismatchError(
        f"{config_source}: {sizes}{head} need at least {needed:,} weight values, but "
        f"{weights_source} holds {held:,}: the config does not describe these weights")


def class_count_argument(head_arguments) -> Optional[int]:
  """The number of output classes a head's constructor arguments give (num_classes of a
  classifier, num_labels of a tagger), or None."""
  return head_arguments.get("num_classes", head_arguments.get("num_labels"))


def check_head_arguments(arguments, source: str) -> None:
  """The sizes a stored head states are sizes (num_classes, num_labels: positive integers);
  UserInputError naming `source` otherwise."""
  for key in ("num_classes", "num_labels"):
    if key in arguments:
      require(is_int(arguments[key]) and 0 < arguments[key] < 2**31, f"{source}: {key}",
              "a positive integer", repr(arguments[key]))


def build_stored_head(head_class, config: XLNetConfig, arguments, source: str):
  """`head_class(config, **arguments)` for arguments read from `source` (head.json, a Hugging
  Face config.json): an argument the class refuses is a CheckpointMismatchError naming the
  file, not the constructor's bare TypeError or ValueError."""
  try:
    return head_class(config, **arguments)
  except (TypeError, ValueError) as error:
    if isinstance(error, UserInputError):
      raise
    raise CheckpointMismatchError(f"{source}: cannot build {head_class.__name__} from its "
                                  f"arguments ({error})") from None


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
  """A new head of `head_class` from a directory `save_pretrained` wrote for such a head.

  The head is built from head.json's arguments and xlnet_config.json once the weights file is
  known to hold enough values for them, then loaded with load_own_checkpoint (a quantized
  head comes back quantized).

  Args:
    directory: the own-format directory.
    head_class: the head's class, e.g. XLNetPretrainer; head.json must name it.
    **config_overrides: XLNetConfig run-time options (mem_len, dropout, ...).

  Returns:
    The head, with the stored weights.

  Raises:
    FileNotFoundError: without head.json (a backbone's directory), xlnet_config.json or
      model.weights.h5.
    CheckpointMismatchError: when head.json names another class or arguments the class
      refuses, or the weights do not fit the head.
    UserInputError: for an override of an architecture key, or invalid stored sizes.
  """
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
  config = stored_config(directory, config_overrides)
  check_head_arguments(arguments, path)
  check_weight_count(config, arguments, stored_weight_count(directory), path,
                     os.path.join(directory, WEIGHTS_FILE))
  head = build_stored_head(head_class, config, arguments, path)
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
  """Loads a directory `save_pretrained` wrote into the model or head it was written from.

  Loads `model.weights.h5` after checking the stored architecture equals the model's, and
  every stored value (shape, kind of number, finite) before anything is assigned. A quantized
  directory's weights (quantization.json) load into the same model quantized: a float model
  is quantized first (its own values are then replaced). A quantized model does not take a
  float directory's weights (load the float weights, then quantize).

  Args:
    model_or_head: the XLNetModel or head (of the class that was saved) to load into.
    directory: the own-format directory, local or remote.

  Raises:
    FileNotFoundError: without xlnet_config.json or model.weights.h5.
    CheckpointMismatchError: when the architecture, the weights or the quantization differ
      from the model's; no stored weight is assigned then.
    UserInputError: for a quantization.json whose mode is not "int8".
  """
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
      try:
        group = source.get(BACKBONE_GROUP)
        if not isinstance(group, h5py.Group):
          raise CheckpointMismatchError(f"{weights_path}: no '{BACKBONE_GROUP}' weights, though "
                                        f"{HEAD_FILE} says it holds a head; nothing was loaded")
        backbone_file = io.BytesIO()  # in memory, as write_weights says why
        with h5py.File(backbone_file, "w") as target:
          for key in group:
            source.copy(group[key], target, name=key)
      except (OSError, RuntimeError, KeyError, ValueError, TypeError) as error:
        raise CheckpointMismatchError(f"{weights_path}: damaged HDF5 structure ({error}); save "
                                      "or fetch it again") from None
    files.write_bytes(backbone_path, backbone_file.getbuffer())
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
  with open_hdf5(weights_path, shown=shown) as stored:  # a damaged file fails here
    check_stored_values(model_or_head, stored, shown)
  before = [(variable, variable.numpy()) for variable in model_or_head.weights]  # host copy
  try:
    model_or_head.load_weights(weights_path)
  except (ValueError, KeyError, OSError, RuntimeError, TypeError) as error:
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


def _value_kind(dtype) -> str:
  """"float" for any floating-point type (a width Keras converts on loading), else the type's
  name: an integer never stands in for a float, nor the reverse."""
  return "float" if np.dtype(dtype).kind == "f" else np.dtype(dtype).name


def stored_datasets(group, shown: str) -> Dict[str, "h5py.Dataset"]:
  """{path: dataset} of every dataset in an open HDF5 file or group; a structure h5py cannot
  walk (damaged) is a CheckpointMismatchError naming `shown`."""
  datasets = {}
  try:
    group.visititems(lambda name, node: datasets.__setitem__(name, node)
                     if isinstance(node, h5py.Dataset) else None)
  except (OSError, RuntimeError, KeyError, ValueError, TypeError) as error:
    raise CheckpointMismatchError(f"{shown}: damaged HDF5 structure ({error}); save or fetch "
                                  "it again") from None
  return datasets


# Keras' save_weights of a compiled model adds its optimizer's state under this group, which
# load_weights into a model without that optimizer passes over.
_OPTIMIZER_GROUP = "optimizer/"


def check_stored_values(model_or_head, group, shown: str) -> None:
  """Before Keras assigns anything: the file holds one dataset for each of the model's
  variables, of its shape and kind of type (Keras would cast integers into a float variable
  silently), every value finite (an optimizer's state aside). CheckpointMismatchError naming
  `shown` and what differs."""
  datasets = {name: dataset for name, dataset in stored_datasets(group, shown).items()
              if not name.startswith(_OPTIMIZER_GROUP)}
  try:
    stored = collections.Counter((_value_kind(dataset.dtype), tuple(dataset.shape))
                                 for dataset in datasets.values())
  except (TypeError, ValueError, OSError, RuntimeError) as error:
    raise CheckpointMismatchError(f"{shown}: damaged HDF5 dataset ({error})") from None
  wanted = collections.Counter((_value_kind(variable.dtype), tuple(variable.shape))
                               for variable in model_or_head.weights)
  if stored != wanted:
    extra = sorted((stored - wanted).elements())[:3]
    missing = sorted((wanted - stored).elements())[:3]
    raise CheckpointMismatchError(
        f"{shown}: does not hold the weights of {type(model_or_head).__name__} "
        f"'{model_or_head.name}': it holds {_listed(extra)} the model has no variable for, and "
        f"lacks {_listed(missing)}; nothing was loaded")
  for name, dataset in datasets.items():
    if dataset.dtype.kind != "f":
      continue
    try:
      finite = bool(np.isfinite(dataset[()]).all())
    except (OSError, RuntimeError, ValueError, TypeError) as error:
      raise CheckpointMismatchError(f"{shown}: cannot read {name} ({error}); damaged or cut "
                                    "short?") from None
    if not finite:
      raise CheckpointMismatchError(f"{shown}: {name} holds NaN or infinity; nothing was loaded")


def _listed(entries) -> str:
  return ", ".join(f"{kind} {list(shape)}" for kind, shape in entries) or "nothing"
