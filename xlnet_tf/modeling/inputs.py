"""The inputs XLNetModel takes: their names and the checks a call runs on them.

`checked_backbone_inputs` runs before any op of XLNetModel.call: ranks, dtypes, shapes that
agree with input_ids, the decoding keywords (memory_keys_values, position_keys), and the token
ids themselves when running eagerly. The checks read static shapes in Python (at trace time
under tf.function), so they add nothing to the graph. Errors name the input:
"XLNetModel: input 'perm_mask' must be of shape [B, T, T] = [2, 8, 8] to agree with input_ids;
got [2, 8, 5]".

The token-id checks (`check_token_ids`, `checked_token_ids`, `check_token_id`) are also what
decoding (xlnet_tf.inference) checks its arguments with.

Shapes: B batch, T sequence length, P predictions, M memory length, D d_model, N heads,
H head size, R relative positions.
"""

from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import is_int, require

# Every input XLNetModel takes. Heads and data pass their feature dicts through
# `backbone_inputs`, which keeps these keys.
BACKBONE_INPUTS = ("input_ids", "segment_ids", "input_mask", "perm_mask", "target_mapping",
                   "mems", "memory_mask")

# Other libraries' names of input_mask, with its polarity (1 = real token, 0 = padding):
# Hugging Face's and keras-hub's. (The original's and Hugging Face's own `input_mask` are the
# other way round, 1 = padding; here `input_mask` is 1 = real token.)
INPUT_MASK_SYNONYMS = ("attention_mask", "padding_mask")

# How each input's shape reads, for the messages (mems[i]: [B, M, D]).
_LAYOUTS = {"input_ids": "[B, T]", "segment_ids": "[B, T]", "input_mask": "[B, T]",
            "perm_mask": "[B, T, T]", "target_mapping": "[B, P, T]", "memory_mask": "[B, M]",
            "memory_keys_values": "[B, N, M, H]", "position_keys": "[1, N, R, H]"}


def backbone_inputs(features) -> Dict[str, Any]:
  """The entries of `features` that XLNetModel takes (labels, p_mask, targets... dropped), an
  attention_mask or padding_mask as input_mask (see `with_input_mask`)."""
  features = with_input_mask(features)
  return {key: features[key] for key in BACKBONE_INPUTS if key in features}


def with_input_mask(features) -> Dict[str, Any]:
  """`features` with its attention_mask or padding_mask (same polarity: 1 = real token) under
  the name input_mask; UserInputError when more than one of the three is given."""
  given = [key for key in ("input_mask",) + INPUT_MASK_SYNONYMS
           if features.get(key) is not None]
  require(len(given) <= 1, "XLNetModel: the padding mask",
          "given once, as input_mask, attention_mask or padding_mask (synonyms, each 1 = real "
          "token)", " and ".join(given))
  if not any(key in features for key in INPUT_MASK_SYNONYMS):
    return features
  renamed = {key: value for key, value in features.items() if key not in INPUT_MASK_SYNONYMS}
  if given:
    renamed["input_mask"] = features[given[0]]
  return renamed


def checked_backbone_inputs(config, inputs, memory_keys_values=None, position_keys=None
                            ) -> Dict[str, Any]:
  """`inputs` without None entries, as tensors, once ranks, dtypes and shapes agree (token ids
  too when running eagerly). `config` is the model's XLNetConfig."""
  if not isinstance(inputs, dict):  # a programming error, not a user's input
    raise TypeError("XLNetModel takes a dict of inputs with keys from "
                    f"{BACKBONE_INPUTS}; got {type(inputs).__name__}")
  inputs = with_input_mask(inputs)
  unknown = sorted(set(inputs) - set(BACKBONE_INPUTS))
  require(not unknown, "XLNetModel: the keys of inputs", f"among {BACKBONE_INPUTS}",
          f"unknown input(s) {unknown}")
  require("input_ids" in inputs, _input("input_ids"), "given (int [B, T])")
  inputs = {key: value for key, value in inputs.items() if value is not None}
  ids = tf.convert_to_tensor(inputs["input_ids"])
  require(ids.dtype.is_integer, _input("input_ids"), "an integer tensor",
          f"dtype {ids.dtype.name}")
  require(ids.shape.rank == 2, _input("input_ids"), "rank 2 [B, T]", f"shape {ids.shape}")
  batch, length = ids.shape
  expected = {"segment_ids": [batch, length], "input_mask": [batch, length],
              "perm_mask": [batch, length, length], "target_mapping": [batch, None, length]}
  for key, shape in expected.items():
    if key in inputs:
      inputs[key] = tf.convert_to_tensor(inputs[key])
      _check_shape(key, inputs[key], shape)
  if "segment_ids" in inputs:
    require(inputs["segment_ids"].dtype.is_integer, _input("segment_ids"), "an integer tensor",
            f"dtype {inputs['segment_ids'].dtype.name}")
  memory_length = 0
  if "mems" in inputs:
    inputs["mems"] = _checked_mems(config, inputs["mems"], batch)
    memory_length = inputs["mems"][0].shape[1]
  if memory_keys_values is not None or position_keys is not None:
    memory_length = _check_cache_projections(config, memory_keys_values, position_keys, inputs,
                                             batch, length)
  if "memory_mask" in inputs:
    require("mems" in inputs or memory_keys_values is not None, _input("memory_mask"),
            "given only with 'mems' or memory_keys_values (it masks their slots)")
    inputs["memory_mask"] = tf.convert_to_tensor(inputs["memory_mask"])
    _check_shape("memory_mask", inputs["memory_mask"], [batch, memory_length])
  if config.bi_data and batch is not None:
    require(batch % 2 == 0, _input("input_ids"),
            "an even batch size with bi_data (forward and backward halves)", batch)
  if tf.executing_eagerly():
    check_token_ids(ids.numpy(), config.n_token, _input("input_ids"))
  return inputs


def _checked_mems(config, mems, batch) -> List[tf.Tensor]:
  """The L memory tensors [B, M, D] as tensors, M the same in every layer."""
  require(isinstance(mems, (list, tuple)) and len(mems) == config.n_layer, _input("mems"),
          f"a list of n_layer={config.n_layer} tensors [B, M, {config.d_model}]",
          len(mems) if isinstance(mems, (list, tuple)) else type(mems).__name__)
  mems = [tf.convert_to_tensor(memory) for memory in mems]
  memory_length = mems[0].shape[1] if mems[0].shape.rank == 3 else None
  for index, memory in enumerate(mems):
    _check_shape(f"mems[{index}]", memory, [batch, memory_length, config.d_model])
  return mems


def _check_cache_projections(config, memory_keys_values, position_keys, inputs, batch, length):
  """Checks the call keywords memory_keys_values and position_keys; returns M."""
  memory_length = inputs["mems"][0].shape[1] if "mems" in inputs else 0
  if memory_keys_values is not None:
    require("mems" not in inputs, _input("mems"), "left out when memory_keys_values is given")
    require(isinstance(memory_keys_values, (list, tuple))
            and len(memory_keys_values) == config.n_layer, _input("memory_keys_values"),
            f"a list of n_layer={config.n_layer} (keys, values) pairs")
    memory_length = memory_keys_values[0][0].shape[2]
    for index, pair in enumerate(memory_keys_values):
      for tensor in pair:
        _check_shape(f"memory_keys_values[{index}]", tf.convert_to_tensor(tensor),
                       [batch, config.n_head, memory_length, config.d_head])
  if position_keys is not None:
    require(isinstance(position_keys, (list, tuple))
            and len(position_keys) == config.n_layer, _input("position_keys"),
            f"a list of n_layer={config.n_layer} tensors [1, N, R, H]")
    positions = None  # R = K + T ('bi') or K + 1 ('uni'), from the static lengths
    if length is not None and memory_length is not None:
      positions = memory_length + length + (length if config.attn_type == "bi" else 1)
    for index, tensor in enumerate(position_keys):
      _check_shape(f"position_keys[{index}]", tf.convert_to_tensor(tensor),
                     [None, config.n_head, positions, config.d_head])
  return memory_length


def check_token_ids(ids: np.ndarray, n_token: int, argument: str) -> None:
  """Names the first of the input_ids `ids` (integers) outside the vocabulary [0, n_token) in
  the UserInputError about `argument` (values: eager calls only, a graph has none)."""
  outside = (ids < 0) | (ids >= n_token)
  if outside.any():
    where = tuple(int(i) for i in np.argwhere(outside)[0])
    require(False, argument, f"token ids in [0, n_token={n_token})",
            f"input_ids{list(where)} = {ids[where]}, outside [0, {n_token})")


def checked_token_ids(input_ids, n_token: int, argument: str) -> np.ndarray:
  """int32 [B, T] of input_ids given to a library function (an array or an eager tensor):
  integers of shape [B, T], B, T >= 1, in [0, n_token); else UserInputError about `argument`."""
  ids = np.asarray(input_ids.numpy() if isinstance(input_ids, tf.Tensor) else input_ids)
  require(np.issubdtype(ids.dtype, np.integer), argument, "an integer array [B, T]",
          f"dtype {ids.dtype}")
  require(ids.ndim == 2 and ids.shape[0] > 0 and ids.shape[1] > 0, argument,
          "of shape [B, T] with B, T >= 1", f"shape {list(ids.shape)}")
  check_token_ids(ids, n_token, argument)
  return ids.astype(np.int32)


def check_token_id(token_id, n_token: int, argument: str) -> None:
  """One token id given as a setting (a pad or mask id, a stop id): an integer in
  [0, n_token); else UserInputError about `argument`."""
  require(is_int(token_id) and 0 <= token_id < n_token, argument,
          f"a token id in [0, n_token={n_token})", token_id)


def _check_shape(name: str, tensor, expected: List[Optional[int]]) -> None:
  """`tensor` has len(expected) dimensions, each equal to the expected one where both are
  known (None: not known statically)."""
  actual = tensor.shape
  agrees = actual.rank == len(expected) and all(
      want is None or have is None or want == have for want, have in zip(expected, actual))
  layout = _LAYOUTS.get(name.split("[")[0], "[B, M, D]")
  require(agrees, _input(name),
          f"of shape {layout} = {[d if d is not None else '?' for d in expected]} "
          "to agree with input_ids", list(actual))


def _input(name: str) -> str:
  """How a message names the input `name`."""
  return f"XLNetModel: input '{name}'"
