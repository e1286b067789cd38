"""Conversion between the original TF1, Hugging Face and own checkpoint formats, verified.

Converting builds the model a checkpoint holds, whose classes stand on the floors above
(modeling, heads): the caller hands them in (`backbone_class`, `load_saved`: the command-line
tool passes xlnet_tf.XLNetModel and xlnet_tf.heads.registry.load_saved); the reload that
checks the output builds the model's own class again (type(model)). Input and output may be
remote (gs://..., any tf.io.gfile file system: utils.files): the output is written and checked
in a local folder, then copied into place whole (utils.whole_directories).

A backbone converts between all three. A head (an own-format directory with head.json, e.g. a
fine-tuning run's best weights) converts to own, original and, where transformers has the same
head, huggingface; its labels.json travels with it (into config.json's id2label for
huggingface), and so does the tokenizer of the input directory (spiece.model with its
settings): own and original outputs hold spiece.model + tokenizer_config.json (own also a
head's preprocessor.json), huggingface ones the files transformers' XLNetTokenizer and
AutoTokenizer load (huggingface_writer.save_huggingface_tokenizer).
"""

import os
from typing import Callable, Dict, Optional

import numpy as np

from xlnet_tf.checkpoints.huggingface import (config_from_huggingface,
                                              load_huggingface_checkpoint,
                                              read_huggingface_config)
from xlnet_tf.checkpoints.huggingface_writer import (HUGGINGFACE_CONFIG_FILE,
                                                     carried_tokenizer,
                                                     huggingface_architecture,
                                                     save_huggingface_checkpoint)
from xlnet_tf.checkpoints.labels import save_labels, saved_labels
from xlnet_tf.checkpoints import pretrained
from xlnet_tf.checkpoints.naming import backbone_of, original_variable_map
from xlnet_tf.checkpoints.original import (load_original_checkpoint, resolve_prefix,
                                           save_original_checkpoint)
from xlnet_tf.checkpoints.own import (CONFIG_FILE, check_replaceable, load_own_checkpoint,
                                      save_pretrained, stored_quantization)
from xlnet_tf.config import ARCHITECTURE_KEYS, XLNetConfig
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.whole_directories import staged_directory

INPUT_FORMATS = ("original", "huggingface", "own")
OUTPUT_FORMATS = ("own", "original", "huggingface")
ORIGINAL_CHECKPOINT_NAME = "xlnet_model.ckpt"
# The file a remote output gets last (utils.whole_directories): what a reader looks for first.
_LAST_FILES = {"own": CONFIG_FILE, "original": CONFIG_FILE,
               "huggingface": HUGGINGFACE_CONFIG_FILE}


def load_any(path: str, input_format: str, config_file: Optional[str] = None, *,
             backbone_class: Callable, load_saved: Callable):
  """(XLNetModel or head, load summary) from a checkpoint of any supported format.

  Args:
    path: the checkpoint: a directory; for the original format also a TF1 checkpoint prefix.
    input_format: one of INPUT_FORMATS.
    config_file: the original checkpoint's xlnet_config.json (default: beside it).
    backbone_class: the backbone's class (xlnet_tf.XLNetModel), built on the config of a
      Hugging Face or original checkpoint.
    load_saved: the model an own-format directory holds, a head by its head.json
      (xlnet_tf.heads.registry.load_saved).

  Returns:
    (the model, carrying the directory's tokenizer as `.tokenizer`, None without spiece.model;
    a line saying what was loaded).
  """
  if input_format == "own":
    return load_saved(path), f"Loaded {path} (xlnet_tf format)."
  if input_format == "huggingface":
    hf_config = read_huggingface_config(path)
    if not hf_config:
      raise FileNotFoundError(f"{path}: config.json is needed to build the model")
    config = config_from_huggingface(hf_config, source=path)
    _check_weight_count(path, pretrained.HUGGINGFACE, config, None)
    model = backbone_class(config)
    summary = load_huggingface_checkpoint(model, path).summary()
    model.tokenizer = _stored_tokenizer(path, path, pretrained.HUGGINGFACE, config)
    return model, summary
  if input_format == "original":
    prefix = resolve_prefix(path)
    config_file = config_file or os.path.join(os.path.dirname(prefix), CONFIG_FILE)
    if not files.exists(config_file):
      raise FileNotFoundError(f"{config_file}: the original xlnet_config.json is needed (pass "
                              "--config_file)")
    config = XLNetConfig.from_json_file(config_file)
    _check_weight_count(prefix, pretrained.ORIGINAL, config, config_file)
    model = backbone_class(config)
    summary = load_original_checkpoint(model, prefix).summary()
    model.tokenizer = _stored_tokenizer(path, os.path.dirname(prefix), pretrained.ORIGINAL,
                                        config)
    return model, summary
  raise ValueError(f"input_format must be one of {INPUT_FORMATS}; got {input_format!r}")


def _stored_tokenizer(path: str, directory: str, layout: str, config: XLNetConfig):
  """The tokenizer beside a checkpoint (spiece.model, tokenizer_config.json's settings),
  checked to fit its vocabulary; None without one."""
  if not files.isdir(directory):
    return None
  return pretrained.stored_tokenizer(pretrained.Pretrained(path, directory, layout), config)


def _check_weight_count(path: str, layout: str, config: XLNetConfig, config_file) -> None:
  """The config's sizes against the weights file's, before the model is built (a directory's
  or a file's: pretrained.check_weight_count)."""
  if layout == pretrained.ORIGINAL:  # `path`: the prefix
    place = pretrained.Pretrained(path, os.path.dirname(path), layout, prefix=path)
    pretrained.check_weight_count(place, config, source=config_file)
  elif files.isdir(path):
    pretrained.check_weight_count(pretrained.Pretrained(path, path, layout), config,
                                  source=config_file)


def verification_batch(config: XLNetConfig, seed: int = 0) -> Dict[str, np.ndarray]:
  """A fixed batch with padding and three segments, to compare models after conversion."""
  rng = np.random.default_rng(seed)
  batch, length = 2, 12
  ids = rng.integers(0, config.n_token, size=[batch, length]).astype(np.int32)
  segments = np.array([[0] * 5 + [1] * 6 + [2]] * batch, np.int32)
  mask = np.ones([batch, length], np.float32)
  mask[1, :3] = 0.0
  return {"input_ids": ids, "segment_ids": segments, "input_mask": mask}


def convert_checkpoint(input_path: str, input_format: str, output_dir: str,
                       output_format: str = "own", config_file: Optional[str] = None, *,
                       backbone_class: Callable, load_saved: Callable) -> str:
  """Converts, reloads the output to check it gives the same outputs, and only then places it
  at `output_dir`, whole (over an existing model directory: swapped in whole, no file of the
  old one left; a directory holding other files is refused): a failed conversion leaves
  nothing there. As run/convert_checkpoint.py calls it:

      convert_checkpoint("xlnet_cased_L-12_H-768_A-12", "original", "converted",
                         "huggingface", backbone_class=xlnet_tf.XLNetModel,
                         load_saved=xlnet_tf.heads.registry.load_saved)

  Args:
    input_path: the checkpoint (load_any): a directory, or a TF1 checkpoint prefix; local or
      remote.
    input_format: one of INPUT_FORMATS.
    output_dir: where the converted directory goes (local or remote).
    output_format: one of OUTPUT_FORMATS.
    config_file: the original checkpoint's xlnet_config.json (default: beside it).
    backbone_class: the backbone's class (xlnet_tf.XLNetModel).
    load_saved: what loads an own-format directory (xlnet_tf.heads.registry.load_saved).

  Returns:
    A report: what was loaded and written, and the max |difference| after the reload.
  """
  if output_format not in OUTPUT_FORMATS:
    raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}; got {output_format!r}")
  output_dir = files.absolute(output_dir)
  check_replaceable(output_dir)
  if input_format == "own" and stored_quantization(input_path):
    raise UserInputError(f"{input_path}: holds a model quantized to "
                         f"{stored_quantization(input_path)}: the checkpoint formats hold float "
                         "weights; convert the float model")
  model, load_summary = load_any(input_path, input_format, config_file,
                                 backbone_class=backbone_class, load_saved=load_saved)
  if output_format == "huggingface":
    huggingface_architecture(model)  # a head transformers has no class for: refused now
  labels = saved_labels(input_path) if input_format == "own" else None
  with staged_directory(output_dir, last=_LAST_FILES[output_format]) as staging:
    _write(model, staging, output_format, labels)
    difference = _difference_after_reload(model, staging, output_format)
    if difference != 0.0:
      raise RuntimeError(f"Conversion check failed: outputs differ by {difference} after reload")
  what = type(model).__name__
  if output_format == "huggingface":
    what += f" (transformers' {huggingface_architecture(model)})"
  if carried_tokenizer(model) is not None:
    what += (" with its tokenizer (spiece.model" + (", tokenizer_config.json and "
             "special_tokens_map.json for transformers' XLNetTokenizer"
             if output_format == "huggingface" else " and tokenizer_config.json") + ")")
  return (f"{load_summary}\nWrote {output_format} checkpoint of {what} to {output_dir}; "
          f"reloaded it: weights and outputs identical on a verification batch "
          f"(max |diff| = {difference}).")


def _write(model, directory: str, output_format: str, labels=None) -> None:
  if output_format == "huggingface":
    save_huggingface_checkpoint(model, directory, labels)
    return
  if output_format == "own":
    save_pretrained(model, directory)
  else:
    save_original_checkpoint(model, os.path.join(directory, ORIGINAL_CHECKPOINT_NAME))
    backbone_of(model).config.to_json_file(os.path.join(directory, CONFIG_FILE),
                                           original_keys_only=True)
    tokenizer = carried_tokenizer(model)
    if tokenizer is not None:  # spiece.model beside the checkpoint, as the original ships it
      tokenizer.save_pretrained(directory)
  if labels is not None:
    save_labels(directory, labels)


def _written_config(directory: str, output_format: str) -> XLNetConfig:
  """The XLNetConfig a converted `directory` states, read as from_pretrained reads it."""
  if output_format == "huggingface":
    return config_from_huggingface(read_huggingface_config(directory), source=directory)
  return XLNetConfig.from_json_file(os.path.join(directory, CONFIG_FILE))


_LOADERS = {"own": load_own_checkpoint, "huggingface": load_huggingface_checkpoint,
            "original": lambda model, directory: load_original_checkpoint(
                model, os.path.join(directory, ORIGINAL_CHECKPOINT_NAME))}


def _difference_after_reload(model, directory: str, output_format: str) -> float:
  """Max |difference| of the backbone's outputs on the verification batch and of every weight,
  between `model` and the same class built on its config and loaded from `directory` (the
  loaders check the written sizes). The config `directory` states must give the same
  architecture; its run-time options (bi_data, mem_len, ...) may differ, as the original and
  Hugging Face files hold few of them, so the outputs are compared under the model's own."""
  config = backbone_of(model).config
  written = _written_config(directory, output_format)
  differing = [f"{key} {getattr(written, key)!r}, not {getattr(config, key)!r}"
               for key in ARCHITECTURE_KEYS if getattr(written, key) != getattr(config, key)]
  if differing:
    raise RuntimeError(f"Conversion check failed: the written config says {', '.join(differing)}")
  backbone = type(backbone_of(model))(config)
  reloaded = backbone if model is backbone_of(model) else type(model)(backbone,
                                                                      **model.head_config())
  _LOADERS[output_format](reloaded, directory)
  batch = verification_batch(backbone_of(model).config)
  differences = [np.abs(backbone_of(model)(batch)["sequence_output"].numpy()
                        - backbone_of(reloaded)(batch)["sequence_output"].numpy())]
  theirs = original_variable_map(reloaded)
  differences += [np.abs(variable.numpy() - theirs[name].numpy())
                  for name, variable in original_variable_map(model).items()]
  return float(max(np.max(difference) for difference in differences))
