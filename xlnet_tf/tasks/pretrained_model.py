"""What a fine-tuning run starts from: the pretrained model its options name (ModelSource: the
fine-tuning commands' --init_checkpoint, --init_checkpoint_format, --model_config, --sp_path
and --uncased), resolved into a PretrainedModel (the backbone's config, the weights to load,
the tokenizer), and the backbone built from it.

--init_checkpoint alone is enough: a directory in any layout the library reads, a TF1
checkpoint prefix or a hub id (checkpoints.pretrained.locate, the rule from_pretrained follows)
gives the config, the format and the tokenizer. The other four override them and may not
contradict it; a contradiction is one UserInputError line naming both (the messages name the
commands' flags, as FinetuningOptions' checks do).
"""

import dataclasses
import os
from typing import Optional

from absl import logging

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.freezing import check_frozen_layers
from xlnet_tf.tasks.finetuning import load_pretrained_weights
from xlnet_tf.text.tokenizer import (TOKENIZER_CONFIG_FILE, XLNetTokenizer, check_vocabulary,
                                     saved_tokenizer)
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class ModelSource:
  """Where the backbone comes from, as a run names it (PretrainedModel.from_source reads it).

  Attributes:
    init_checkpoint: the pretrained model (a directory of any layout, a TF1 checkpoint prefix
      or a hub id); None: a backbone of `model_config` with fresh weights.
    init_checkpoint_format: own, original or huggingface; None: what its files are (given, it
      must say the same).
    model_config: an xlnet_config.json (original keys accepted); None: init_checkpoint's.
    sp_path: the SentencePiece model; None: init_checkpoint's spiece.model.
    uncased: lower-case the text; None: as init_checkpoint's tokenizer_config.json says (off
      with `sp_path`).
  """
  init_checkpoint: Optional[str] = None
  init_checkpoint_format: Optional[str] = None
  model_config: Optional[str] = None
  sp_path: Optional[str] = None
  uncased: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class PretrainedModel:
  """What a run starts from.

  Attributes:
    config: the backbone's config.
    config_source: the file or flag it came from (for messages).
    checkpoint: the weights to load (None: fresh weights).
    checkpoint_format: their format (own, original or huggingface).
    tokenizer: the tokenizer the run reads text with.
  """
  config: XLNetConfig
  config_source: str
  checkpoint: Optional[str]
  checkpoint_format: str
  tokenizer: XLNetTokenizer

  @classmethod
  def from_source(cls, source: ModelSource) -> "PretrainedModel":
    """The model `source` describes, checked (see the module docstring).

    Args:
      source: the ModelSource.

    Returns:
      The PretrainedModel; its tokenizer is checked to fit the config's vocabulary.

    Raises:
      UserInputError: for a model no run can start from, or overrides that contradict it.
    """
    place = pretrained.locate(source.init_checkpoint) if source.init_checkpoint else None
    if place is None:
      checkpoint_format = source.init_checkpoint_format or pretrained.OWN
    else:
      checkpoint_format = place.layout
      if source.init_checkpoint_format not in (None, place.layout):
        raise UserInputError(f"--init_checkpoint_format={source.init_checkpoint_format} "
                             f"contradicts --init_checkpoint={place.name}: it holds "
                             f"{place.layout} files")
    config, config_source = _config(place, source.model_config)
    tokenizer = source_tokenizer(place, source.sp_path, source.uncased)
    check_vocabulary(tokenizer, config, config_source)
    checkpoint = place and pretrained.checkpoint_path(place)
    return cls(config, config_source, checkpoint, checkpoint_format, tokenizer)


def _config(place: Optional[pretrained.Pretrained], model_config: Optional[str]):
  """(config, where it comes from): `model_config`, checked against the directory's
  architecture, or the directory's."""
  stored = stored_source = None
  if place is not None and pretrained.stores_config(place):
    stored, stored_source = pretrained.stored_config(place, {}), f"--init_checkpoint={place.name}"
  if not model_config:
    if stored is None:
      raise UserInputError("--model_config is required without an --init_checkpoint "
                           "directory that stores the config (xlnet_config.json or config.json)")
    return stored, stored_source
  config = XLNetConfig.from_json_file(model_config)
  if stored is not None:
    differing = [f"{key} {getattr(config, key)} against {getattr(stored, key)}"
                 for key in ARCHITECTURE_KEYS if getattr(config, key) != getattr(stored, key)]
    if differing:
      raise UserInputError(f"--model_config={model_config} contradicts {stored_source}'s "
                           f"architecture: {', '.join(differing)}")
  return config, model_config


def source_tokenizer(place: Optional[pretrained.Pretrained], sp_path: Optional[str],
                     uncased: Optional[bool], model_flag: str = "init_checkpoint",
                     default_sp_path: Optional[str] = None) -> XLNetTokenizer:
  """`sp_path` (lower-cased with `uncased`), or the directory's spiece.model with its
  tokenizer_config.json (`uncased` given overriding it, unless the file says otherwise);
  `default_sp_path` where the directory holds none. `model_flag` names the directory in
  messages."""
  stored = None if sp_path or place is None else saved_tokenizer(place.directory)
  if stored is None:
    sp_path = sp_path or default_sp_path
    if not sp_path:
      raise UserInputError("--sp_path is required" + (
          f": --{model_flag}={place.name} holds no spiece.model" if place else ""))
    return XLNetTokenizer(sp_path, lower=bool(uncased))
  settings_file = os.path.join(place.directory, TOKENIZER_CONFIG_FILE)
  if uncased is not None and uncased != stored.lower:
    if files.exists(settings_file):
      raise UserInputError(
          f"--{'' if uncased else 'no'}uncased contradicts {settings_file} (of "
          f"--{model_flag}={place.name}): do_lower_case is {str(stored.lower).lower()}")
    return saved_tokenizer(place.directory, lower=uncased)
  return stored


def check_freezing(freeze_layers: Optional[int], config: XLNetConfig) -> None:
  """--freeze_layers N: from 0 to the model's n_layer (None: train everything)."""
  if freeze_layers is not None:
    check_frozen_layers(freeze_layers, config.n_layer, "--freeze_layers")


def backbone_from(config: XLNetConfig, checkpoint: Optional[str] = None,
                  checkpoint_format: str = pretrained.OWN) -> XLNetModel:
  """An XLNetModel of `config`, its weights loaded from `checkpoint` (of `checkpoint_format`:
  finetuning.load_pretrained_weights) when given; the loader's summary is logged (INFO)."""
  backbone = XLNetModel(config)
  if checkpoint:
    report = load_pretrained_weights(backbone, checkpoint, checkpoint_format)
    logging.info("Backbone from %s%s", checkpoint,
                 "" if report is None else f": {report.summary()}")
  return backbone


def pretrained_backbone(config: XLNetConfig, model: PretrainedModel, recompute: bool = False,
                        freeze_layers: Optional[int] = None) -> XLNetModel:
  """An XLNetModel of `config`, loaded from `model`'s checkpoint when there is one, recomputing
  its blocks in the backward pass with `recompute`, and with `freeze_layers` (the embedding and
  the first N blocks) not trained; before the optimizer is built."""
  backbone = backbone_from(config, model.checkpoint, model.checkpoint_format)
  backbone.recompute_blocks = recompute
  if freeze_layers is not None:
    backbone.freeze_layers(freeze_layers)
  return backbone
