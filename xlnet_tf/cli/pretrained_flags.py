"""--init_checkpoint=DIR_OR_HUB_ID alone: the backbone's config, the checkpoint's format and the
tokenizer (spiece.model, lower-casing) come from the pretrained directory, in any layout that
XLNetModel.from_pretrained reads (own, Hugging Face, original; a hub id is fetched). The flags
--model_config, --init_checkpoint_format, --sp_path and --uncased remain as overrides; one that
contradicts the directory is a user error naming both."""

import dataclasses
import os
from typing import Optional

from absl import flags

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.text.tokenizer import (TOKENIZER_CONFIG_FILE, XLNetTokenizer, check_vocabulary,
                                     saved_tokenizer)
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


def _located(name: str) -> pretrained.Pretrained:
  """--init_checkpoint's directory and layout; a TF1 checkpoint prefix (xlnet_model.ckpt, as
  the original scripts take it) stands for an original directory."""
  if not os.path.isdir(name) and os.path.exists(name + ".index"):
    return pretrained.Pretrained(name, os.path.dirname(name) or ".", pretrained.ORIGINAL)
  return pretrained.locate(name)


def _checked_format(place: pretrained.Pretrained) -> str:
  values = flags.FLAGS
  if values["init_checkpoint_format"].present and values.init_checkpoint_format != place.layout:
    raise UserInputError(f"--init_checkpoint_format={values.init_checkpoint_format} "
                         f"contradicts --init_checkpoint={place.name}: it holds "
                         f"{place.layout} files")
  return place.layout


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


def _tokenizer(place: Optional[pretrained.Pretrained]) -> XLNetTokenizer:
  """--sp_path (with --uncased), or the directory's spiece.model with its tokenizer_config.json
  (--uncased or --nouncased overriding it, unless the file says otherwise)."""
  values = flags.FLAGS
  stored = None if values.sp_path or place is None else saved_tokenizer(place.directory)
  if stored is None:
    if not values.sp_path:
      raise UserInputError("--sp_path is required" + (
          f": --init_checkpoint={place.name} holds no spiece.model" if place else ""))
    return XLNetTokenizer(values.sp_path, lower=values.uncased)
  settings_file = os.path.join(place.directory, TOKENIZER_CONFIG_FILE)
  if values["uncased"].present and values.uncased != stored.lower:
    if os.path.exists(settings_file):
      raise UserInputError(
          f"--{'' if values.uncased else 'no'}uncased contradicts {settings_file} (of "
          f"--init_checkpoint={place.name}): do_lower_case is {str(stored.lower).lower()}")
    return saved_tokenizer(place.directory, lower=values.uncased)
  return stored


def pretrained_model(**config_overrides) -> PretrainedModel:
  """The model --init_checkpoint, --model_config, --init_checkpoint_format, --sp_path and
  --uncased describe; `config_overrides`: run-time options (dropout, ...). The tokenizer is
  checked to fit the config's vocabulary."""
  values = flags.FLAGS
  place = _located(values.init_checkpoint) if values.init_checkpoint else None
  checkpoint_format = _checked_format(place) if place else values.init_checkpoint_format
  config, config_source = _config(place, config_overrides)
  tokenizer = _tokenizer(place)
  check_vocabulary(tokenizer, config, config_source)
  # The loaders take a directory or (original) a checkpoint prefix; a hub id is its cache.
  checkpoint = place and (place.name if os.path.exists(place.name + ".index")
                          else place.directory)
  return PretrainedModel(config, config_source, checkpoint, checkpoint_format, tokenizer)
