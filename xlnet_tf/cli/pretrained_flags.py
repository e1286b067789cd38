"""The model a tool's flag names (run/generate.py's --model_dir, run/export.py's,
run/convert_checkpoint.py's --input and --input_format, ...): a directory in any layout that
XLNetModel.from_pretrained reads (own, Hugging Face, original; a hub id is fetched), its
tokenizer (spiece.model, lower-casing) with it; --sp_path and --uncased remain as overrides,
and one that contradicts the directory is a user error naming both.

Which names are a model, and in which layout, is the library's one rule
(xlnet_tf.checkpoints.pretrained.locate, what from_pretrained reads): a directory, a TF1
checkpoint prefix (DIR/xlnet_model.ckpt, as the original scripts take it) or a hub id. Here the
flags are mapped to it and its answers to messages naming them (`located`, `checked_format`,
`tokenizer`, `stored_head`). The fine-tuning commands' --init_checkpoint follows the same rule
(xlnet_tf.tasks.pretrained_model)."""

import os
from typing import Optional

from absl import flags

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.text.tokenizer import TOKENIZER_CONFIG_FILE, XLNetTokenizer, saved_tokenizer
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError


def located(name: str) -> pretrained.Pretrained:
  """The model a flag names (a directory, a TF1 checkpoint prefix or a hub id) and its
  layout, by the library's rule: pretrained.locate, as from_pretrained reads it."""
  return pretrained.locate(name)


def checked_format(place: pretrained.Pretrained, model_flag: str = "init_checkpoint",
                   format_flag: str = "init_checkpoint_format") -> str:
  """The layout of `place`, the directory --`model_flag` names; --`format_flag`, when given,
  must say the same."""
  given = flags.FLAGS[format_flag]
  if given.present and given.value != place.layout:
    raise UserInputError(f"--{format_flag}={given.value} contradicts --{model_flag}="
                         f"{place.name}: it holds {place.layout} files")
  return place.layout


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
  return head_class.from_pretrained(pretrained.checkpoint_path(place), **arguments)


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
