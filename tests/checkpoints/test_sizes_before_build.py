"""Sizes a config states are believed only once the weights file confirms them: a config or
head whose sizes the weights do not hold (a huge n_layer, num_classes, num_labels, each within
the per-tensor limit) is one CheckpointMismatchError naming both files, raised before any
model is built (building such a model took minutes, or the memory)."""

import json
import os
import shutil

import numpy as np
import pytest

from checkpoint_files import convert_checkpoint
from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
from xlnet_tf.checkpoints import CheckpointMismatchError
from xlnet_tf.modeling import backbone


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
  """{layout: directory} of one tiny classifier (own) and its backbone (huggingface,
  original)."""
  root = tmp_path_factory.mktemp("layouts")
  head = XLNetClassifier(XLNetConfig.preset("tiny"), num_classes=2)
  head({"input_ids": np.zeros([2, 4], np.int32)})
  head.save_pretrained(str(root / "own"))
  head.backbone.save_pretrained(str(root / "backbone"))
  for layout in ("huggingface", "original"):
    convert_checkpoint(str(root / "backbone"), "own", str(root / layout), layout)
  return root


def edit_json(path, **changes):
  with open(path) as handle:
    values = json.load(handle)
  values.update(changes)
  with open(path, "w") as handle:
    json.dump(values, handle)


@pytest.fixture
def no_model_built(monkeypatch):
  """Building a backbone fails the test: the check must come first."""
  def refuse(*args, **kwargs):
    raise AssertionError("a model was built before the sizes were checked")
  monkeypatch.setattr(backbone.XLNetModel, "__init__", refuse)


# (layout, the file changed, its changes, the class loading it, the weights file named)
CASES = {
    "own n_layer": ("own", "xlnet_config.json", {"n_layer": 50_000}, XLNetModel,
                    "model.weights.h5"),
    "own num_classes": ("own", "head.json", {"num_classes": 10**8}, XLNetClassifier,
                        "model.weights.h5"),
    "huggingface n_layer": ("huggingface", "config.json", {"n_layer": 50_000}, XLNetModel,
                            "model.safetensors"),
    "huggingface num_labels": ("huggingface", "config.json",
                               {"architectures": ["XLNetForSequenceClassification"],
                                "num_labels": 10**8}, XLNetClassifier, "model.safetensors"),
    "original d_inner": ("original", "xlnet_config.json", {"d_inner": 10**6}, XLNetModel,
                         "xlnet_model.ckpt"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sizes_the_weights_do_not_hold_are_refused_before_building(layouts, tmp_path,
                                                                   no_model_built, case):
  layout, name, changes, loader, weights = CASES[case]
  directory = tmp_path / layout
  shutil.copytree(layouts / layout, directory)
  edit_json(directory / name, **changes)
  with pytest.raises(CheckpointMismatchError) as raised:
    loader.from_pretrained(str(directory))
  message = str(raised.value)
  assert message.startswith(f"{directory / name}: n_token 1000, "), message
  assert f"but {directory / weights} holds " in message
  assert message.endswith("the config does not describe these weights")


@pytest.mark.parametrize("layout", ["huggingface", "original"])
def test_conversion_refuses_them_before_building_too(layouts, tmp_path, no_model_built, layout):
  directory = tmp_path / layout
  shutil.copytree(layouts / layout, directory)
  name = "config.json" if layout == "huggingface" else "xlnet_config.json"
  edit_json(directory / name, n_layer=50_000)
  with pytest.raises(CheckpointMismatchError, match="need at least 409,632,000 weight values"):
    convert_checkpoint(str(directory), layout, str(tmp_path / "out"), "own")
  assert not os.path.exists(tmp_path / "out")
