"""Conversion between the original TF1, Hugging Face and own checkpoint formats, verified."""

import os
import shutil
import tempfile
from typing import Dict, Optional

import numpy as np

from xlnet_tf.checkpoints.huggingface import (config_from_huggingface, load_huggingface_checkpoint,
                                              read_huggingface_config)
from xlnet_tf.checkpoints.original import (load_original_checkpoint, resolve_prefix,
                                           save_original_checkpoint)
from xlnet_tf.checkpoints.own import CONFIG_FILE, load_pretrained, save_pretrained
from xlnet_tf.config import XLNetConfig

INPUT_FORMATS = ("original", "huggingface", "own")
OUTPUT_FORMATS = ("own", "original")
ORIGINAL_CHECKPOINT_NAME = "xlnet_model.ckpt"


def load_any(path: str, input_format: str, config_file: Optional[str] = None):
  """(XLNetModel, load summary) from a checkpoint of any supported format."""
  from xlnet_tf.model import XLNetModel
  if input_format == "own":
    return load_pretrained(path), f"Loaded {path} (xlnet_tf format)."
  if input_format == "huggingface":
    hf_config = read_huggingface_config(path)
    if not hf_config:
      raise FileNotFoundError(f"{path}: config.json is needed to build the model")
    model = XLNetModel(config_from_huggingface(hf_config, source=path))
    return model, load_huggingface_checkpoint(model, path).summary()
  if input_format == "original":
    prefix = resolve_prefix(path)
    config_file = config_file or os.path.join(os.path.dirname(prefix), CONFIG_FILE)
    if not os.path.exists(config_file):
      raise FileNotFoundError(f"{config_file}: the original xlnet_config.json is needed (pass "
                              "--config_file)")
    model = XLNetModel(XLNetConfig.from_json_file(config_file))
    return model, load_original_checkpoint(model, prefix).summary()
  raise ValueError(f"input_format must be one of {INPUT_FORMATS}; got {input_format!r}")


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
                       output_format: str = "own", config_file: Optional[str] = None) -> str:
  """Converts, reloads the output to check it gives the same outputs, and only then moves it to
  `output_dir`: a failed conversion leaves nothing there. Returns a report."""
  if output_format not in OUTPUT_FORMATS:
    raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}; got {output_format!r}")
  output_dir = os.path.abspath(output_dir)
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise NotADirectoryError(f"{output_dir}: exists and is not a directory")
  model, load_summary = load_any(input_path, input_format, config_file)
  parent = os.path.dirname(output_dir)
  os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.partial-", dir=parent)
  try:
    _write(model, staging, output_format)
    reloaded, _ = load_any(staging, output_format)
    batch = verification_batch(model.config)
    difference = float(np.max(np.abs(model(batch)["sequence_output"].numpy()
                                     - reloaded(batch)["sequence_output"].numpy())))
    if difference != 0.0:
      raise RuntimeError(f"Conversion check failed: outputs differ by {difference} after reload")
    _move_into(staging, output_dir)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return (f"{load_summary}\nWrote {output_format} checkpoint to {output_dir}; reloaded it: "
          f"outputs identical on a verification batch (max |diff| = {difference}).")


def _write(model, directory: str, output_format: str) -> None:
  if output_format == "own":
    save_pretrained(model, directory)
  else:
    save_original_checkpoint(model, os.path.join(directory, ORIGINAL_CHECKPOINT_NAME))
    model.config.to_json_file(os.path.join(directory, CONFIG_FILE), original_keys_only=True)


def _move_into(staging: str, output_dir: str) -> None:
  """The verified files to `output_dir`: the directory itself when it does not exist yet, else
  file by file, replacing same-named files (the files name each other relatively)."""
  if not os.path.exists(output_dir):
    os.rename(staging, output_dir)
    return
  for name in os.listdir(staging):
    os.replace(os.path.join(staging, name), os.path.join(output_dir, name))
