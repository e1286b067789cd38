"""A reader of Keras 2 HDF5 weight files (Hugging Face's `tf_model.h5`), with h5py only.

Keras 2 `save_weights(...h5)` writes the root attribute `layer_names` (the model's top-level
layers) and, per layer, a group whose attribute `weight_names` lists the full variable names,
e.g. `tfxl_net_lm_head_model/transformer/layer_._0/rel_attn/q:0`, each a dataset at that path
inside the group. The first component is the model's Keras name, which depends on the class
that saved it, so it is dropped (as Hugging Face's own loader does). A layer holding another
layer's weight (HF's `lm_loss` keeps the word embedding it is tied to) lists it again.

Hugging Face's sharded files (`tf_model-0000k-of-0000n.h5`) instead list the already shortened
names in the root `layer_names`, each a dataset at that path.
"""

import os
from typing import Dict, List, Optional

import numpy as np

from xlnet_tf.utils.errors import UserInputError


def _string_list_attribute(node, name: str) -> List[str]:
  """An attribute of names; Keras splits long ones into name0, name1, ... (64 KB header limit)."""
  if name in node.attrs:
    values = list(node.attrs[name])
  else:
    values, chunk = [], 0
    while f"{name}{chunk}" in node.attrs:
      values.extend(node.attrs[f"{name}{chunk}"])
      chunk += 1
  return [value.decode("utf8") if isinstance(value, bytes) else str(value) for value in values]


def open_hdf5(path: str, shown: Optional[str] = None):
  """h5py.File(path, "r") of a local `path`, a file h5py cannot open (cut short, not HDF5) a
  UserInputError; errors name `shown` (where a local copy came from) if given."""
  import h5py
  try:
    return h5py.File(path, "r")
  except OSError as error:
    if not os.path.exists(path):
      raise FileNotFoundError(f"{shown or path}: no such file") from None
    raise UserInputError(f"{shown or path}: not a readable HDF5 file ({error}); damaged or cut "
                         "short while copying? save or fetch it again") from None


def read_keras_h5_weights(path: str) -> Dict[str, np.ndarray]:
  """{variable name without the model's name, e.g. 'transformer/mask_emb:0': array}."""
  import h5py
  weights, found_in = {}, {}
  with open_hdf5(path) as handle:
    layer_names = _string_list_attribute(handle, "layer_names")
    if not layer_names:
      raise UserInputError(f"{path}: no 'layer_names' attribute; not a Keras 2 / Hugging Face "
                           "TF weights file (a Keras 3 .weights.h5 is not read here)")
    for layer_name in layer_names:
      if layer_name not in handle:
        raise UserInputError(f"{path}: layer_names lists {layer_name!r}, which is not in the file")
      node = handle[layer_name]
      if isinstance(node, h5py.Dataset):  # a sharded file: the name is already shortened
        entries = [(layer_name, layer_name, handle)]
      else:
        entries = [("/".join(full.split("/")[1:]) or full, full, node)
                   for full in _string_list_attribute(node, "weight_names")]
      for name, stored_name, group in entries:
        if not isinstance(group.get(stored_name), h5py.Dataset):
          raise UserInputError(f"{path}: {layer_name} lists the weight {stored_name!r}, which "
                               "it does not hold")
        value = np.asarray(group[stored_name])
        if name in weights:
          if not np.array_equal(weights[name], value):
            raise UserInputError(f"{path}: {name} is stored under both {found_in[name]} and "
                                 f"{layer_name} with different values")
          continue
        weights[name], found_in[name] = value, layer_name
  return weights
