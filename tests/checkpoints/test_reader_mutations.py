"""The checkpoint readers check before they trust: a damaged file is refused naming it, or it
loads exactly what it holds; never another exception, never other weights.

For each format one small file of a tiny model is written, then mutated many times with a fixed
seed (bits flipped in its header and its data, the file cut at any offset, header fields set to
other types and values), and each copy is loaded into one model:

- success must load exactly the file's weights, except where a byte of tensor DATA was flipped
  in a format with no checksum over it (safetensors, HDF5): that changes the one value whose
  bytes it is, and success must load exactly that value there (a NaN or infinity it makes is
  refused);
- or a UserInputError (CheckpointMismatchError is one) whose message starts with the file's
  path (the directory's, for a sharded index), the model's weights unchanged.

What each format can detect differs. pytorch_model.bin is a zip archive with a CRC-32 per
record, and a TF1 checkpoint keeps a CRC32C per tensor and per index block: there, every flip is
refused or changes nothing read. HDF5 files as Keras writes them carry no checksum at all: a
flip inside a dataset's data address moves it over other bytes of the file, which loads other
values and cannot be told from a file written so (counted apart, not asserted); and libhdf5
1.14.6 loops forever on some damaged global heap objects (HDF5's store of the variable-length
name strings), so flips there are left out (see GLOBAL_HEAP_SIGNATURE).

`pytest -s` prints one line of counts per format. A table of named defects follows, each with
its exact error type and message.
"""

import collections
import glob
import json
import os
import random
import re
import shutil
import struct
import zipfile

import h5py
import numpy as np
import pytest
import tensorflow as tf

from checkpoint_files import (Call, Global, PersistentId, huggingface_tensors,
                              huggingface_tf_weights, original_weights, torch_state_dict,
                              write_huggingface_config, write_keras_h5, write_pytorch_bin,
                              write_sharded)
from model_inputs import tiny_config
from xlnet_tf import XLNetModel, checkpoints
from xlnet_tf.checkpoints.naming import original_variable_map
from xlnet_tf.checkpoints.safetensors_io import write_safetensors
from xlnet_tf.utils.errors import UserInputError

CONFIG = tiny_config(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32)
WEIGHTS = original_weights(CONFIG, seed=21)
SEED = 20260
MUTATIONS = {"safetensors": 300, "pytorch_model.bin": 160, "tf_model.h5": 160,
             "TF1 checkpoint": 100, "sharded index": 100}
EMBEDDING = "transformer.word_embedding.weight"
GLOBAL_HEAP_SIGNATURE = b"GCOL"


@pytest.fixture(scope="module")
def model():
  return XLNetModel(CONFIG)


def file_tensors():
  """The HF tensors every Hugging Face file here holds: the backbone's and the LM bias."""
  tensors = huggingface_tensors(WEIGHTS, CONFIG)
  tensors["lm_loss.bias"] = np.linspace(-1, 1, CONFIG.n_token, dtype=np.float32)
  return tensors


def element_sources(convert):
  """{name in the file: [(original name, flat index)] per element}: where each element of a
  file tensor comes from, found by converting weights that hold their own element numbers with
  the test's own writer conversion `convert` (float64 holds every number exactly)."""
  numbered, start = {}, 0
  for name, value in sorted(WEIGHTS.items()):
    numbered[name] = np.arange(start, start + value.size, dtype=np.float64).reshape(value.shape)
    start += value.size
  owners = [(name, index) for name, value in sorted(WEIGHTS.items()) for index in
            range(value.size)]
  return {name: [owners[int(number)] for number in np.ravel(value)]
          for name, value in convert(numbered).items()}


class Attempts:
  """Loads each mutated copy into one model from the same weights, and tallies the outcomes."""

  def __init__(self, model, label):
    self.model, self.label = model, label
    # A value no file here holds, so that a load which assigned nothing cannot pass as one that
    # loaded the file's weights.
    self.initial = [np.full(tuple(variable.shape), 0.125, np.dtype(variable.dtype))
                    for variable in model.weights]
    self.counts = collections.Counter()

  def load(self, load, named, flipped=None, undetectable=False, description=""):
    """Runs load(model); checks the outcome. `named`: the path a refusal's message starts
    with. `flipped`: {original name: array}, the weights a success may load instead of WEIGHTS
    (a data flip's value, when finite). `undetectable`: any finite weights may load (counted)."""
    for variable, value in zip(self.model.weights, self.initial):
      variable.assign(value)
    try:
      load(self.model)
    except UserInputError as error:
      assert str(error).startswith(f"{named}"), f"{description}: {error}"
      for variable, value in zip(self.model.weights, self.initial):
        np.testing.assert_array_equal(variable.numpy(), value,
                                      err_msg=f"{description}: {variable.path} changed")
      self.counts["refused"] += 1
      return
    loaded = {name: variable.numpy() for name, variable in
              original_variable_map(self.model).items()}
    if all(np.array_equal(loaded[name], WEIGHTS[name]) for name in WEIGHTS):
      self.counts["loaded identical"] += 1
    elif flipped is not None and all(np.array_equal(loaded[name], flipped[name])
                                     for name in WEIGHTS):
      self.counts["data flips loaded as flipped"] += 1
    elif undetectable:
      assert all(np.isfinite(value).all() for value in loaded.values()), description
      self.counts["moved data addresses loaded other bytes (undetectable)"] += 1
    else:
      changed = sorted(name for name in WEIGHTS if not np.array_equal(loaded[name],
                                                                      WEIGHTS[name]))
      raise AssertionError(f"{description}: loaded other weights: {changed}")

  def report(self):
    total = sum(self.counts.values())
    parts = ", ".join(f"{count} {what}" for what, count in sorted(self.counts.items()))
    print(f"\n{self.label}: {total} mutations: {parts}")
    assert total == MUTATIONS[self.label]


def flip_bit(raw, offset, rng):
  mutated = bytearray(raw)
  mutated[offset] ^= 1 << rng.randrange(8)
  return bytes(mutated)


def flipped_weights(sources, name, index, value):
  """WEIGHTS with the element the file's `name`[index] feeds set to `value` (None: not finite,
  so only a refusal is right; WEIGHTS itself when the model does not read that tensor)."""
  if not np.isfinite(value):
    return None
  weights = {key: array.copy() for key, array in WEIGHTS.items()}
  if name in sources:
    original, flat_index = sources[name][index]
    weights[original].reshape(-1)[flat_index] = value
  return weights


# ---- model.safetensors -------------------------------------------------------------------------

def safetensors_layout(raw):
  """(header dict, data start) of a safetensors file, parsed here (not by the reader)."""
  header_size = struct.unpack("<Q", raw[:8])[0]
  return json.loads(raw[8:8 + header_size]), 8 + header_size


def with_header(raw, header_text):
  """The file `raw` with its header replaced by `header_text` (the size field rewritten)."""
  _, data_start = safetensors_layout(raw)
  encoded = header_text.encode()
  return struct.pack("<Q", len(encoded)) + encoded + raw[data_start:]


def edit_entry(raw, name, field, value):
  header, _ = safetensors_layout(raw)
  header[name][field] = value
  return with_header(raw, json.dumps(header))


def tensor_names(header):
  return sorted(name for name in header if name != "__metadata__")


BAD_DTYPES = ["I32", "F16", "BF16", "F64", "I64", "U8", "BOGUS", "f32", "", 5, None, ["F32"]]
BAD_EXTENTS = [-1, -16, 0, 1, 10**20, 2**64, "16", 16.0, True, None, [16]]
BAD_OFFSETS = [-1, -8, "0", 0.0, None, True, 10**20]


def safetensors_header_edit(raw, rng):
  """One random change of the header's structure (see the docstring of each choice)."""
  header, data_start = safetensors_layout(raw)
  names = tensor_names(header)
  name = rng.choice(names)
  begin, end = header[name]["data_offsets"]
  kind = rng.choice(["dtype", "shape value", "shape length", "offset value", "offsets swapped",
                     "offset shifted", "offsets pair", "entry type", "field missing",
                     "entry removed", "entry renamed", "repeated name", "metadata",
                     "size field", "extra field"])
  if kind == "dtype":
    return edit_entry(raw, name, "dtype", rng.choice(BAD_DTYPES))
  if kind == "shape value":
    shape = list(header[name]["shape"])
    shape[rng.randrange(len(shape))] = rng.choice(BAD_EXTENTS)
    return edit_entry(raw, name, "shape", shape)
  if kind == "shape length":
    shape = list(header[name]["shape"])
    return edit_entry(raw, name, "shape", shape + [1] if rng.random() < 0.5 else shape[1:])
  if kind == "offset value":
    offsets = [begin, end]
    offsets[rng.randrange(2)] = rng.choice(BAD_OFFSETS)
    return edit_entry(raw, name, "data_offsets", offsets)
  if kind == "offsets swapped":
    return edit_entry(raw, name, "data_offsets", [end, begin])
  if kind == "offset shifted":
    shift = rng.choice([-4, -1, 1, 2, 4, 64])
    return edit_entry(raw, name, "data_offsets", [begin + shift, end + shift])
  if kind == "offsets pair":
    return edit_entry(raw, name, "data_offsets", rng.choice([[begin], [begin, end, end], {},
                                                             "0-4", begin]))
  if kind == "entry type":
    header[name] = rng.choice([[header[name]["dtype"]], "F32", 7, None, True])
    return with_header(raw, json.dumps(header))
  if kind == "field missing":
    del header[name][rng.choice(["dtype", "shape", "data_offsets"])]
    return with_header(raw, json.dumps(header))
  if kind == "entry removed":
    del header[name]
    return with_header(raw, json.dumps(header))
  if kind == "entry renamed":
    header[name + rng.choice(["x", ".weight", ""]) + "_"] = header.pop(name)
    return with_header(raw, json.dumps(header))
  if kind == "repeated name":
    text = json.dumps(header)
    entry = json.dumps({name: header[name]})[1:-1]
    return with_header(raw, text[:-1] + ", " + entry + "}")
  if kind == "metadata":
    header["__metadata__"] = rng.choice([{"format": 1}, ["pt"], "pt", {"format": None},
                                         {"format": "pt", "other": "x"}])
    return with_header(raw, json.dumps(header))
  if kind == "size field":
    size = rng.choice([0, 1, data_start - 9, data_start - 7, len(raw), len(raw) - 7,
                       2**63, 2**64 - 1, 100_000_001])
    return struct.pack("<Q", size) + raw[8:]
  header[name]["extra"] = rng.choice([1, "x", None])  # an unknown field is allowed
  return with_header(raw, json.dumps(header))


def test_safetensors_mutations(tmp_path, model):
  directory = tmp_path / "hf"
  write_huggingface_config(str(directory), CONFIG)
  path = str(directory / "model.safetensors")
  write_safetensors(path, file_tensors(), {"format": "pt"})
  raw = open(path, "rb").read()
  header, data_start = safetensors_layout(raw)
  sources = element_sources(lambda weights: huggingface_tensors(weights, CONFIG))
  attempts = Attempts(model, "safetensors")
  rng = random.Random(SEED)
  load = lambda target: checkpoints.load_huggingface_checkpoint(target, str(directory))
  for attempt in range(MUTATIONS["safetensors"]):
    kind = rng.choice(["header flip", "data flip", "cut", "header edit", "header edit"])
    flipped = None
    if kind == "header flip":
      mutated = flip_bit(raw, rng.randrange(data_start), rng)
    elif kind == "data flip":
      offset = rng.randrange(data_start, len(raw))
      mutated = flip_bit(raw, offset, rng)
      name = next(name for name in sorted(tensor_names(header),
                                          key=lambda name: header[name]["data_offsets"])
                  if offset - data_start < header[name]["data_offsets"][1])
      begin = header[name]["data_offsets"][0]
      index = (offset - data_start - begin) // 4
      at = data_start + begin + 4 * index
      flipped = flipped_weights(sources, name, index,
                                np.frombuffer(mutated[at:at + 4], "<f4")[0])
    elif kind == "cut":
      mutated = raw[:rng.randrange(len(raw))]
    else:
      mutated = safetensors_header_edit(raw, rng)
    open(path, "wb").write(mutated)
    attempts.load(load, path, flipped, description=f"{kind} #{attempt}")
  attempts.report()


# ---- pytorch_model.bin -------------------------------------------------------------------------

def bin_tensors():
  tensors = file_tensors()
  tensors["lm_loss.weight"] = tensors[EMBEDDING]  # tied: one storage, as torch saves it
  return tensors


def rebuilt_with(entry, position, value):
  """A `_rebuild_tensor_v2` call of the test writer with argument `position` replaced."""
  args = list(entry.args)
  args[position] = value
  return Call(entry.function, tuple(args))


def storage_with(entry, position, value):
  """The call with element `position` of its storage's persistent id replaced."""
  pid = list(entry.args[0].pid)
  pid[position] = value
  return rebuilt_with(entry, 0, PersistentId(tuple(pid)))


def bad_pickle_entry(entry, rng):
  """One tensor description changed into one no torch file holds: each is refused. (The test
  writer pickles ints of 32 bits, strings, None, bools and tuples.)"""
  size, stride = entry.args[2], entry.args[3]
  numel = entry.args[0].pid[4]
  kind = rng.choice(["offset", "size", "stride", "numel", "storage type", "storage key",
                     "arguments"])
  if kind == "offset":
    return rebuilt_with(entry, 1, rng.choice([-1, "0", True, None, (0,), numel, 10**6]))
  if kind == "size":
    bad = rng.choice([-1, "4", None, True, (4,), 10**6])
    return rebuilt_with(entry, 2, tuple([bad] + list(size[1:])))
  if kind == "stride":
    bad = rng.choice([-1, "1", None, False, 10**6])
    return rebuilt_with(entry, 3, tuple([bad] + list(stride[1:])))
  if kind == "numel":
    return storage_with(entry, 4, rng.choice([numel - 1, numel + 1, -1, "0", True, None]))
  if kind == "storage type":
    return storage_with(entry, 1, Global("torch", rng.choice(
        ["IntStorage", "LongStorage", "HalfStorage", "DoubleStorage", "BogusStorage",
         "Tensor"])))
  if kind == "storage key":
    return storage_with(entry, 2, rng.choice(["missing", 7, None]))
  return Call(entry.function, entry.args[:rng.randrange(len(entry.args))])


def zip_data_spans(path):
  """[(start, end)] of each record's stored bytes in a zip archive."""
  with zipfile.ZipFile(path) as archive:
    infos = archive.infolist()
  return [(info.header_offset + 30 + len(info.filename.encode()) + len(info.extra),
           info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
           + info.compress_size) for info in infos]


def test_pytorch_bin_mutations(tmp_path, model):
  directory = tmp_path / "hf"
  write_huggingface_config(str(directory), CONFIG)
  path = str(directory / "pytorch_model.bin")
  tensors = bin_tensors()
  write_pytorch_bin(path, tensors)
  raw = open(path, "rb").read()
  spans = zip_data_spans(path)
  structure = [offset for offset in range(len(raw))
               if not any(start <= offset < end for start, end in spans)]
  entries, _ = torch_state_dict(tensors)
  # Only weights the model reads: a bad description of lm_loss.weight (tied, skipped) is caught
  # by the reader alone, which these cases are not about.
  described = sorted(name for name in entries if not name.startswith("lm_loss."))
  attempts = Attempts(model, "pytorch_model.bin")
  rng = random.Random(SEED + 1)
  load = lambda target: checkpoints.load_huggingface_checkpoint(target, str(directory))
  for attempt in range(MUTATIONS["pytorch_model.bin"]):
    kind = rng.choice(["zip structure flip", "record data flip", "cut", "pickle entry"])
    if kind == "zip structure flip":
      open(path, "wb").write(flip_bit(raw, rng.choice(structure), rng))
    elif kind == "record data flip":  # the records' CRC-32 catches these
      start, end = rng.choice(spans)
      open(path, "wb").write(flip_bit(raw, rng.randrange(start, end), rng))
    elif kind == "cut":
      open(path, "wb").write(raw[:rng.randrange(len(raw))])
    else:
      name = rng.choice(described)
      write_pytorch_bin(path, tensors,
                        pickled={**entries, name: bad_pickle_entry(entries[name], rng)})
    attempts.load(load, path, description=f"{kind} #{attempt}")
  assert attempts.counts["loaded identical"] + attempts.counts["refused"] == \
      MUTATIONS["pytorch_model.bin"]
  attempts.report()


# ---- tf_model.h5 -------------------------------------------------------------------------------

def h5_tf_weights():
  tf_weights = huggingface_tf_weights(WEIGHTS, CONFIG)
  tf_weights["lm_loss/bias:0"] = file_tensors()["lm_loss.bias"]
  return tf_weights


def h5_layout(path, raw):
  """({dataset path: (offset, end)}, byte offsets of the datasets' 8-byte address fields, the
  global heap collections' byte ranges) of an HDF5 file."""
  regions = {}
  with h5py.File(path, "r") as handle:
    handle.visititems(lambda name, node: regions.__setitem__(name, (
        node.id.get_offset(), node.id.get_offset() + node.id.get_storage_size()))
        if isinstance(node, h5py.Dataset) else None)
  address_bytes = set()
  for offset, _ in regions.values():
    found = [match.start() for match in re.finditer(re.escape(struct.pack("<Q", offset)), raw)]
    assert len(found) == 1, (offset, found)
    address_bytes.update(range(found[0], found[0] + 8))
  heaps = []
  for match in re.finditer(GLOBAL_HEAP_SIGNATURE, raw):
    size = struct.unpack("<Q", raw[match.start() + 8:match.start() + 16])[0]
    heaps.append((match.start(), match.start() + size))
  return regions, address_bytes, heaps


def test_tf_model_h5_mutations(tmp_path, model):
  directory = tmp_path / "hf"
  write_huggingface_config(str(directory), CONFIG)
  path = str(directory / "tf_model.h5")
  write_keras_h5(path, h5_tf_weights())
  raw = open(path, "rb").read()
  regions, address_bytes, heaps = h5_layout(path, raw)
  assert heaps, "the names' global heap was not found"
  # A dataset's path is <layer>/<model name>/<TF name>; the file's tensors are named by the
  # TF name, which huggingface_tf_weights gives.
  sources = element_sources(lambda weights: huggingface_tf_weights(weights, CONFIG))
  sources = {dataset: sources.get(dataset.split("/", 2)[2], ()) for dataset in regions}
  data_bytes = [(offset, end, dataset) for dataset, (offset, end) in regions.items()]
  structure = [offset for offset in range(len(raw))
               if not any(start <= offset < end for start, end, _ in data_bytes)
               and not any(start <= offset < end for start, end in heaps)]
  attempts = Attempts(model, "tf_model.h5")
  rng = random.Random(SEED + 2)
  load = lambda target: checkpoints.load_huggingface_checkpoint(target, str(directory))
  for attempt in range(MUTATIONS["tf_model.h5"]):
    kind = rng.choice(["structure flip", "structure flip", "data flip", "cut"])
    flipped, undetectable = None, False
    if kind == "structure flip":
      offset = rng.choice(structure)
      mutated = flip_bit(raw, offset, rng)
      undetectable = offset in address_bytes
    elif kind == "data flip":
      start, end, dataset = rng.choice(data_bytes)
      offset = rng.randrange(start, end)
      mutated = flip_bit(raw, offset, rng)
      index = (offset - start) // 4
      value = np.frombuffer(mutated[start + 4 * index:start + 4 * index + 4], "<f4")[0]
      flipped = flipped_weights({dataset: sources[dataset]} if sources[dataset] else {},
                                dataset, index, value)
    else:
      mutated = raw[:rng.randrange(len(raw))]
    open(path, "wb").write(mutated)
    attempts.load(load, path, flipped, undetectable, description=f"{kind} #{attempt}")
  attempts.report()


# ---- the original TF1 checkpoint ---------------------------------------------------------------

def save_weights_as_original(model, prefix):
  """The TF1 checkpoint of WEIGHTS, written by save_original_checkpoint from `model`, whose
  weights are put back afterwards."""
  variables = original_variable_map(model)
  before = {name: variable.numpy() for name, variable in variables.items()}
  for name, variable in variables.items():
    variable.assign(WEIGHTS[name])
  checkpoints.save_original_checkpoint(model, prefix)
  for name, variable in variables.items():
    variable.assign(before[name])
  return prefix


def test_original_checkpoint_mutations(tmp_path, model):
  prefix = save_weights_as_original(model, str(tmp_path / "xlnet_model.ckpt"))
  files = [prefix + ".index"] + glob.glob(prefix + ".data-*")
  raws = {file: open(file, "rb").read() for file in files}
  attempts = Attempts(model, "TF1 checkpoint")
  rng = random.Random(SEED + 3)
  load = lambda target: checkpoints.load_original_checkpoint(target, prefix)
  for attempt in range(MUTATIONS["TF1 checkpoint"]):
    file, kind = rng.choice(files), rng.choice(["flip", "flip", "cut"])
    for each, raw in raws.items():
      open(each, "wb").write(raw)
    raw = raws[file]
    open(file, "wb").write(flip_bit(raw, rng.randrange(len(raw)), rng) if kind == "flip"
                           else raw[:rng.randrange(len(raw))])
    # TF verifies a CRC32C of each tensor and of each index block: no flip loads other values.
    attempts.load(load, prefix, description=f"{kind} of {file} #{attempt}")
  attempts.report()


# ---- a sharded safetensors index ---------------------------------------------------------------

def write_sharded_safetensors(directory):
  write_huggingface_config(str(directory), CONFIG)
  write_sharded(str(directory), "model.safetensors", file_tensors(),
                lambda path, part: write_safetensors(path, part, {"format": "pt"}))
  return str(directory / "model.safetensors.index.json")


def index_edit(index, rng):
  """One random change of a shard index's weight_map."""
  weight_map = index["weight_map"]
  name = rng.choice(sorted(weight_map))
  kind = rng.choice(["entry value"] * 4 + ["map type", "map removed", "map emptied"])
  if kind == "entry value":
    weight_map[name] = rng.choice([
        "../elsewhere/model.safetensors", "/etc/passwd", "sub/../../x.safetensors",
        "model-00003-of-00002.safetensors", "model.bin", "", 5, None, ["a"], {"a": 1},
        "gs://bucket/model.safetensors", "model-00001-of-00002.safetensors\0"])
  elif kind == "map type":
    index["weight_map"] = rng.choice([[], "model.safetensors", 3, None])
  elif kind == "map removed":
    del index["weight_map"]
  else:
    index["weight_map"] = {}
  return json.dumps(index)


def test_sharded_index_mutations(tmp_path, model):
  directory = tmp_path / "hf"
  index_path = write_sharded_safetensors(directory)
  text = open(index_path).read()
  attempts = Attempts(model, "sharded index")
  rng = random.Random(SEED + 4)
  load = lambda target: checkpoints.load_huggingface_checkpoint(target, str(directory))
  for attempt in range(MUTATIONS["sharded index"]):
    kind = rng.choice(["flip", "cut", "edit", "edit"])
    if kind == "flip":
      mutated = flip_bit(text.encode(), rng.randrange(len(text)), rng)
    elif kind == "cut":
      mutated = text.encode()[:rng.randrange(len(text))]
    else:
      mutated = index_edit(json.loads(text), rng).encode()
    open(index_path, "wb").write(mutated)
    attempts.load(load, str(directory), description=f"{kind} #{attempt}")
  attempts.report()


# ---- named defects -----------------------------------------------------------------------------

def safetensors_directory(directory):
  write_huggingface_config(str(directory), CONFIG)
  return write_safetensors(str(directory / "model.safetensors"), file_tensors(),
                           {"format": "pt"})


def changed_safetensors(change):
  """A case: model.safetensors rewritten by change(raw bytes) -> bytes."""
  def build(directory):
    path = safetensors_directory(directory)
    raw = open(path, "rb").read()
    open(path, "wb").write(change(raw))
    return path
  return build


def edited_entry(name, field, value):
  return changed_safetensors(lambda raw: edit_entry(raw, name, field, value))


def overlapping(raw):
  """The embedding's offsets moved 4 bytes back, over the tensor before it."""
  header, _ = safetensors_layout(raw)
  begin, end = header[EMBEDDING]["data_offsets"]
  return edit_entry(raw, EMBEDDING, "data_offsets", [begin - 4, end - 4])


def outside(raw):
  header, data_start = safetensors_layout(raw)
  begin, end = header[EMBEDDING]["data_offsets"]
  data_size = len(raw) - data_start
  return edit_entry(raw, EMBEDDING, "data_offsets", [data_size, data_size + end - begin])


def repeated_name(raw):
  header, _ = safetensors_layout(raw)
  entry = json.dumps({EMBEDDING: header[EMBEDDING]})[1:-1]
  return with_header(raw, json.dumps(header)[:-1] + ", " + entry + "}")


def entry_replaced(name, value):
  def change(raw):
    header, _ = safetensors_layout(raw)
    header[name] = value
    return with_header(raw, json.dumps(header))
  return changed_safetensors(change)


def entry_removed(name):
  def change(raw):
    header, _ = safetensors_layout(raw)
    del header[name]
    return with_header(raw, json.dumps(header))
  return changed_safetensors(change)


def sharded_with(shard_name):
  """A sharded directory whose index names `shard_name` (a callable of the directory, or a
  string) for the first shard's tensors."""
  def build(directory):
    index_path = write_sharded_safetensors(directory)
    index = json.load(open(index_path))
    first = "model-00001-of-00002.safetensors"
    name = shard_name(directory) if callable(shard_name) else shard_name
    index["weight_map"] = {tensor: (name if shard == first else shard)
                           for tensor, shard in index["weight_map"].items()}
    json.dump(index, open(index_path, "w"))
    return index_path
  return build


def absolute_shard(directory):
  elsewhere = directory.parent / "elsewhere"
  elsewhere.mkdir()
  shutil.copy(directory / "model-00001-of-00002.safetensors", elsewhere / "model.safetensors")
  return str(elsewhere / "model.safetensors")


def shard_linked_out(directory):
  """The first shard replaced by a symbolic link to a copy outside the directory."""
  index_path = write_sharded_safetensors(directory)
  shard = directory / "model-00001-of-00002.safetensors"
  elsewhere = directory.parent / "elsewhere"
  elsewhere.mkdir()
  shutil.move(str(shard), str(elsewhere / shard.name))
  os.symlink(elsewhere / shard.name, shard)
  return index_path


def shard_missing(directory):
  index_path = write_sharded_safetensors(directory)
  os.remove(directory / "model-00002-of-00002.safetensors")
  return index_path


def tensor_in_two_shards(directory):
  index_path = write_sharded_safetensors(directory)
  tensors = file_tensors()
  second = str(directory / "model-00002-of-00002.safetensors")
  with open(second, "rb") as handle:
    header, _ = safetensors_layout(handle.read())
  part = {name: tensors[name] for name in tensor_names(header)}
  part[EMBEDDING] = tensors[EMBEDDING] + 1  # also in the first shard
  write_safetensors(second, part, {"format": "pt"})
  return index_path


def bin_directory(change_entry=None, name=EMBEDDING):
  """pytorch_model.bin whose tensor `name` is described by change_entry(its rebuild call)."""
  def build(directory):
    write_huggingface_config(str(directory), CONFIG)
    path = str(directory / "pytorch_model.bin")
    tensors = bin_tensors()
    entries, _ = torch_state_dict(tensors)
    entries[name] = change_entry(entries[name])
    return write_pytorch_bin(path, tensors, pickled=entries)
  return build


def h5_directory(change):
  """tf_model.h5 written, then change(open h5py file) applied."""
  def build(directory):
    write_huggingface_config(str(directory), CONFIG)
    path = write_keras_h5(str(directory / "tf_model.h5"), h5_tf_weights())
    with h5py.File(path, "r+") as handle:
      change(handle)
    return path
  return build


H5_BIAS = "transformer/tfxl_net_lm_head_model/transformer/layer_._0/ff/layer_1/bias:0"


def h5_int_dataset(handle):
  values = handle[H5_BIAS][()]
  del handle[H5_BIAS]
  handle.create_dataset(H5_BIAS, data=values.view(np.int32))


def h5_nonstandard_float(handle):
  """The dataset's float type with another exponent bias: HDF5 would convert its bytes."""
  values = handle[H5_BIAS][()]
  del handle[H5_BIAS]
  datatype = h5py.h5t.IEEE_F32LE.copy()
  datatype.set_ebias(100)
  space = h5py.h5s.create_simple(values.shape)
  dataset = h5py.h5d.create(handle.id, H5_BIAS.encode(), datatype, space)
  dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, values, mtype=datatype)  # the bytes as they are


def original_directory(change):
  """A TF1 checkpoint; change(prefix) then damages it."""
  def build(directory):
    prefix = str(directory / "xlnet_model.ckpt")
    directory.mkdir()
    tensors = {name: tf.constant(value) for name, value in WEIGHTS.items()}
    change(prefix, tensors)
    return prefix
  return build


def save_tf1(prefix, tensors):
  names = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tensors[name] for name in names])


def tf1_int_tensor(prefix, tensors):
  name = "model/transformer/mask_emb/mask_emb"
  tensors[name] = tf.constant(np.zeros(WEIGHTS[name].shape, np.int32))
  save_tf1(prefix, tensors)


def tf1_data_flip(prefix, tensors):
  save_tf1(prefix, tensors)
  data = glob.glob(prefix + ".data-*")[0]
  raw = bytearray(open(data, "rb").read())
  raw[len(raw) // 2] ^= 0x10
  open(data, "wb").write(bytes(raw))


def config_with(key, value):
  def build(directory):
    safetensors_directory(directory)
    config_path = directory / "config.json"
    values = json.loads(config_path.read_text())
    values[key] = value
    config_path.write_text(json.dumps(values))
    return str(config_path)
  return build


MISMATCH = checkpoints.CheckpointMismatchError
NAMED_CASES = {
    # case: (build(directory) -> the file named, error type, what the message says after it)
    "safetensors dtype I32 where float": (
        edited_entry(EMBEDDING, "dtype", "I32"), MISMATCH,
        r"model/transformer/word_embedding/lookup_table \(transformer.word_embedding.weight\) "
        r"holds int32 values; the model's variable is float32"),
    "safetensors unknown dtype": (edited_entry(EMBEDDING, "dtype", "BOGUS"), UserInputError,
                                  rf"tensor '{EMBEDDING}': dtype 'BOGUS' is not one read here"),
    "safetensors dtype of another width": (
        edited_entry(EMBEDDING, "dtype", "F16"), UserInputError,
        rf"tensor '{EMBEDDING}': data_offsets \[\d+, \d+\] hold 3200 bytes, but shape "
        r"\[50, 16\] of F16 needs 1600"),
    "safetensors offsets overlapping": (changed_safetensors(overlapping), UserInputError,
                                        rf"tensor '{EMBEDDING}' \(data_offsets \[\d+, \d+\]\) "
                                        r"overlaps tensor 'transformer.mask_emb'"),
    "safetensors offsets outside": (changed_safetensors(outside), UserInputError,
                                    rf"tensor '{EMBEDDING}': data_offsets \[\d+, \d+\] lie "
                                    r"outside the \d+ bytes of tensor data"),
    "safetensors offsets swapped": (edited_entry(EMBEDDING, "data_offsets", [3200, 0]),
                                    UserInputError,
                                    rf"tensor '{EMBEDDING}': data_offsets \[3200, 0\] end "
                                    "before they begin"),
    "safetensors header size larger than the file": (
        changed_safetensors(lambda raw: struct.pack("<Q", len(raw)) + raw[8:]), UserInputError,
        r"header size \d+ exceeds the file's \d+ bytes after it"),
    "safetensors header size absurd": (
        changed_safetensors(lambda raw: struct.pack("<Q", 2**63) + raw[8:]), UserInputError,
        r"header size 9223372036854775808 is over the 100000000 bytes"),
    "safetensors shape with a string": (
        edited_entry(EMBEDDING, "shape", ["50", 16]), UserInputError,
        rf"tensor '{EMBEDDING}': shape \['50', 16\] is not a list of non-negative integers"),
    "safetensors shape with -1": (
        edited_entry(EMBEDDING, "shape", [-1, 16]), UserInputError,
        rf"tensor '{EMBEDDING}': shape \[-1, 16\] is not a list of non-negative integers"),
    "safetensors shape with a bool": (
        edited_entry(EMBEDDING, "shape", [50, True]), UserInputError,
        rf"tensor '{EMBEDDING}': shape \[50, True\] is not a list"),
    "safetensors unhashable dtype": (edited_entry(EMBEDDING, "dtype", ["F32"]), UserInputError,
                                     rf"tensor '{EMBEDDING}': dtype \['F32'\] is not one read "
                                     "here"),
    "safetensors entry not an object": (entry_replaced(EMBEDDING, ["F32", [50, 16]]),
                                        UserInputError,
                                        rf"tensor '{EMBEDDING}': its entry is \['F32', \[50, "
                                        r"16\]\], not an object"),
    "safetensors repeated tensor name": (changed_safetensors(repeated_name), UserInputError,
                                         rf"the safetensors header names '{EMBEDDING}' twice"),
    "safetensors metadata not strings": (entry_replaced("__metadata__", {"format": 1}),
                                         UserInputError,
                                         r"__metadata__ is \{'format': 1\}, not an object of "
                                         "strings"),
    "safetensors entry null": (entry_replaced(EMBEDDING, None), UserInputError,
                               rf"tensor '{EMBEDDING}': its entry is None, not an object"),
    "safetensors tensor removed (a hole)": (
        entry_removed("transformer.mask_emb"), UserInputError,
        rf"tensor '{EMBEDDING}' starts at \d+, leaving bytes \d+\.\.\d+ of the data after "
        r"tensor 'transformer.layer.1.rel_attn.v' unclaimed"),
    "safetensors per-layer bias of another dtype": (
        edited_entry("transformer.layer.1.rel_attn.r_w_bias", "dtype", "I32"), MISMATCH,
        r"unlike layer 0: transformer.layer.1.rel_attn.r_w_bias: int32 \[2, 8\], "
        r"transformer.layer.0.rel_attn.r_w_bias: float32 \[2, 8\]"),
    "safetensors per-layer bias of another shape": (
        edited_entry("transformer.layer.1.rel_attn.seg_embed", "shape", [2, 8, 2]), MISMATCH,
        r"unlike layer 0: transformer.layer.1.rel_attn.seg_embed: float32 \[2, 8, 2\], "
        r"transformer.layer.0.rel_attn.seg_embed: float32 \[2, 2, 8\]"),
    "shard index naming ../elsewhere": (
        sharded_with("../elsewhere/model.safetensors"), UserInputError,
        r"names '../elsewhere/model.safetensors', a path outside"),
    "shard index naming an absolute path": (sharded_with(absolute_shard), UserInputError,
                                            r"names '/\S+/elsewhere/model.safetensors', a path "
                                            "outside"),
    "shard linked out of the directory": (shard_linked_out, UserInputError,
                                          r"names 'model-00001-of-00002.safetensors', a path "
                                          "outside"),
    "shard missing": (shard_missing, UserInputError,
                      r"names the shard 'model-00002-of-00002.safetensors', which is not in"),
    "shard name not a string": (sharded_with(5), UserInputError,
                                rf"weight_map entry '{EMBEDDING}' is 5, not a shard file name"),
    "shard of another format": (sharded_with("model.bin"), UserInputError,
                                rf"weight_map entry '{EMBEDDING}' names 'model.bin', not a "
                                r".safetensors shard"),
    "tensor in two shards": (tensor_in_two_shards, UserInputError,
                             rf"{EMBEDDING} is in two shards, \S+model-00001-of-00002"
                             r".safetensors and \S+model-00002-of-00002.safetensors"),
    "bin storage size mismatch": (
        bin_directory(lambda entry: storage_with(entry, 4, entry.args[0].pid[4] + 1)),
        UserInputError, r"archive/data/\d+ holds 3200 bytes; the pickle says 801 elements"),
    "bin offset past the storage": (
        bin_directory(lambda entry: rebuilt_with(entry, 1, 1)), UserInputError,
        r"tensor of size \[50, 16\], stride \[16, 1\] at offset 1 reads past its 800 "
        "elements"),
    "bin negative stride": (bin_directory(lambda entry: rebuilt_with(entry, 3, (-16, 1))),
                            checkpoints.UnsafeCheckpointError,
                            r"negative size, stride or offset"),
    "bin size not an integer": (bin_directory(lambda entry: rebuilt_with(entry, 2, ("50", 16))),
                                checkpoints.UnsafeCheckpointError,
                                r"do not describe a tensor in a storage"),
    "bin unknown storage type": (
        bin_directory(lambda entry: storage_with(entry, 1, Global("torch", "BogusStorage"))),
        checkpoints.UnsafeCheckpointError, r"refused the pickled global torch.BogusStorage"),
    "bin integer storage where float": (
        bin_directory(lambda entry: storage_with(entry, 1, Global("torch", "IntStorage")),
                      name="transformer.layer.0.rel_attn.q"),
        MISMATCH, r"\(transformer.layer.0.rel_attn.q\) holds int32 values; the model's "
                  "variable is float32"),
    "bin shared storage described two ways": (
        bin_directory(lambda entry: storage_with(entry, 1, Global("torch", "IntStorage")),
                      name="lm_loss.weight"), UserInputError,
        r"storage '\d+' is described both as 800 elements of torch.FloatStorage and as 800 of "
        "torch.IntStorage"),
    "h5 integer dataset where float": (h5_directory(h5_int_dataset), MISMATCH,
                                       r"\(transformer/layer_._0/ff/layer_1/bias:0\) holds "
                                       "int32 values; the model's variable is float32"),
    "h5 non-standard float type": (h5_directory(h5_nonstandard_float), UserInputError,
                                   r"tfxl_net_lm_head_model/transformer/layer_._0/ff/layer_1/"
                                   r"bias:0 is stored in an HDF5 datatype that is none of "
                                   r"the standard IEEE floats or integers \(4 bytes"),
    "TF1 integer tensor where float": (original_directory(tf1_int_tensor), MISMATCH,
                                       r"model/transformer/mask_emb/mask_emb holds int32 "
                                       "values; the model's variable is float32"),
    "TF1 data byte flipped": (original_directory(tf1_data_flip), UserInputError,
                              r"cannot read model/\S+ \(.*[Cc]hecksum"),
    "config.json ff_activation a list": (config_with("ff_activation", ["gelu"]),
                                         UserInputError,
                                         r"ff_activation \['gelu'\] is not one of"),
    "config.json vocab_size a string": (config_with("vocab_size", "abc"), UserInputError,
                                        r"XLNetConfig.n_token must be a positive integer"),
    "config.json mem_len false": (config_with("mem_len", False), UserInputError,
                                  r"XLNetConfig.mem_len must be an integer"),
}


@pytest.mark.parametrize("case", sorted(NAMED_CASES))
def test_named_defect_is_refused_naming_the_file_and_the_entry(tmp_path, model, case):
  build, error_type, message = NAMED_CASES[case]
  directory = tmp_path / "checkpoint"
  named = build(directory)
  before = [variable.numpy() for variable in model.weights]
  if case.startswith("TF1"):
    load = lambda: checkpoints.load_original_checkpoint(model, named)
  else:
    load = lambda: checkpoints.load_huggingface_checkpoint(model, str(directory))
  with pytest.raises(UserInputError) as raised:
    load()
  assert type(raised.value) is error_type, raised.value
  text = str(raised.value)
  assert text.startswith(f"{named}: "), text
  assert re.search(message, text), text
  for variable, value in zip(model.weights, before):
    np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.path)


# The `safetensors` package (0.8) reads a header naming a tensor twice, keeping the last entry
# (its JSON parser does); this reader refuses it, as the other entry's bytes would go unread.
REFERENCE_READS = {"safetensors repeated tensor name"}


def test_the_reference_reader_agrees_on_the_named_safetensors_defects(tmp_path):
  """The `safetensors` package refuses what this reader refuses, but for REFERENCE_READS (and a
  dtype I32 header, which only the model's float variable tells apart)."""
  safetensors = pytest.importorskip("safetensors")
  for case, (build, error_type, _) in sorted(NAMED_CASES.items()):
    if not case.startswith("safetensors") or error_type is MISMATCH or case in REFERENCE_READS:
      continue
    path = build(tmp_path / case.replace(" ", "_"))
    with pytest.raises(safetensors.SafetensorError):
      with safetensors.safe_open(path, "np") as handle:
        for name in handle.keys():
          handle.get_tensor(name)
