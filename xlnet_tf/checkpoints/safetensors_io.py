"""A NumPy-only reader and writer of the safetensors format (no torch, no pickle, no extra
package).

Layout: 8-byte little-endian header size, a JSON header {name: {dtype, shape, data_offsets}},
then the raw little-endian tensor bytes.
"""

import json
import struct
from typing import Dict, Mapping, Optional

import numpy as np

from xlnet_tf.utils.errors import UserInputError

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U8": "u1", "BOOL": "?"}


def bfloat16_to_float32(raw, byte_order: str = "<") -> np.ndarray:
  """bfloat16 bytes as float32: the 16 stored bits are float32's upper half, so exact."""
  bits = np.frombuffer(raw, np.dtype("u2").newbyteorder(byte_order)).astype(np.uint32) << 16
  return bits.view(np.float32)


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
  """Returns {name: array}; bfloat16 tensors come back as float32 (exactly)."""
  with open(path, "rb") as handle:
    raw = handle.read()
  if len(raw) < 8:
    raise UserInputError(f"{path}: too short to be a safetensors file")
  header_size = struct.unpack("<Q", raw[:8])[0]
  if header_size > len(raw) - 8:
    raise UserInputError(f"{path}: header size {header_size} exceeds the file; not safetensors?")
  try:
    header = json.loads(raw[8:8 + header_size])
  except (UnicodeDecodeError, json.JSONDecodeError) as error:
    raise UserInputError(f"{path}: unreadable safetensors header ({error})") from None
  if not isinstance(header, dict):
    raise UserInputError(f"{path}: the safetensors header is not a JSON object")
  data = memoryview(raw)[8 + header_size:]
  tensors = {}
  for name, info in header.items():
    if name == "__metadata__":
      continue
    if not isinstance(info, dict):
      raise UserInputError(f"{path}: tensor {name!r} has no {{dtype, shape, data_offsets}} entry")
    dtype, shape = info.get("dtype"), tuple(info.get("shape", ()))
    begin, end = info.get("data_offsets", (0, -1))
    if not 0 <= begin <= end <= len(data):
      raise UserInputError(f"{path}: tensor {name!r} has offsets {begin}..{end} outside the data")
    if dtype == "BF16":
      array = bfloat16_to_float32(data[begin:end])
    elif dtype in _DTYPES:
      array = np.frombuffer(data[begin:end], _DTYPES[dtype])
    else:
      raise UserInputError(f"{path}: tensor {name!r} has unsupported dtype {dtype!r}")
    if array.size != int(np.prod(shape)):
      raise UserInputError(f"{path}: tensor {name!r} holds {array.size} values, shape "
                           f"{list(shape)} needs {int(np.prod(shape))}")
    tensors[name] = array.reshape(shape)
  return tensors


_DTYPE_NAMES = {np.dtype(code).newbyteorder("<"): name for name, code in _DTYPES.items()}
_ALIGNMENT = 8  # the header is padded so the data starts 8-byte aligned, as the spec advises


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray],
                      metadata: Optional[Mapping[str, str]] = None) -> str:
  """Writes {name: array} (little-endian, in name order); `metadata` goes to `__metadata__`
  (transformers wants {"format": "pt"}). Returns `path`."""
  header, offset, blobs = {}, 0, []
  if metadata:
    header["__metadata__"] = dict(metadata)
  for name in sorted(tensors):
    array = np.ascontiguousarray(tensors[name])
    array = array.astype(array.dtype.newbyteorder("<"), copy=False)
    if array.dtype not in _DTYPE_NAMES:
      raise UserInputError(f"{path}: tensor {name!r} has dtype {array.dtype}, which safetensors "
                           f"here does not write (one of {sorted(set(_DTYPE_NAMES.values()))})")
    blob = array.tobytes()
    header[name] = {"dtype": _DTYPE_NAMES[array.dtype], "shape": list(array.shape),
                    "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
  encoded = json.dumps(header, separators=(",", ":")).encode()
  encoded += b" " * (-len(encoded) % _ALIGNMENT)
  with open(path, "wb") as handle:
    handle.write(struct.pack("<Q", len(encoded)))
    handle.write(encoded)
    for blob in blobs:
      handle.write(blob)
  return path
