"""The own format's readers trust nothing they read: random mutations of a saved classifier's
model.weights.h5 (bytes flipped, the file cut at any offset) and of its xlnet_config.json,
head.json and labels.json (fields changed to other types, sizes, names). Every mutation loads
the weights the file holds, or raises a UserInputError naming the file, the model untouched;
never another exception, never other weights.

HDF5 keeps no checksum of its data: a byte flipped inside a dataset's values is read as that
value (as in any format without one); the test computes which values that changes and checks
exactly those were loaded (or the load refused, e.g. a flip that made a NaN)."""

import collections
import json
import os
import random
import shutil

import h5py
import keras
import numpy as np
import pytest

from xlnet_tf import XLNetClassifier, XLNetConfig
from xlnet_tf.checkpoints.own import WEIGHTS_FILE
from xlnet_tf.utils.errors import UserInputError

CONFIG = dict(n_token=60, n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=24,
              ff_activation="gelu", untie_r=True)
WEIGHT_MUTATIONS = 100


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """(directory, the classifier saved there)."""
  keras.utils.set_random_seed(0)
  head = XLNetClassifier(XLNetConfig(**CONFIG), num_classes=3)
  head({"input_ids": np.zeros([2, 4], np.int32)})
  head.labels = ["a", "b", "c"]
  directory = str(tmp_path_factory.mktemp("own") / "model")
  head.save_pretrained(directory)
  return directory, head


def dataset_regions(path):
  """[(byte offset, dtype, shape)] of every dataset's contiguous values in an HDF5 file."""
  regions = []
  with h5py.File(path, "r") as handle:
    handle.visititems(lambda name, node: regions.append(
        (node.id.get_offset(), node.dtype, node.shape)) if isinstance(node, h5py.Dataset)
        else None)
  return regions


def values_in(data, regions):
  """The datasets' values as the bytes `data` hold them at their offsets, as a multiset."""
  arrays = [np.frombuffer(bytes(data[offset:offset + int(np.prod(shape)) * dtype.itemsize]),
                          dtype).reshape(shape) for offset, dtype, shape in regions]
  return as_multiset(arrays)


def as_multiset(arrays):
  return collections.Counter((array.shape, np.asarray(array, np.float32).tobytes())
                             for array in arrays)


def load_outcome(directory, reference):
  """'loaded' with the weights as a multiset, or 'refused' after checking the error names a
  file of `directory` and `reference` (a model loaded before) kept its weights."""
  before = [weight.copy() for weight in reference.get_weights()]
  try:
    loaded = XLNetClassifier.from_pretrained(directory)
  except UserInputError as error:
    assert directory in str(error), error
    assert "\n" not in str(error).split("nothing was loaded:")[0], error
    for kept, weight in zip(before, reference.get_weights()):
      np.testing.assert_array_equal(kept, weight)
    return "refused", None
  return "loaded", loaded


def test_weights_file_mutations_load_what_the_file_holds_or_name_it(saved, tmp_path):
  source, head = saved
  weights_path = os.path.join(source, WEIGHTS_FILE)
  with open(weights_path, "rb") as handle:
    original = handle.read()
  regions = dataset_regions(weights_path)
  rng = random.Random(0)
  counts = collections.Counter()
  for index in range(WEIGHT_MUTATIONS):
    data = bytearray(original)
    if rng.random() < 0.5:
      kind = "flipped"
      for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    else:
      kind = "cut"
      data = data[:rng.randrange(len(data))]
    directory = str(tmp_path / f"mutation_{index}")
    shutil.copytree(source, directory)
    with open(os.path.join(directory, WEIGHTS_FILE), "wb") as handle:
      handle.write(data)
    outcome, loaded = load_outcome(directory, head)
    if outcome == "loaded":
      assert kind == "flipped", "a file cut short was loaded"
      assert as_multiset(loaded.get_weights()) == values_in(data, regions), index
      outcome += " as held" if values_in(data, regions) != values_in(original, regions) \
          else " unchanged"
    counts[f"{kind}: {outcome}"] += 1
    shutil.rmtree(directory)
  print(f"model.weights.h5: {WEIGHT_MUTATIONS} mutations: {dict(sorted(counts.items()))}")
  assert counts["cut: refused"] > 0 and counts["flipped: refused"] > 0


# (file, what is done to its JSON value): each must be refused naming a file of the directory
# (the file changed, or the weights file the changed sizes do not describe).
def set_field(key, value):
  def mutate(stored):
    stored[key] = value
    return stored
  return mutate


JSON_MUTATIONS = {
    "config n_layer huge": ("xlnet_config.json", set_field("n_layer", 100_000)),
    "config n_token huge": ("xlnet_config.json", set_field("n_token", 50_000_000)),
    "config d_model a string": ("xlnet_config.json", set_field("d_model", "16")),
    "config d_head negative": ("xlnet_config.json", set_field("d_head", -8)),
    "config n_head a list": ("xlnet_config.json", set_field("n_head", [2])),
    "config untie_r a number": ("xlnet_config.json", set_field("untie_r", 3)),
    "config ff_activation unknown": ("xlnet_config.json", set_field("ff_activation", "swish9")),
    "config d_inner other": ("xlnet_config.json", set_field("d_inner", 32)),
    "config a list": ("xlnet_config.json", lambda stored: [stored]),
    "head num_classes huge": ("head.json", set_field("num_classes", 10**8)),
    "head num_classes other": ("head.json", set_field("num_classes", 4)),
    "head num_classes negative": ("head.json", set_field("num_classes", -3)),
    "head num_classes a string": ("head.json", set_field("num_classes", "3")),
    "head class unknown": ("head.json", set_field("class", "XLNetRanker")),
    "head class a number": ("head.json", set_field("class", 7)),
    "head unknown argument": ("head.json", set_field("temperature", 2.0)),
    "head summary_type unknown": ("head.json", set_field("summary_type", "median")),
    "head a string": ("head.json", lambda stored: "XLNetClassifier"),
    "labels too few": ("labels.json", lambda stored: stored[:2]),
    "labels not strings": ("labels.json", lambda stored: [1, 2, 3]),
    "labels an object": ("labels.json", lambda stored: {"0": "a"}),
}


@pytest.mark.parametrize("case", sorted(JSON_MUTATIONS))
def test_a_changed_json_file_is_refused_naming_it(saved, tmp_path, case):
  source, head = saved
  name, mutate = JSON_MUTATIONS[case]
  directory = str(tmp_path / "model")
  shutil.copytree(source, directory)
  path = os.path.join(directory, name)
  with open(path) as handle:
    stored = json.load(handle)
  with open(path, "w") as handle:
    json.dump(mutate(stored), handle)
  with pytest.raises(UserInputError) as raised:
    XLNetClassifier.from_pretrained(directory)
  assert directory in str(raised.value), raised.value


@pytest.mark.parametrize("name", ["xlnet_config.json", "head.json", "labels.json"])
def test_json_files_cut_or_flipped_load_as_saved_or_name_the_file(saved, tmp_path, name):
  source, head = saved
  with open(os.path.join(source, name), "rb") as handle:
    original = handle.read()
  rng = random.Random(name)
  counts = collections.Counter()
  for index in range(25):
    data = bytearray(original)
    if index % 2:
      data = data[:rng.randrange(len(data))]
    else:
      data[rng.randrange(len(data))] = rng.randrange(256)
    directory = str(tmp_path / f"mutation_{index}")
    shutil.copytree(source, directory)
    with open(os.path.join(directory, name), "wb") as handle:
      handle.write(data)
    outcome, loaded = load_outcome(directory, head)
    if loaded is not None:  # e.g. a space changed, or a letter of a label: what it holds
      assert as_multiset(loaded.get_weights()) == as_multiset(head.get_weights())
      if name == "labels.json":
        assert loaded.labels == json.loads(bytes(data))
    counts[outcome] += 1
    shutil.rmtree(directory)
  print(f"{name}: 25 mutations: {dict(counts)}")
