"""--init_checkpoint=DIR_OR_HUB_ID alone: the backbone's config, the checkpoint's format and the
tokenizer (spiece.model, lower-casing) come from the pretrained directory, in any layout that
XLNetModel.from_pretrained reads (own, Hugging Face, original; a hub id is fetched). The flags
--model_config, --init_checkpoint_format, --sp_path and --uncased remain as overrides; one that
contradicts the directory is a user error naming both.

The tools that start from a model under another flag (run/generate.py's --model_dir,
run/convert_checkpoint.py's --input and --input_format, ...) read it with the same functions
(`located`, `checked_format`, `tokenizer`, `checkpoint_path`, `stored_head`), naming their own
flags."""

import dataclasses
import os
from typing import Optional

from absl import flags

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.text.tokenizer import (TOKENIZER_CONFIG_FILE, XLNetTokenizer, check_vocabulary,
                                     saved_tokenizer)
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class PretrainedModel:
  """What a run starts from: the backbone's config (and the file or flag it came from), the
  weights to load (None: none) in their format, and the tokenizer."""
  config: XLNetConfig
  config_source: str
  checkpoint: Optional[str]
  checkpoint_format: str
  tokenizer: XLNetTokenizer


def located(name: str) -> pretrained.Pretrained:
  """The directory a model flag names (a path or a hub id) and its layout, by the library's
  rule (pretrained.locate_checkpoint): a TF1 checkpoint prefix, or a directory holding a TF1
  checkpoint without xlnet_config.json (its config given by a flag), stands for an original
  directory."""
  return pretrained.locate_checkpoint(name)


def checked_format(place: pretrained.Pretrained, model_flag: str = "init_checkpoint",
                   format_flag: str = "init_checkpoint_format") -> str:
  """The layout of `place`, the directory --`model_flag` names; --`format_flag`, when given,
  must say the same."""
  given = flags.FLAGS[format_flag]
  if given.present and given.value != place.layout:
    raise UserInputError(f"--{format_flag}={given.value} contradicts --{model_flag}="
                         f"{place.name}: it holds {place.layout} files")
  return place.layout


def checkpoint_path(place: pretrained.Pretrained) -> str:
  """What the loaders take for `place`: its directory, or (original) the TF1 checkpoint prefix
  given; a hub id is its cache's directory."""
  return place.name if files.exists(place.name + ".index") else place.directory


def stored_head(place: pretrained.Pretrained, head_class, model_flag: str,
                expected: Optional[str] = None, **arguments):
  """The `head_class` the directory --`model_flag` names holds, its head's weights loaded
  (from_pretrained, with `arguments`); a directory holding a backbone only or another head is
  a user error naming the flag and what was `expected` (default: the class)."""
  stored = pretrained.stored_head(place)
  if stored is None or stored.class_name != head_class.__name__:
    holds = "a backbone only" if stored is None else stored.described_as
    raise UserInputError(f"--{model_flag}={place.name} holds {holds}, not "
                         f"{expected or 'an ' + head_class.__name__}")
  return head_class.from_pretrained(place.directory, **arguments)


def _stored_config(place: Optional[pretrained.Pretrained], config_overrides):
  """(the directory's config, where it is written); (None, None) where it stores none (a
  checkpoint prefix without xlnet_config.json beside it)."""
  if place is None:
    return None, None
  try:
    return (pretrained.stored_config(place, config_overrides),
            f"--init_checkpoint={place.name}")
  except FileNotFoundError:
    if place.layout == pretrained.ORIGINAL:
      return None, None
    raise


def _config(place: Optional[pretrained.Pretrained], config_overrides):
  """--model_config, checked against the directory's architecture, or the directory's."""
  values = flags.FLAGS
  stored, stored_source = _stored_config(place, config_overrides)
  if not values.model_config:
    if stored is None:
      raise UserInputError("--model_config is required without an --init_checkpoint "
                           "directory that stores the config (xlnet_config.json or config.json)")
    return stored, stored_source
  config = XLNetConfig.from_json_file(values.model_config, **config_overrides)
  if stored is not None:
    differing = [f"{key} {getattr(config, key)} against {getattr(stored, key)}"
                 for key in ARCHITECTURE_KEYS if getattr(config, key) != getattr(stored, key)]
    if differing:
      raise UserInputError(f"--model_config={values.model_config} contradicts "
                           f"{stored_source}'s architecture: {', '.join(differing)}")
  return config, values.model_config


def tokenizer(place: Optional[pretrained.Pretrained], model_flag: str = "init_checkpoint",
              default_sp_path: Optional[str] = None) -> XLNetTokenizer:
  """--sp_path (with --uncased, where the tool has it), or the directory's spiece.model with its
  tokenizer_config.json (--uncased or --nouncased overriding it, unless the file says
  otherwise); `default_sp_path` where the directory holds none."""
  values = flags.FLAGS
  uncased = values["uncased"] if "uncased" in values else None
  stored = None if values.sp_path or place is None else saved_tokenizer(place.directory)
  if stored is None:
    sp_path = values.sp_path or default_sp_path
    if not sp_path:
      raise UserInputError("--sp_path is required" + (
          f": --{model_flag}={place.name} holds no spiece.model" if place else ""))
    return XLNetTokenizer(sp_path, lower=uncased is not None and uncased.value)
  settings_file = os.path.join(place.directory, TOKENIZER_CONFIG_FILE)
  if uncased is not None and uncased.present and uncased.value != stored.lower:
    if files.exists(settings_file):
      raise UserInputError(
          f"--{'' if uncased.value else 'no'}uncased contradicts {settings_file} (of "
          f"--{model_flag}={place.name}): do_lower_case is {str(stored.lower).lower()}")
    return saved_tokenizer(place.directory, lower=uncased.value)
  return stored


def pretrained_model(**config_overrides) -> PretrainedModel:
  """The model --init_checkpoint, --model_config, --init_checkpoint_format, --sp_path and
  --uncased describe; `config_overrides`: run-time options (dropout, ...). The tokenizer is
  checked to fit the config's vocabulary."""
  values = flags.FLAGS
  place = located(values.init_checkpoint) if values.init_checkpoint else None
  checkpoint_format = checked_format(place) if place else values.init_checkpoint_format
  config, config_source = _config(place, config_overrides)
  model_tokenizer = tokenizer(place)
  check_vocabulary(model_tokenizer, config, config_source)
  checkpoint = place and checkpoint_path(place)
  return PretrainedModel(config, config_source, checkpoint, checkpoint_format, model_tokenizer)
