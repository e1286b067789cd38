"""Pretrained directories, recognized by their files, for the classes' `from_pretrained`.

What `XLNetModel.from_pretrained` and every head's `from_pretrained` read. Nothing here builds
a model (the model classes stand on the floors above); they build it from `stored_config` and
pass it in.

  own          xlnet_config.json + model.weights.h5 (+ head.json, labels.json, thresholds.json,
               quantization.json)
  huggingface  config.json + model.safetensors, pytorch_model.bin or tf_model.h5 (or a
               sharded index of one); config.json's "architectures" names the head
  original     xlnet_config.json + a TF1 checkpoint (xlnet_model.ckpt.index / .data-*); also
               the checkpoint's prefix (DIR/xlnet_model.ckpt, as the original scripts take it:
               that checkpoint, the config beside it), or a directory holding a TF1
               checkpoint without xlnet_config.json (then the config is given apart: the
               command-line tools' --model_config; from_pretrained says it is missing)

One rule (`locate`) for every reader: the classes' from_pretrained and the command-line tools'
model flags (xlnet_tf/cli/pretrained_flags.py) accept the same names, in the same layouts.

Any of them may hold spiece.model (+ tokenizer_config.json): the tokenizer; and
preprocessor.json: how a head packs raw strings (XLNetPreprocessor). A name that is no
local path is a Hugging Face hub id, fetched through huggingface_hub's cache
(xlnet_tf.utils.hub). A directory may be remote (gs://..., any tf.io.gfile file system:
utils.files).
"""

import dataclasses
import inspect
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging

from xlnet_tf.checkpoints import own
from xlnet_tf.checkpoints.huggingface import (WEIGHT_FILES, config_from_huggingface,
                                              huggingface_weight_files,
                                              load_huggingface_checkpoint)
from xlnet_tf.checkpoints.huggingface_writer import (HUGGINGFACE_ARCHITECTURES,
                                                     HUGGINGFACE_CONFIG_FILE)
from xlnet_tf.checkpoints.labels import (LABELS_FILE, THRESHOLDS_FILE, saved_labels,
                                         saved_thresholds)
from xlnet_tf.checkpoints.original import (CHECKPOINT_STATE_FILE, holds_variable,
                                           load_original_checkpoint, resolve_prefix,
                                           stored_value_count)
from xlnet_tf.checkpoints.safetensors_io import stated_value_count
from xlnet_tf.config import XLNetConfig
from xlnet_tf.text.preprocessor import PREPROCESSOR_FILE, XLNetPreprocessor, saved_preprocessor
from xlnet_tf.text.tokenizer import (SENTENCEPIECE_FILE, TOKENIZER_CONFIG_FILE, XLNetTokenizer,
                                     check_vocabulary, saved_tokenizer)
from xlnet_tf.utils import files as file_system
from xlnet_tf.utils import hub
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json_object

# transformers' fast tokenizer, which holds no SentencePiece model this library could read.
FAST_TOKENIZER_FILE = "tokenizer.json"

OWN, HUGGINGFACE, ORIGINAL = "own", "huggingface", "original"
EXPECTED = ("xlnet_tf's own files (xlnet_config.json + model.weights.h5), Hugging Face's "
            "(config.json + model.safetensors, pytorch_model.bin or tf_model.h5) or the "
            "original's (xlnet_config.json + a TF1 checkpoint xlnet_model.ckpt.index/.data-*, "
            "or that checkpoint's prefix DIR/xlnet_model.ckpt)")
# A pretrained language model: where the fine-tuning of every other head starts.
PRETRAINING_HEAD = "XLNetPretrainer"
_LM_BIAS = "model/lm_loss/bias"  # what the original pretraining keeps beside the backbone
_OURS = {theirs: ours for ours, theirs in HUGGINGFACE_ARCHITECTURES.items()}


@dataclasses.dataclass(frozen=True)
class Pretrained:
  """A pretrained directory: the name given (a path or a hub id), where it lies, its layout;
  for a TF1 checkpoint prefix given (original), that prefix (else the directory's latest
  checkpoint is read)."""
  name: str
  directory: str
  layout: str
  prefix: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class StoredHead:
  """The head whose weights a pretrained directory holds besides the backbone's."""
  class_name: Optional[str]  # ours; None for a transformers head xlnet_tf has no class for
  arguments: Dict[str, Any]  # its constructor arguments
  source: str                # the file that says so
  described_as: str          # for messages, with the file
  labels: Optional[List[str]] = None
  thresholds: Optional[List[float]] = None

  @property
  def is_pretraining(self) -> bool:
    return self.class_name == PRETRAINING_HEAD


def locate(name: str) -> Pretrained:
  """The pretrained directory `name` stands for and its layout: a local or remote directory,
  a TF1 checkpoint prefix (DIR/xlnet_model.ckpt: original, the directory DIR) or a hub id;
  FileNotFoundError or UserInputError naming `name` and what was expected. A name that reads
  as a local path is never looked up on the hub (utils.hub)."""
  # The prefix first, as original.resolve_prefix: a file system keyed by whole paths (ram://)
  # calls DIR/xlnet_model.ckpt a directory too.
  if file_system.isfile(name + ".index"):
    return Pretrained(name, os.path.dirname(name) or ".", ORIGINAL, prefix=name)
  directory = hub.local_directory(name, _files_to_fetch, EXPECTED)
  return Pretrained(name, directory, layout_of(directory, name))


def checkpoint_path(place: Pretrained) -> str:
  """What the loaders take for `place`: the TF1 checkpoint prefix given, else its directory
  (a hub id's: its cache's)."""
  return place.prefix or place.directory


def stores_config(place: Pretrained) -> bool:
  """Whether the directory holds the model's config (an original one may not: a TF1
  checkpoint whose config is given apart)."""
  return file_system.exists(_config_path(place))


def _holds_tf1_checkpoint(files) -> bool:
  return any(file == CHECKPOINT_STATE_FILE or file.endswith(".index") for file in files)


def layout_of(directory: str, name: Optional[str] = None) -> str:
  """own, huggingface or original, from the files in `directory` (in that order, when it
  holds more than one); UserInputError naming `name` (default: the directory) for none."""
  files = set(file_system.listdir(directory))
  if own.CONFIG_FILE in files and own.WEIGHTS_FILE in files:
    return OWN
  if HUGGINGFACE_CONFIG_FILE in files and any(
      weights in files or weights + ".index.json" in files for weights in WEIGHT_FILES):
    return HUGGINGFACE
  if _holds_tf1_checkpoint(files):  # with xlnet_config.json, or with the config given apart
    return ORIGINAL
  where = directory if name in (None, directory) else f"{name} ({directory})"
  raise UserInputError(f"{where}: not a pretrained XLNet directory; expected "
                       f"{EXPECTED}; it holds: {_shown(files)}")


def _shown(files) -> str:
  return ", ".join(sorted(files)[:10]) + (", ..." if len(files) > 10 else "") or "nothing"


def _files_to_fetch(files: Sequence[str]) -> List[str]:
  """Of a hub repository's files, those a pretrained directory is read from: the small ones
  and one set of weights (the first layout that layout_of would pick)."""
  present = set(files)
  wanted = [file for file in (own.CONFIG_FILE, HUGGINGFACE_CONFIG_FILE, own.HEAD_FILE,
                              LABELS_FILE, THRESHOLDS_FILE, SENTENCEPIECE_FILE,
                              TOKENIZER_CONFIG_FILE, PREPROCESSOR_FILE, CHECKPOINT_STATE_FILE)
            if file in present]
  if own.CONFIG_FILE in present and own.WEIGHTS_FILE in present:
    return wanted + [own.WEIGHTS_FILE]
  for weights in WEIGHT_FILES:
    if weights in present:
      return wanted + [weights]
    if weights + ".index.json" in present:  # model-00001-of-00002.safetensors, ...
      stem, suffix = os.path.splitext(weights)
      return wanted + [weights + ".index.json", f"{stem}-*{suffix}"]
  return wanted + [file[:-len(".index")] + ".*" for file in present if file.endswith(".index")]


def split_arguments(constructor, arguments: Dict[str, Any], caller: str
                    ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
  """(the arguments `constructor` takes by name, the rest: XLNetConfig overrides). A name that
  is neither is a UserInputError naming `caller` and what it takes."""
  parameters = list(inspect.signature(constructor).parameters.values())[2:]  # self, config
  constructor_names = [parameter.name for parameter in parameters if parameter.kind not in
                       (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)]
  config_names = {field.name for field in dataclasses.fields(XLNetConfig)}
  unknown = sorted(set(arguments) - set(constructor_names) - config_names)
  if unknown:
    raise UserInputError(f"{caller}: unknown keyword argument(s) {unknown}; it takes "
                         f"{constructor_names} and XLNetConfig's run-time options (mem_len, "
                         "dropout, ...)")
  return ({key: value for key, value in arguments.items() if key in constructor_names},
          {key: value for key, value in arguments.items() if key not in constructor_names})


def stored_config(place: Pretrained, config_overrides: Dict[str, Any]) -> XLNetConfig:
  """The XLNetConfig the directory stores, with `config_overrides` (run-time options only:
  the architecture comes from the checkpoint)."""
  if place.layout == HUGGINGFACE:
    path = os.path.join(place.directory, HUGGINGFACE_CONFIG_FILE)
    own.check_config_overrides(config_overrides, path)
    config = config_from_huggingface(read_json_object(path), source=path, **config_overrides)
  else:
    if not stores_config(place):  # original: a TF1 checkpoint whose config is given apart
      raise FileNotFoundError(
          f"{place.name}: a TF1 checkpoint without {own.CONFIG_FILE} beside it ("
          f"{place.directory} holds: {_shown(file_system.listdir(place.directory))}); put the "
          f"model's {own.CONFIG_FILE} there (the command-line tools also take it as "
          "--model_config)")
    config = own.stored_config(place.directory, config_overrides)
  check_weight_count(place, config)
  return config


def check_weight_count(place: Pretrained, config: XLNetConfig, head_arguments=None,
                       source: Optional[str] = None) -> None:
  """own.check_weight_count against the values the directory's weights file states (its
  header, index or HDF5 structure: read before anything is built); `source` is the file the
  sizes come from (the config by default). Not done where the count needs the whole file
  read (pytorch_model.bin, tf_model.h5: the reader checks every shape, after the build)."""
  held, weights_source = _stored_weight_count(place)
  if held is not None:
    own.check_weight_count(config, head_arguments, held, source or _config_path(place),
                           weights_source)


def _config_path(place: Pretrained) -> str:
  name = HUGGINGFACE_CONFIG_FILE if place.layout == HUGGINGFACE else own.CONFIG_FILE
  return os.path.join(place.directory, name)


def _stored_weight_count(place: Pretrained) -> Tuple[Optional[int], str]:
  """(the number of weight values the directory's weights file states, or None where that
  needs the whole file read; the file)."""
  if place.layout == OWN:
    return (own.stored_weight_count(place.directory),
            os.path.join(place.directory, own.WEIGHTS_FILE))
  if place.layout == ORIGINAL:
    prefix = resolve_prefix(checkpoint_path(place))
    return stored_value_count(prefix), prefix
  weight_files, source = huggingface_weight_files(place.directory)
  if not all(path.endswith(".safetensors") for path in weight_files):
    return None, source
  counts = [stated_value_count(path) for path in weight_files]
  return (None if None in counts else sum(counts)), source


def stored_head(place: Pretrained) -> Optional[StoredHead]:
  """The head the directory holds, None for a backbone alone."""
  if place.layout == OWN:
    return _own_head(place.directory)
  if place.layout == HUGGINGFACE:
    head = _huggingface_head(place.directory)
    if head is not None and head.class_name is not None:
      own.check_head_arguments(head.arguments, head.source)
      check_weight_count(place, stored_config(place, {}), head.arguments, head.source)
    return head
  prefix = resolve_prefix(checkpoint_path(place))
  if holds_variable(prefix, _LM_BIAS):
    return StoredHead(PRETRAINING_HEAD, {}, prefix, f"an {PRETRAINING_HEAD} ({prefix} holds "
                      f"the original pretraining's {_LM_BIAS})")
  return None


def _own_head(directory: str) -> Optional[StoredHead]:
  head_file = own.read_head_file(directory)
  if head_file is None:
    return None
  class_name, arguments = head_file
  own.check_head_arguments(arguments, os.path.join(directory, own.HEAD_FILE))
  check_weight_count(Pretrained(directory, directory, OWN), own.stored_config(directory, {}),
                     arguments, os.path.join(directory, own.HEAD_FILE))
  labels, thresholds = saved_labels(directory), None
  count = own.class_count_argument(arguments)
  if labels is not None and count is not None and len(labels) != count:
    raise UserInputError(f"{os.path.join(directory, LABELS_FILE)}: lists {len(labels)} labels, "
                         f"but the {class_name} in {os.path.join(directory, own.HEAD_FILE)} "
                         f"has {count} classes")
  if labels is not None and arguments.get("multi_label"):
    thresholds = saved_thresholds(directory, labels)
  path = os.path.join(directory, own.HEAD_FILE)
  return StoredHead(class_name, arguments, path, f"an {class_name} ({path})", labels, thresholds)


def _huggingface_head(directory: str) -> Optional[StoredHead]:
  """The head config.json's "architectures" names, with the constructor arguments its fields
  give (num_labels or id2label, summary_type, problem_type, start_n_top / end_n_top)."""
  path = os.path.join(directory, HUGGINGFACE_CONFIG_FILE)
  values = read_json_object(path)
  architectures = values.get("architectures") or ["XLNetModel"]
  theirs = architectures[0]
  ours = _OURS.get(theirs)
  if ours == "XLNetModel":
    return None
  if ours is None:
    return StoredHead(None, {}, path, f"transformers' {theirs} ({path})")
  id2label = values.get("id2label") or {}
  count = len(id2label) or values.get("num_labels", 2)
  arguments, labels = {}, None
  if ours in ("XLNetClassifier", "XLNetMultipleChoice"):
    arguments["summary_type"] = values.get("summary_type", "last")
  if ours == "XLNetClassifier":
    arguments["num_classes"] = count
    if values.get("problem_type") == "multi_label_classification":
      arguments["multi_label"] = True
  elif ours == "XLNetTokenClassifier":
    arguments["num_labels"] = count
  elif ours == "XLNetQuestionAnswering":
    arguments.update(start_n_top=values.get("start_n_top", 5),
                     end_n_top=values.get("end_n_top", 5))
  if id2label and ours in ("XLNetClassifier", "XLNetTokenClassifier"):
    try:
      labels = [str(id2label[str(index)]) for index in range(count)]
    except KeyError:
      raise UserInputError(f"{path}: id2label must map 0..{count - 1}; got "
                           f"{sorted(id2label)}") from None
  return StoredHead(ours, arguments, path, f"transformers' {theirs} ({path})", labels)


def load_backbone(model, place: Pretrained):
  """The backbone's weights into `model` (an XLNetModel), from a directory holding a
  backbone or any head; strict (a missing or misshaped weight: CheckpointMismatchError).
  Returns the reader's LoadReport (None for the own format)."""
  if place.layout == OWN:
    return own.load_own_backbone(model, place.directory)
  return load_head(model, place)  # the readers set other heads' weights aside by name


def load_head(model_or_head, place: Pretrained):
  """All of `model_or_head`'s weights, its head's included; strict. Returns the reader's
  LoadReport (None for the own format)."""
  if place.layout == OWN:
    return own.load_own_checkpoint(model_or_head, place.directory)
  if place.layout == HUGGINGFACE:
    return load_huggingface_checkpoint(model_or_head, place.directory)
  # the prefix given, or the directory (its latest checkpoint: resolve_prefix reads both)
  return load_original_checkpoint(model_or_head, checkpoint_path(place))


def stored_tokenizer(place: Pretrained, config: XLNetConfig) -> Optional[XLNetTokenizer]:
  """The directory's tokenizer (None without spiece.model), checked to fit the model's
  vocabulary."""
  tokenizer = saved_tokenizer(place.directory)
  if tokenizer is not None:
    check_vocabulary(tokenizer, config, place.name)
  elif file_system.exists(os.path.join(place.directory, FAST_TOKENIZER_FILE)):
    logging.warning("%s: holds transformers' %s but no %s (transformers 5 saves only the "
                    "former): the model takes token ids, not text; copy the model's %s beside "
                    "it (its hub repository has it) to read text", place.name,
                    FAST_TOKENIZER_FILE, SENTENCEPIECE_FILE, SENTENCEPIECE_FILE)
  return tokenizer


def stored_preprocessor(place: Pretrained, tokenizer: Optional[XLNetTokenizer]
                        ) -> Optional[XLNetPreprocessor]:
  """The preprocessor the directory's preprocessor.json describes, over its `tokenizer`; None
  without either."""
  return None if tokenizer is None else saved_preprocessor(place.directory, tokenizer)
