"""A reader of Keras 2 HDF5 weight files (Hugging Face's `tf_model.h5`), with h5py only.

Keras 2 `save_weights(...h5)` writes the root attribute `layer_names` (the model's top-level
layers) and, per layer, a group whose attribute `weight_names` lists the full variable names,
e.g. `tfxl_net_lm_head_model/transformer/layer_._0/rel_attn/q:0`, each a dataset at that path
inside the group. The first component is the model's Keras name, which depends on the class
that saved it, so it is dropped (as Hugging Face's own loader does). A layer holding another
layer's weight (HF's `lm_loss` keeps the word embedding it is tied to) lists it again.

Hugging Face's sharded files (`tf_model-0000k-of-0000n.h5`) instead list the already shortened
names in the root `layer_names`, each a dataset at that path.

The files Keras writes carry no checksum (HDF5's default, earliest file format): a changed byte
of a weight's data changes that value, which no reader can see. What the reader does check: each
weight is stored as one of HDF5's standard IEEE float or integer types (a changed bit of a
datatype's description, its exponent bias or mantissa size, would otherwise have HDF5 convert
the bytes into other values), and no two weights' data overlap in the file.
"""

import functools
from typing import Dict, List, Optional

import numpy as np

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

# What h5py raises when the bytes of an HDF5 file it opened are damaged: a broken B-tree, heap
# or object header surfaces from whichever call first reads it, as any of these.
H5PY_FAULTS = (OSError, KeyError, RuntimeError, ValueError, TypeError)


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
    if not files.exists(path):
      raise FileNotFoundError(f"{shown or path}: no such file") from None
    raise UserInputError(f"{shown or path}: not a readable HDF5 file ({error}); damaged or cut "
                         "short while copying? save or fetch it again") from None


def read_keras_h5_weights(path: str) -> Dict[str, np.ndarray]:
  """{variable name without the model's name, e.g. 'transformer/mask_emb:0': array}.

  Raises UserInputError naming the file when it is not a Keras 2 weights file, lists a weight
  it does not hold, stores one weight twice with different values, stores a weight in a
  non-standard datatype or over another's bytes, or is damaged in a way HDF5 reports.
  """
  handle = open_hdf5(path)
  try:
    with handle:
      return _read_weights(handle, path)
  except UserInputError:
    raise
  except H5PY_FAULTS as error:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    raise UserInputError(f"{path}: a damaged HDF5 file ({type(error).__name__}: {reason}); "
                         "damaged or cut short while copying? save or fetch it again") from None


def _read_weights(handle, path: str) -> Dict[str, np.ndarray]:
  import h5py
  weights, found_in, regions = {}, {}, []
  file_size = files.getsize(path)
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
      dataset = group.get(stored_name)
      if not isinstance(dataset, h5py.Dataset):
        raise UserInputError(f"{path}: {layer_name} lists the weight {stored_name!r}, which "
                             "it does not hold")
      _check_storage(path, stored_name, dataset, file_size, regions)
      value = np.asarray(dataset)
      if name in weights:
        if not np.array_equal(weights[name], value):
          raise UserInputError(f"{path}: {name} is stored under both {found_in[name]} and "
                               f"{layer_name} with different values")
        continue
      weights[name], found_in[name] = value, layer_name
  return weights


@functools.lru_cache(maxsize=1)
def _standard_types():
  """HDF5's standard datatypes of weights: IEEE floats and integers of either byte order."""
  from h5py import h5t
  widths = {"IEEE_F": (16, 32, 64), "STD_I": (8, 16, 32, 64), "STD_U": (8, 16, 32, 64)}
  return tuple(getattr(h5t, f"{kind}{bits}{order}") for kind, sizes in widths.items()
               for bits in sizes for order in ("LE", "BE"))


def _check_storage(path: str, name: str, dataset, file_size: int, regions: list) -> None:
  """The dataset's datatype is a standard one, and its bytes (where HDF5 keeps them in one
  contiguous block) lie within the file apart from every other weight's; `regions` gathers
  (offset, end, dataset id) across calls. A hard link to one dataset is not an overlap."""
  datatype = dataset.id.get_type()
  if not any(datatype.equal(standard) for standard in _standard_types()):
    raise UserInputError(f"{path}: {name} is stored in an HDF5 datatype that is none of the "
                         f"standard IEEE floats or integers ({datatype.get_size()} bytes, read "
                         f"as {dataset.dtype}); damaged?")
  offset = dataset.id.get_offset()
  if offset is None:  # chunked or compact: no single block to compare
    return
  end = offset + dataset.id.get_storage_size()
  if end > file_size:
    raise UserInputError(f"{path}: {name} has its data at bytes {offset}..{end}, past the "
                         "file's end; cut short?")
  for other_offset, other_end, other_id, other_name in regions:
    if offset < other_end and other_offset < end and dataset.id != other_id:
      raise UserInputError(f"{path}: {name} (bytes {offset}..{end}) and {other_name} (bytes "
                           f"{other_offset}..{other_end}) share bytes of the file; damaged?")
  regions.append((offset, end, dataset.id, name))
