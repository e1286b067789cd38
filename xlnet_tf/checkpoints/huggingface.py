"""Hugging Face XLNet directories: `config.json` + `model.safetensors`, `pytorch_model.bin` or
`tf_model.h5`, read without torch or TF's Keras (NumPy, a weights-only unpickler, h5py).

The TF file's names are turned into HF's PyTorch names, and those into the original TF1
names, so loading shares one strict check with `load_original_checkpoint`. HF keeps every
attention bias per layer; a model with `untie_r=False` takes them only when all layers hold the
same values.
"""

import dataclasses
import os
import re
from typing import Dict, List, Optional, Tuple

from absl import logging
import numpy as np

from xlnet_tf.utils import files as file_system
from xlnet_tf.utils.errors import UserInputError, is_int
from xlnet_tf.checkpoints.assign import (CheckpointMismatchError, LoadReport,
                                         assign_by_original_name)
from xlnet_tf.checkpoints.keras_h5_io import read_keras_h5_weights
from xlnet_tf.checkpoints.naming import BACKBONE_SCOPE, backbone_of, original_variable_map
from xlnet_tf.checkpoints.pytorch_bin_io import read_pytorch_bin
from xlnet_tf.checkpoints.safetensors_io import read_safetensors
from xlnet_tf.config import XLNetConfig
from xlnet_tf.utils.json_files import read_json_object

# A Hugging Face directory computes as transformers computes it: its "gelu" is the erf form
# (gelu_exact here), "gelu_new" and "gelu_pytorch_tanh" the tanh approximation (the original's
# gelu, "gelu" here). An explicit ff_activation passed to from_pretrained chooses otherwise.
_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "relu": "relu"}

_LAYER_NAME = re.compile(r"^layer\.(\d+)\.(.+)$")
_PER_LAYER = {  # HF name inside layer.{i}. -> (original name inside layer_{i}/, transpose)
    "rel_attn.q": ("rel_attn/q/kernel", False),
    "rel_attn.k": ("rel_attn/k/kernel", False),
    "rel_attn.v": ("rel_attn/v/kernel", False),
    "rel_attn.r": ("rel_attn/r/kernel", False),
    "rel_attn.o": ("rel_attn/o/kernel", False),
    "rel_attn.layer_norm.weight": ("rel_attn/LayerNorm/gamma", False),
    "rel_attn.layer_norm.bias": ("rel_attn/LayerNorm/beta", False),
    "ff.layer_1.weight": ("ff/layer_1/kernel", True),  # torch Linear keeps [out, in]
    "ff.layer_1.bias": ("ff/layer_1/bias", False),
    "ff.layer_2.weight": ("ff/layer_2/kernel", True),
    "ff.layer_2.bias": ("ff/layer_2/bias", False),
    "ff.layer_norm.weight": ("ff/LayerNorm/gamma", False),
    "ff.layer_norm.bias": ("ff/LayerNorm/beta", False),
}
# Per layer in HF, stacked here on a first [L] axis (the three biases: one copy when untie_r is
# False).
STACKED_PER_LAYER = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")
_HEAD_PREFIXES = ("sequence_summary.", "logits_proj.", "qa_outputs.", "start_logits.",
                  "end_logits.", "answer_class.", "classifier.")

def config_from_huggingface(values: Dict, source: str = "config.json", **overrides) -> XLNetConfig:
  """XLNetConfig from the fields of a Hugging Face XLNetConfig (its config.json).

  The sizes (vocab_size n_layer d_model n_head d_inner) must be there; a field transformers
  itself defaults when config.json lacks it (d_head = d_model / n_head, ff_activation, untie_r,
  ...) takes that default, so the model is the one transformers would build. Its "gelu" is the
  erf form ("gelu_exact" here), "gelu_new" and "gelu_pytorch_tanh" the original's tanh
  approximation ("gelu" here); a null mem_len or reuse_len is 0; its dropout sets dropout and
  dropatt, initializer_range init_std.

  Args:
    values: the fields of config.json.
    source: where they come from (its path), for the messages.
    **overrides: XLNetConfig fields replacing the converted ones (an ff_activation given
      here is taken instead of the file's).

  Returns:
    The XLNetConfig.

  Raises:
    UserInputError: naming `source`, for a missing size, an unknown ff_activation or an
      invalid field.
  """
  try:
    n_head, d_model = values["n_head"], values["d_model"]
    activation = overrides.get("ff_activation")  # the caller's choice, else the file's
    if activation is None:
      named = values.get("ff_activation", "gelu")
      if not isinstance(named, str) or named not in _ACTIVATIONS:
        raise UserInputError(f"{source}: ff_activation {named!r} is not one of "
                             f"{sorted(_ACTIVATIONS)}")
      activation = _ACTIVATIONS[named]
    # transformers' default d_head, when both sizes are sizes (else XLNetConfig names the
    # one that is not).
    sizes = is_int(n_head) and is_int(d_model) and n_head > 0
    converted = dict(
        n_token=values["vocab_size"], n_layer=values["n_layer"], d_model=d_model,
        n_head=n_head, d_head=values.get("d_head", d_model // n_head if sizes else 1),
        d_inner=values["d_inner"], ff_activation=activation,
        untie_r=values.get("untie_r", True), attn_type=values.get("attn_type", "bi"),
        bi_data=values.get("bi_data", False), clamp_len=values.get("clamp_len", -1),
        same_length=values.get("same_length", False), mem_len=_none_as_zero(values, "mem_len"),
        reuse_len=_none_as_zero(values, "reuse_len"), dropout=values.get("dropout", 0.1),
        dropatt=values.get("dropout", 0.1), init_std=values.get("initializer_range", 0.02))
  except KeyError as error:
    raise UserInputError(f"{source}: missing the Hugging Face XLNet field {error}") from None
  return XLNetConfig.from_dict(converted, source=source, **overrides)


def _none_as_zero(values: Dict, key: str):
  """values[key], 0 when missing or null (transformers writes `"mem_len": null` for none); any
  other value as it is, for XLNetConfig to check (`false` or `""` is not a length)."""
  value = values.get(key)
  return 0 if value is None else value


def pytorch_name_of_tf_weight(tf_name: str) -> Tuple[str, bool]:
  """(HF PyTorch name, transpose) of a HF TF variable name without the model's name.

  `transformer/layer_._0/ff/layer_1/kernel:0` -> (`transformer.layer.0.ff.layer_1.weight`,
  True): Keras Dense kernels are [in, out], torch Linear weights [out, in]; LayerNorm
  gamma/beta are weight/bias; an Embedding's `embeddings` (newer HF) or `weight` is `weight`.
  """
  parts = re.sub(r":\d+$", "", tf_name).replace("_._", "/").split("/")
  last = parts[-1]
  parts[-1] = {"kernel": "weight", "gamma": "weight", "beta": "bias",
               "embeddings": "weight"}.get(last, last)
  return ".".join(parts), last == "kernel"


def pytorch_names(tensors: Dict[str, np.ndarray], source: str
                  ) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
  """({HF PyTorch name: array}, {HF PyTorch name: the name in the file, where it differs}).

  HF's TF models save under TF names (`a/b/kernel:0`, never in a PyTorch name): in tf_model.h5,
  and in the model.safetensors they write with safe_serialization=True.
  """
  converted, file_names = {}, {}
  for file_name, value in tensors.items():
    if "/" in file_name:
      name, transpose = pytorch_name_of_tf_weight(file_name)
    else:
      name, transpose = file_name, False
    if name in converted:
      raise CheckpointMismatchError(f"{source}: {file_names.get(name, name)} and {file_name} are "
                                    f"the same weight ({name})")
    converted[name] = value.T if transpose and value.ndim == 2 else value
    if name != file_name:
      file_names[name] = file_name
  return converted, file_names


# {suffix: reader giving {name in the file: array}}; a shard (model-00001-of-00002.safetensors)
# has its format's suffix.
READERS = {".safetensors": read_safetensors, ".bin": read_pytorch_bin,
           ".h5": read_keras_h5_weights}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5")  # the preferred first


@dataclasses.dataclass
class HuggingfaceWeights:
  tensors: Dict[str, np.ndarray]  # HF PyTorch name -> array
  file_names: Dict[str, str]      # HF PyTorch name -> name in the file, where it differs
  source: str                     # the file read (or the shard index), for messages


def huggingface_weight_files(path: str) -> Tuple[List[str], str]:
  """(files to read, the one file or shard index they come from) of a directory or a file."""
  if file_system.isfile(path):
    return [path], path
  found = []
  for file_name in WEIGHT_FILES:
    single = os.path.join(path, file_name)
    shard_index = single + ".index.json"
    if file_system.exists(single):
      found.append(([single], single))
    elif file_system.exists(shard_index):
      found.append((shard_files(path, shard_index, file_name), shard_index))
  if not found:
    raise FileNotFoundError(f"{path}: none of {list(WEIGHT_FILES)} (or a sharded index of one) "
                            "found")
  if len(found) > 1:
    logging.info("%s: reading %s; also present, not read: %s", path, found[0][1],
                 ", ".join(source for _, source in found[1:]))
  return found[0]


def shard_files(directory: str, index_path: str, weights_file_name: str) -> List[str]:
  """The shard files a sharded-weights index (`model.safetensors.index.json`) names in its
  weight_map {tensor name: shard file name}, each checked before any is read.

  Raises UserInputError naming the index (and the entry) when it holds no weight_map object of
  file names, a name leads outside `directory` (an absolute path, `..`, a symbolic link
  pointing out: utils.files.confined), a shard is not of the index's format, or a shard is not
  there.
  """
  index = read_json_object(index_path, expected="a sharded-weights index {weight_map: ...}")
  weight_map = index.get("weight_map")
  if not isinstance(weight_map, dict) or not weight_map:
    raise UserInputError(f"{index_path}: no 'weight_map' object naming the shards; not a "
                         "sharded-weights index")
  suffix = os.path.splitext(weights_file_name)[1]
  shards = {}  # shard file name -> its path, in the order the index names them
  for tensor, shard in weight_map.items():
    if not isinstance(shard, str):
      raise UserInputError(f"{index_path}: weight_map entry {tensor!r} is {shard!r}, not a "
                           "shard file name")
    if shard in shards:
      continue
    shard_path = file_system.confined(directory, shard, index_path)
    if not shard.endswith(suffix):
      raise UserInputError(f"{index_path}: weight_map entry {tensor!r} names {shard!r}, not a "
                           f"{suffix} shard of {weights_file_name}")
    if not file_system.isfile(shard_path):
      raise UserInputError(f"{index_path}: names the shard {shard!r}, which is not in "
                           f"{directory}; download the missing shard")
    shards[shard] = shard_path
  return [shards[shard] for shard in sorted(shards)]


def read_huggingface_weights(path: str) -> HuggingfaceWeights:
  """The tensors of a Hugging Face directory (or one weights file), under HF PyTorch names."""
  files, source = huggingface_weight_files(path)
  suffix = os.path.splitext(files[0])[1]
  if suffix not in READERS:
    raise UserInputError(f"{files[0]}: not one of {sorted(READERS)}; pass a Hugging Face "
                         "directory or its weights file")
  tensors, read_from = {}, {}
  for file in files:
    if suffix == ".h5":
      with file_system.local_copy(file) as local_file:  # h5py reads local files only
        shard = READERS[suffix](local_file)
    else:  # through utils.files, on any file system
      shard = READERS[suffix](file)
    # Two shards holding one name would leave whichever is read last, silently.
    for name in shard:
      if name in read_from:
        raise UserInputError(f"{source}: {name} is in two shards, {read_from[name]} and {file}")
      read_from[name] = file
    tensors.update(shard)
  return HuggingfaceWeights(*pytorch_names(tensors, source), source)


def huggingface_config_path(path: str) -> str:
  """config.json in the directory, or beside the weights file."""
  return os.path.join(os.path.dirname(path) if file_system.isfile(path) else path, "config.json")


def read_huggingface_config(path: str) -> Dict:
  """The config.json values beside the weights ({} when there is none)."""
  config_path = huggingface_config_path(path)
  if not file_system.exists(config_path):
    return {}
  return read_json_object(config_path)


def huggingface_to_original(tensors: Dict[str, np.ndarray], n_layer: int, untie_r: bool,
                            source: str, head_names=None,
                            file_names: Optional[Dict[str, str]] = None):
  """Renames HF tensors to original names. Returns (arrays, aliases, skipped).

  head_names: {HF name: (original name, transpose)} of the target head's own weights.
  file_names: {HF name: the name in the file} where they differ (tf_model.h5), for messages.
  """
  head_names, file_names = head_names or {}, file_names or {}
  arrays, aliases, skipped, problems = {}, {}, {}, []
  stacked = {name: {} for name in STACKED_PER_LAYER}
  word_embedding = None
  for hf_name, value in tensors.items():
    shown = file_names.get(hf_name, hf_name)
    name = hf_name[len("transformer."):] if hf_name.startswith("transformer.") else hf_name
    match = _LAYER_NAME.match(name)
    if name == "word_embedding.weight":
      original = BACKBONE_SCOPE + "word_embedding/lookup_table"
      arrays[original], aliases[original] = value, shown
      word_embedding = value
    elif name == "mask_emb":
      original = BACKBONE_SCOPE + "mask_emb/mask_emb"
      arrays[original], aliases[original] = value, shown
    elif match and match.group(2) in _PER_LAYER:
      inner, transpose = _PER_LAYER[match.group(2)]
      original = f"{BACKBONE_SCOPE}layer_{match.group(1)}/{inner}"
      arrays[original], aliases[original] = (value.T if transpose else value), shown
    elif match and match.group(2).startswith("rel_attn.") and \
        match.group(2)[len("rel_attn."):] in STACKED_PER_LAYER:
      stacked[match.group(2)[len("rel_attn."):]][int(match.group(1))] = (shown, value)
    elif name in head_names:
      original, transpose = head_names[name]
      arrays[original], aliases[original] = (value.T if transpose else value), shown
    elif name == "lm_loss.bias":
      arrays["model/lm_loss/bias"], aliases["model/lm_loss/bias"] = value, shown
    elif name == "lm_loss.weight":
      skipped[shown] = "the output layer, tied to word_embedding"
    elif name.startswith(_HEAD_PREFIXES):
      skipped[shown] = "weights of a task head this model does not have"
    else:
      problems.append(f"unexpected: {shown}, shape {list(value.shape)}")
  output_weight = tensors.get("lm_loss.weight")
  if output_weight is not None and word_embedding is not None and \
      not np.array_equal(output_weight, word_embedding):
    problems.append("lm_loss.weight differs from word_embedding.weight: XLNet ties them, an "
                    "untied output layer is not supported")
  _stack_per_layer_biases(stacked, n_layer, untie_r, arrays, aliases, problems)
  if problems:
    raise CheckpointMismatchError(f"{source}: ({len(problems)} problem(s)); nothing was "
                                  "loaded:\n  " + "\n  ".join(problems))
  return arrays, aliases, skipped


def _stack_per_layer_biases(stacked, n_layer: int, untie_r: bool, arrays, aliases, problems):
  """HF keeps r_w_bias, r_r_bias, r_s_bias and seg_embed per layer; the original stacks them
  ([n_layer, ...]), or keeps one copy when tied (untie_r=False): checked to be equal."""
  for bias, per_layer in stacked.items():
    if not per_layer:
      continue
    missing = [i for i in range(n_layer) if i not in per_layer]
    if missing:
      problems.extend(f"missing: layer.{i}.rel_attn.{bias}" for i in missing)
      continue
    extra = sorted(i for i in per_layer if i >= n_layer)
    problems.extend(f"unexpected: {per_layer[i][0]} (model has n_layer={n_layer})" for i in extra)
    # Stacked, layers of other shapes would fail and other dtypes would be widened to one (an
    # int32 layer among float32 ones into float64, past the dtype check of the assignment).
    first_name, first = per_layer[0]
    unlike = [(name, value) for name, value in (per_layer[i] for i in range(1, n_layer))
              if value.shape != first.shape or value.dtype != first.dtype]
    if unlike:
      problems.extend(f"unlike layer 0: {name}: {value.dtype} {list(value.shape)}, "
                      f"{first_name}: {first.dtype} {list(first.shape)}"
                      for name, value in unlike)
      continue
    values = np.stack([per_layer[i][1] for i in range(n_layer)])
    original = BACKBONE_SCOPE + bias
    aliases[original] = f"transformer.layer.*.rel_attn.{bias}"
    if bias == "seg_embed" or untie_r:
      arrays[original] = values
    elif all(np.array_equal(values[0], layer) for layer in values[1:]):
      arrays[original] = values[0]
    else:
      problems.append(f"{aliases[original]}: differs across layers but the model ties it "
                      "(untie_r=False); set untie_r=True")


def huggingface_weight_name(original: str) -> Optional[Tuple[str, bool]]:
  """(HF name, transpose) of an original backbone or LM-head name that HF keeps as one tensor;
  None for the stacked attention biases (HF keeps them per layer) and for task heads' names
  (each head's `huggingface_head_names()`)."""
  inner = original[len(BACKBONE_SCOPE):] if original.startswith(BACKBONE_SCOPE) else original
  fixed = {"word_embedding/lookup_table": "transformer.word_embedding.weight",
           "mask_emb/mask_emb": "transformer.mask_emb", "model/lm_loss/bias": "lm_loss.bias"}
  if inner in fixed:
    return fixed[inner], False
  layer, _, rest = inner.partition("/")
  for hf_inner, (original_inner, transpose) in _PER_LAYER.items():
    if rest == original_inner and layer.startswith("layer_"):
      return f"transformer.layer.{layer[len('layer_'):]}.{hf_inner}", transpose
  return None


def huggingface_name_of(original: str) -> str:
  """The HF name an original name is read from (for messages about missing weights)."""
  inner = original[len(BACKBONE_SCOPE):] if original.startswith(BACKBONE_SCOPE) else original
  if inner in STACKED_PER_LAYER:
    return f"transformer.layer.*.rel_attn.{inner}"
  named = huggingface_weight_name(original)
  return named[0] if named else original


def load_huggingface_checkpoint(model_or_head, path: str) -> LoadReport:
  """Loads a Hugging Face XLNet directory (or one weights file) into an XLNetModel or head.

  The directory holds config.json and model.safetensors, pytorch_model.bin or tf_model.h5
  (or a sharded index of one); when several are there, the first of these is read, and the
  report's `source` names the file read. The architecture in config.json must equal the
  model's; every weight must be present with its shape; nothing is assigned otherwise (see
  `assign_by_original_name`). Weights of a task head the model does not have are set aside,
  listed in the report.

  Args:
    model_or_head: the XLNetModel or head to load into (a head's own weights are read under
      its huggingface_head_names()). A quantized model is refused (AttributeError): the
      format holds float weights.
    path: the directory (config.json and the weights), or one weights file (config.json,
      when beside it, is checked too). Local or remote.

  Returns:
    The LoadReport of what was assigned and what was set aside.

  Raises:
    FileNotFoundError: when the directory holds none of the weight files.
    CheckpointMismatchError: when config.json's sizes or the weights do not match the model.
    UnsafeCheckpointError: for a pytorch_model.bin whose pickle names anything but tensor
      storages (nothing of it is run).
    UserInputError: for a damaged or inconsistent file (a bad shard index, ...).
  """
  hf_config = read_huggingface_config(path)
  weights = read_huggingface_weights(path)
  config = backbone_of(model_or_head).config
  if hf_config:
    theirs = config_from_huggingface(hf_config, source=huggingface_config_path(path))
    differences = [f"{key}: checkpoint {getattr(theirs, key)}, model {getattr(config, key)}"
                   for key in ("n_token", "n_layer", "d_model", "n_head", "d_head", "d_inner")
                   if getattr(theirs, key) != getattr(config, key)]
    if differences:
      raise CheckpointMismatchError(f"{path}: config.json does not match the model:\n  "
                                    + "\n  ".join(differences))
  head_names = (model_or_head.huggingface_head_names()
                if hasattr(model_or_head, "huggingface_head_names") else None)
  arrays, aliases, skipped = huggingface_to_original(
      weights.tensors, config.n_layer, config.untie_r, source=weights.source,
      head_names=head_names, file_names=weights.file_names)
  shapes = {name: value.shape for name, value in arrays.items()}
  aliases = {**{name: huggingface_name_of(name) for name in original_variable_map(model_or_head)},
             **aliases}
  return assign_by_original_name(model_or_head, shapes, arrays.__getitem__,
                                 source=weights.source, aliases=aliases, skipped=skipped)
