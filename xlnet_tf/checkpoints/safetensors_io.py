"""A NumPy-only reader and writer of the safetensors format (no torch, no pickle, no extra
package).

Layout: 8-byte little-endian header size, a JSON header {name: {dtype, shape, data_offsets}}
(and an optional `__metadata__` {str: str}), then the raw little-endian tensor bytes.

The reader checks the whole header before it makes a single array, as the format's
specification asks of a reader: a bounded header within the file, a JSON object without
repeated names, each entry's dtype, shape and offsets well-formed, its byte count what its
shape and dtype need, and the tensors tiling the data with neither overlaps nor holes. Every
fault is a UserInputError naming the file (and the tensor concerned). The format has no
checksum: a changed byte inside a tensor's data changes that value and nothing else, which no
reader can see.
"""

import json
import math
import struct
from typing import Dict, Mapping, Optional, Tuple

import numpy as np

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
# Bytes per element of each dtype read; bfloat16 is widened to float32 once read.
_ITEM_SIZES = {**{name: np.dtype(code).itemsize for name, code in _DTYPES.items()}, "BF16": 2}
_ENTRY_FIELDS = ("dtype", "shape", "data_offsets")
METADATA_KEY = "__metadata__"
# The bound the safetensors reference reader sets: a larger size field is a damaged or foreign
# file, and reading it would claim that much memory first.
MAX_HEADER_BYTES = 100_000_000


def bfloat16_to_float32(raw, byte_order: str = "<") -> np.ndarray:
  """bfloat16 bytes as float32: the 16 stored bits are float32's upper half, so exact."""
  bits = np.frombuffer(raw, np.dtype("u2").newbyteorder(byte_order)).astype(np.uint32) << 16
  return bits.view(np.float32)


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
  """Returns {name: array}: read-only views of the bytes read, but for bfloat16 tensors, which
  come back as float32 copies (exactly).

  Raises UserInputError naming the file (and the tensor) for any fault of its header: see
  `checked_header`. The file is read once, whole, on any file system (utils.files: gs://...
  too): the checks and the values come from the same bytes, so a file changed while it is read
  cannot pass with other contents (a memory map would see later writes, and fault on a file
  cut short after the check).
  """
  raw = files.read_bytes(path)
  entries, data_start = checked_header(path, raw)
  data = memoryview(raw)[data_start:]
  tensors = {}
  for name, (dtype, shape, begin, end) in entries.items():
    if dtype == "BF16":
      array = bfloat16_to_float32(data[begin:end])
    else:
      array = np.frombuffer(data[begin:end], _DTYPES[dtype])
    try:
      tensors[name] = array.reshape(shape)
    except ValueError as error:  # an empty tensor with a dimension NumPy cannot hold
      raise UserInputError(f"{path}: tensor {name!r}: shape {list(shape)} is not an array "
                           f"NumPy can make ({error})") from None
  return tensors


def stated_value_count(path: str) -> Optional[int]:
  """The number of values the header of the safetensors file `path` states, read without its
  data (any file system: utils.files); None when the header does not read as one (then
  read_safetensors names its fault)."""
  with files.open_file(path, "rb") as handle:
    start = handle.read(8)
    if len(start) < 8 or struct.unpack("<Q", start)[0] > MAX_HEADER_BYTES:
      return None
    encoded = handle.read(struct.unpack("<Q", start)[0])
  try:
    header = json.loads(encoded.decode("utf-8"))
  except (ValueError, RecursionError):
    return None
  if not isinstance(header, dict):
    return None
  total = 0
  for name, info in header.items():
    shape = info.get("shape") if isinstance(info, dict) and name != METADATA_KEY else []
    if not (isinstance(shape, list) and all(_is_count(size) for size in shape)):
      return None
    total += math.prod(shape) if name != METADATA_KEY else 0
  return total


class _RepeatedKeyError(ValueError):
  """A JSON object naming one key twice (json keeps the last silently)."""

  def __init__(self, key):
    super().__init__(key)
    self.key = key


def _refuse_repeated_keys(pairs):
  result = {}
  for key, value in pairs:
    if key in result:
      raise _RepeatedKeyError(key)
    result[key] = value
  return result


def _is_count(value) -> bool:
  """A non-negative JSON integer (a bool is not one, though Python counts it as an int)."""
  return type(value) is int and value >= 0


def checked_header(path: str, raw: bytes) -> Tuple[Dict[str, Tuple[str, Tuple[int, ...], int,
                                                                   int]], int]:
  """({name: (dtype, shape, begin, end)}, where the tensor data starts in `raw`) of the whole
  file's bytes `raw`, after every check the format's specification asks for.

  Raises UserInputError "<path>: ..." naming the tensor when the file is too short, its header
  size exceeds MAX_HEADER_BYTES or the file, the header is not UTF-8 JSON of an object naming
  each key once, `__metadata__` is not {str: str}, an entry lacks a known dtype, a shape of
  non-negative integers or two data_offsets begin <= end within the data, holds a byte count
  other than its shape and dtype need, or the tensors overlap or leave bytes of the data
  unclaimed.
  """
  if len(raw) < 8:
    raise UserInputError(f"{path}: {len(raw)} bytes, too short to be a safetensors file (it "
                         "starts with an 8-byte header size)")
  header_size = struct.unpack("<Q", raw[:8])[0]
  if header_size > MAX_HEADER_BYTES:
    raise UserInputError(f"{path}: header size {header_size} is over the {MAX_HEADER_BYTES} "
                         "bytes a safetensors header may take; not a safetensors file?")
  if header_size > len(raw) - 8:
    raise UserInputError(f"{path}: header size {header_size} exceeds the file's "
                         f"{len(raw) - 8} bytes after it; cut short, or not safetensors?")
  try:
    header = json.loads(raw[8:8 + header_size].decode("utf-8"),
                        object_pairs_hook=_refuse_repeated_keys)
  except _RepeatedKeyError as error:
    raise UserInputError(f"{path}: the safetensors header names {error.key!r} twice") from None
  except UnicodeDecodeError as error:
    raise UserInputError(f"{path}: the safetensors header is not UTF-8 text (byte "
                         f"{8 + error.start}: {error.reason})") from None
  except (ValueError, RecursionError) as error:  # malformed, nested too deep, a huge number
    raise UserInputError(f"{path}: unreadable safetensors header ({error})") from None
  if not isinstance(header, dict):
    raise UserInputError(f"{path}: the safetensors header is a JSON "
                         f"{type(header).__name__}, not an object")
  data_size = len(raw) - 8 - header_size
  entries = {}
  for name, info in header.items():
    if name == METADATA_KEY:
      if not isinstance(info, dict) or not all(isinstance(value, str) for value in info.values()):
        raise UserInputError(f"{path}: {METADATA_KEY} is {_shown(info)}, not an object of "
                             "strings")
      continue
    entries[name] = _checked_entry(f"{path}: tensor {_shown(name)}", info, data_size)
  _check_tiling(path, entries, data_size)
  return entries, 8 + header_size


def _shown(value, limit: int = 80) -> str:
  """repr(value), cut to `limit` characters (a header value can be as long as the header)."""
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def _checked_entry(where: str, info, data_size: int) -> Tuple[str, Tuple[int, ...], int, int]:
  """(dtype, shape, begin, end) of one tensor's header entry; `where` starts each message."""
  if not isinstance(info, dict):
    raise UserInputError(f"{where}: its entry is {_shown(info)}, not an object "
                         "{dtype, shape, data_offsets}")
  missing = [field for field in _ENTRY_FIELDS if field not in info]
  if missing:
    raise UserInputError(f"{where}: its entry has no {' or '.join(missing)}")
  dtype, shape, offsets = (info[field] for field in _ENTRY_FIELDS)
  if not isinstance(dtype, str) or dtype not in _ITEM_SIZES:
    raise UserInputError(f"{where}: dtype {_shown(dtype)} is not one read here "
                         f"({', '.join(sorted(_ITEM_SIZES))})")
  if not isinstance(shape, list) or not all(_is_count(extent) for extent in shape):
    raise UserInputError(f"{where}: shape {_shown(shape)} is not a list of non-negative "
                         "integers")
  if not isinstance(offsets, list) or len(offsets) != 2 or \
      not all(_is_count(offset) for offset in offsets):
    raise UserInputError(f"{where}: data_offsets {_shown(offsets)} is not a pair [begin, end] "
                         "of non-negative integers")
  begin, end = offsets
  if begin > end:
    raise UserInputError(f"{where}: data_offsets [{begin}, {end}] end before they begin")
  if end > data_size:
    raise UserInputError(f"{where}: data_offsets [{begin}, {end}] lie outside the {data_size} "
                         "bytes of tensor data; cut short?")
  needed = math.prod(shape) * _ITEM_SIZES[dtype]
  if end - begin != needed:
    raise UserInputError(f"{where}: data_offsets [{begin}, {end}] hold {end - begin} bytes, "
                         f"but shape {shape} of {dtype} needs {needed}")
  return dtype, tuple(shape), begin, end


def _check_tiling(path: str, entries, data_size: int) -> None:
  """The tensors, in offset order, cover the data from its first byte to its last, each
  starting where the one before ends (the specification allows neither overlaps nor holes)."""
  position, previous = 0, None
  for name, (_, _, begin, end) in sorted(entries.items(), key=lambda item: item[1][2:]):
    if begin < position:
      raise UserInputError(f"{path}: tensor {name!r} (data_offsets [{begin}, {end}]) overlaps "
                           f"tensor {previous!r}, which ends at {position}")
    if begin > position:
      after = f"after tensor {previous!r}" if previous is not None else "at the start"
      raise UserInputError(f"{path}: tensor {name!r} starts at {begin}, leaving bytes "
                           f"{position}..{begin} of the data {after} unclaimed")
    position, previous = end, name
  if position != data_size:
    raise UserInputError(f"{path}: the tensors claim {position} bytes of data, but the file "
                         f"holds {data_size} after its header")


_DTYPE_NAMES = {np.dtype(code).newbyteorder("<"): name for name, code in _DTYPES.items()}
_ALIGNMENT = 8  # the header is padded so the data starts 8-byte aligned, as the spec advises


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray],
                      metadata: Optional[Mapping[str, str]] = None) -> str:
  """Writes {name: array} (little-endian, in name order); `metadata` goes to `__metadata__`
  (transformers wants {"format": "pt"}). Returns `path`."""
  header, offset, blobs = {}, 0, []
  if metadata:
    header[METADATA_KEY] = dict(metadata)
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
  # Whole or not at all; a failing write (a full disk) is an OSError naming `path`.
  return files.write_bytes(path, b"".join([struct.pack("<Q", len(encoded)), encoded, *blobs]))
