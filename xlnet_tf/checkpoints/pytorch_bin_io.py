"""A weights-only reader of PyTorch `torch.save` files (`pytorch_model.bin`), without torch.

Layout (torch >= 1.6): a zip archive with one top folder (`archive/`, or the file's base name)
holding `data.pkl`, a pickle of {name: tensor}, and `data/<key>`, the raw bytes of each
storage. A tensor is pickled as a call of `torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, requires_grad, hooks)` whose storage is a persistent id `("storage",
torch.FloatStorage, key, device, numel)`.

Unpickling runs whatever callables the file names, so `data.pkl` is read by an unpickler that
resolves only the few globals a state dict needs, each to our own stand-in (never to torch or
to the named object), and refuses any other global by name before it is looked up. Pickle
reaches callables only through `find_class` (GLOBAL, STACK_GLOBAL, INST, EXT*) and
`persistent_load`, so nothing else the file names can run.

Every problem of the file raises a UserInputError naming it: a zip archive cut short or damaged
(told apart from the legacy non-zip format by the first bytes), a missing storage record, a
pickle that is incomplete or describes no state dict, a tensor reaching outside its storage, a
storage whose byte count is not what the pickle says or that two tensors describe differently.
Each record's CRC-32 is checked as it is read (data.pkl whole, before it is unpickled), so a
changed byte of any record is refused, not read as other weights.
"""

import collections
import io
import os
import pickle
import struct
import zipfile
import zlib
from typing import Dict

import numpy as np

from xlnet_tf.checkpoints.safetensors_io import bfloat16_to_float32
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

# torch storage type -> little-endian NumPy dtype ("bfloat16" is widened to float32 exactly).
STORAGE_DTYPES = {"FloatStorage": "<f4", "HalfStorage": "<f2", "BFloat16Storage": "bfloat16",
                  "DoubleStorage": "<f8", "LongStorage": "<i8", "IntStorage": "<i4",
                  "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1",
                  "BoolStorage": "?"}

# A zip archive starts with a local file header (or, empty, with its end record); a legacy
# `torch.save` file is a sequence of pickles, each starting with the PROTO opcode.
ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")
PICKLE_PROTOCOL_OPCODE = b"\x80"

LEGACY_FORMAT_MESSAGE = (
    "{path}: not a zip archive but a pickle: the legacy (torch < 1.6) `torch.save` format, "
    "which xlnet_tf does not read; re-save it once where torch and transformers are installed, "
    "python -c \"from transformers import AutoModel; import sys; "
    "AutoModel.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[1], "
    "safe_serialization=True)\" {path_directory} , and load the model.safetensors it writes")
DAMAGED_ZIP_MESSAGE = "{path}: a damaged zip archive ({reason}); download or copy it again"
# What zipfile raises on an archive whose bytes are damaged: besides BadZipFile, a changed
# header field reads as an unsupported version or compression method (NotImplementedError),
# an encrypted record (RuntimeError), a name that is not UTF-8 (ValueError), an offset before
# the file's start (OSError from seek) or a field too large for a C integer (OverflowError).
ZIP_FAULTS = (zipfile.BadZipFile, zlib.error, EOFError, struct.error, NotImplementedError,
              RuntimeError, ValueError, OSError, OverflowError)



class UnsafeCheckpointError(UserInputError):
  """The pickle names something a weights-only file never holds; nothing of it was run."""


class _Sealed:
  """The objects the unpickler hands out: pickle's BUILD opcode cannot change them."""
  __slots__ = ()

  def __setstate__(self, state):
    raise UnsafeCheckpointError(f"the pickle tries to set the state of a {type(self).__name__}")


class _StorageType(_Sealed):
  """Stands for `torch.<dtype>Storage` inside a persistent id; never called."""
  __slots__ = ("name",)

  def __init__(self, name):
    self.name = name

  def __repr__(self):  # shown in messages about the persistent id that holds it
    return f"torch.{self.name}"


class _Storage(_Sealed):
  """One `data/<key>` record, decoded to a 1-D array."""
  __slots__ = ("key", "values")

  def __init__(self, key, values):
    self.key, self.values = key, values


class _Tensor(_Sealed):
  """What `_rebuild_tensor_v2` gives: a read-only NumPy view of the tensor's elements."""
  __slots__ = ("array",)

  def __init__(self, array):
    self.array = array


class _AllowedGlobal(_Sealed):
  """Our stand-in for one allowed pickled callable (the file never reaches the real one)."""
  __slots__ = ("qualified_name", "function")

  def __init__(self, qualified_name, function):
    self.qualified_name, self.function = qualified_name, function

  def __call__(self, *args):
    return self.function(*args)


def _is_int_tuple(value):
  return isinstance(value, tuple) and all(type(item) is int for item in value)


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                    metadata=None):
  """A view of the elements `size`/`stride` select from `storage`, bounds-checked first.

  A view, not a copy: tied weights share one storage, and the loader copies into variables.
  """
  del requires_grad
  if not isinstance(storage, _Storage) or type(storage_offset) is not int or \
      not _is_int_tuple(size) or not _is_int_tuple(stride) or len(size) != len(stride):
    raise UnsafeCheckpointError("_rebuild_tensor_v2 called with arguments that do not describe "
                                "a tensor in a storage")
  if backward_hooks or metadata:
    raise UnsafeCheckpointError("a tensor with backward hooks or metadata (not plain weights)")
  values = storage.values
  if any(extent < 0 for extent in size) or any(step < 0 for step in stride) or \
      storage_offset < 0:
    raise UnsafeCheckpointError(f"storage {storage.key}: negative size, stride or offset")
  if 0 in size:
    return _Tensor(np.zeros(size, values.dtype))
  last = storage_offset + sum((extent - 1) * step for extent, step in zip(size, stride))
  if last >= values.size:
    raise UserInputError(f"storage {storage.key}: tensor of size {list(size)}, stride "
                     f"{list(stride)} at offset {storage_offset} reads past its "
                     f"{values.size} elements")
  return _Tensor(np.lib.stride_tricks.as_strided(
      values[storage_offset:], shape=size,
      strides=[step * values.itemsize for step in stride], writeable=False))


def _rebuild_parameter(data, requires_grad, backward_hooks):
  """A pickled nn.Parameter (saved with keep_vars=True) is its data."""
  del requires_grad
  if not isinstance(data, _Tensor) or backward_hooks:
    raise UnsafeCheckpointError("_rebuild_parameter called on something other than a tensor")
  return data


def _ordered_dict(*args):
  if args:
    raise UnsafeCheckpointError("collections.OrderedDict called with arguments")
  return collections.OrderedDict()


_ALLOWED_CALLABLES = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): _ordered_dict,
}


class _WeightsOnlyUnpickler(pickle.Unpickler):
  """Resolves only tensor-rebuilding globals and storage ids; refuses everything else."""

  def __init__(self, file, read_storage):
    super().__init__(file)
    self._read_storage = read_storage
    self._storages = {}
    self._descriptions = {}  # storage key -> (storage type name, numel) of its first mention

  def find_class(self, module, name):
    if (module, name) in _ALLOWED_CALLABLES:
      return _AllowedGlobal(f"{module}.{name}", _ALLOWED_CALLABLES[module, name])
    if module == "torch" and name in STORAGE_DTYPES:
      return _StorageType(name)
    raise UnsafeCheckpointError(
        f"refused the pickled global {module}.{name}: a weights-only file holds tensors only "
        "(nothing of the file was run)")

  def persistent_load(self, pid):
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
            and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
            and type(pid[4]) is int):
      raise UnsafeCheckpointError(f"refused the persistent id {pid!r}: only tensor storages "
                                  "are read")
    _, storage_type, key, _, numel = pid
    if key not in self._storages:
      self._storages[key] = _Storage(key, self._read_storage(key, storage_type.name, numel))
      self._descriptions[key] = (storage_type.name, numel)
    elif self._descriptions[key] != (storage_type.name, numel):
      # Tensors sharing a storage name it alike; the first description read must not decide.
      raise UserInputError(f"storage {key!r} is described both as {self._descriptions[key][1]} "
                           f"elements of torch.{self._descriptions[key][0]} and as {numel} of "
                           f"torch.{storage_type.name}")
    return self._storages[key]


def read_pytorch_bin(path: str) -> Dict[str, np.ndarray]:
  """{name: read-only array} of a `torch.save`d state dict; bfloat16 comes back as float32
  (exactly).

  Raises UnsafeCheckpointError, naming it, if the pickle holds any global other than the
  tensor-rebuilding ones, and UserInputError naming the file for the legacy (non-zip) format,
  a damaged or truncated archive, or a pickle that is not a complete state dict.
  """
  # Opened outside the try: a file that is not there is no damage. A remote file (gs://...) is
  # read from a local copy (utils.files): zipfile seeks in it, and tf.io.gfile's seek before
  # the start raises no OSError.
  with files.local_copy(path) as local_path, files.open_file(local_path, "rb") as handle:
    if not zipfile.is_zipfile(handle):
      handle.seek(0)
      start = handle.read(4)
      if start.startswith(ZIP_SIGNATURES):
        raise UserInputError(DAMAGED_ZIP_MESSAGE.format(
            path=path, reason="no end-of-central-directory record: cut short while downloading "
            "or copying?"))
      if start.startswith(PICKLE_PROTOCOL_OPCODE):
        raise UserInputError(LEGACY_FORMAT_MESSAGE.format(
            path=path, path_directory=os.path.dirname(path) or "."))
      raise UserInputError(f"{path}: neither a zip archive nor a pickle, so not a PyTorch "
                           f"`torch.save` file (it starts with {start!r})")
    try:
      with zipfile.ZipFile(handle) as archive:
        state = _read_state_dict(archive, path)
    except UserInputError:
      raise
    except ZIP_FAULTS as error:
      reason = str(error) or type(error).__name__
      if isinstance(error, OSError):  # a seek the damaged directory sends before the start
        reason = f"a record offset outside the file: {reason}"
      raise UserInputError(DAMAGED_ZIP_MESSAGE.format(path=path, reason=reason)) from None
  if not isinstance(state, dict):
    raise UserInputError(f"{path}: holds a {type(state).__name__}, not a state dict "
                         "{name: tensor}")
  tensors = {}
  for name, value in state.items():
    if not isinstance(name, str) or not isinstance(value, _Tensor):
      raise UserInputError(f"{path}: entry {name!r} is a {type(value).__name__}, not a tensor "
                           "(a state dict nested in another object?)")
    tensors[name] = value.array
  return tensors


def _read_state_dict(archive: zipfile.ZipFile, path: str):
  """The object data.pkl holds, its storages read from the archive's data/ records."""
  pickles = [name for name in archive.namelist()
             if name.count("/") == 1 and name.endswith("/data.pkl")]
  if len(pickles) != 1:
    raise UserInputError(f"{path}: a zip archive without exactly one <folder>/data.pkl "
                         f"(found {pickles}); not a torch.save file")
  folder = pickles[0][:-len("data.pkl")]
  records = set(archive.namelist())
  big_endian = f"{folder}byteorder" in records and \
      archive.read(f"{folder}byteorder").strip() == b"big"

  def read_storage(key, storage_type, numel):
    record = f"{folder}data/{key}"
    if record not in records:
      raise UserInputError(f"the pickle refers to storage {key!r}, but the archive has no "
                           f"record {record}")
    raw = archive.read(record)
    dtype = STORAGE_DTYPES[storage_type]
    itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    if len(raw) != numel * itemsize:
      raise UserInputError(f"{record} holds {len(raw)} bytes; the pickle says {numel} "
                           f"elements of torch.{storage_type} ({numel * itemsize} bytes)")
    byte_order = ">" if big_endian else "<"
    if dtype == "bfloat16":
      return bfloat16_to_float32(raw, byte_order)
    return np.frombuffer(raw, np.dtype(dtype).newbyteorder(byte_order))

  # Read whole, so its CRC-32 is checked before the first opcode runs (a stream is checked only
  # if the unpickler reads to its end, and a damaged pickle may stop before).
  pickled = archive.read(pickles[0])
  try:
    return _WeightsOnlyUnpickler(io.BytesIO(pickled), read_storage).load()
  except UserInputError as error:  # raised while unpickling, without the file's name
    raise type(error)(f"{path}: {error}") from None
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
          AttributeError, OverflowError) as error:
    # The pickle is the file's content: whatever the unpickler trips on is a fault of the file.
    raise UserInputError(f"{path}: {pickles[0]} is not a complete state-dict pickle "
                         f"({type(error).__name__}: {error})") from None
