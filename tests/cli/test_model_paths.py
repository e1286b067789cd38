"""One rule for which names are a model, and in which layout (checkpoints.pretrained.locate):
from_pretrained and the command-line tools' model flags (xlnet_tf/cli/pretrained_flags.py) give
the same verdict for every shape of path: a directory of each layout, a TF1 checkpoint prefix
(the original scripts' --init_checkpoint=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt), a
directory holding a TF1 checkpoint without its config, a missing path, a file of the wrong
kind, a directory of no known layout, a hub id cached or not."""

import os
import shutil

import numpy as np
import pytest

from checkpoint_files import HUB_COMMIT, convert_checkpoint, write_hub_cache
from cli_output import run_tool
from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetModel, XLNetPretrainer, checkpoints
from xlnet_tf.checkpoints import pretrained
from xlnet_tf.checkpoints.huggingface_writer import save_huggingface_checkpoint
from xlnet_tf.cli import pretrained_flags
from xlnet_tf.utils.errors import UserInputError

CACHED_HUB_ID = "xlnet-tests/tiny-paths"
ABSENT_HUB_ID = "xlnet-tests/absent-paths"


@pytest.fixture(scope="module")
def model_paths(tmp_path_factory):
  """Two tiny pretrained language models of different weights (`first`, `second`) and the
  paths of every shape under `root`; original/ holds both as TF1 checkpoints, its `checkpoint`
  file naming the second (the latest), as a training run leaves them."""
  root = tmp_path_factory.mktemp("model_paths")
  first = XLNetPretrainer(XLNetModel(tiny_config()))
  second = XLNetPretrainer(XLNetModel(tiny_config()))
  randomize_weights(first, seed=1)
  randomize_weights(second, seed=2)
  first.save_pretrained(str(root / "own"))
  save_huggingface_checkpoint(first, str(root / "huggingface"))
  checkpoints.save_original_checkpoint(first, str(root / "original" / "xlnet_model.ckpt"))
  checkpoints.save_original_checkpoint(second, str(root / "original" / "later.ckpt"))
  first.backbone.config.to_json_file(str(root / "original" / "xlnet_config.json"),
                                     original_keys_only=True)
  checkpoints.save_original_checkpoint(first, str(root / "no_config" / "xlnet_model.ckpt"))
  (root / "bert").mkdir()
  (root / "bert" / "bert_config.json").write_text('{"hidden_size": 32}')
  cache = root / "hf_home" / "hub"
  write_hub_cache(cache, CACHED_HUB_ID, sorted((root / "huggingface").iterdir()))
  return {"root": root, "first": first, "second": second, "cache": cache}


@pytest.fixture
def offline_hub(model_paths, monkeypatch):
  """huggingface_hub reads the test's cache, offline (no network is touched)."""
  from huggingface_hub import constants
  cache = str(model_paths["cache"])
  monkeypatch.setenv("HF_HUB_CACHE", cache)
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  # huggingface_hub reads the variables once, on import (earlier in this process, maybe).
  monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)
  monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


SNAPSHOT = os.path.join("hf_home", "hub", "models--xlnet-tests--tiny-paths", "snapshots",
                        HUB_COMMIT)
# name (relative to the root, or a hub id) -> (layout, directory relative to the root, prefix),
# or (error class, the message's start after "<name>: ").
CASES = {
    "own directory": ("own", ("own", "own", None)),
    "huggingface directory": ("huggingface", ("huggingface", "huggingface", None)),
    "original directory": ("original", ("original", "original", None)),
    "TF1 checkpoint prefix": ("original/xlnet_model.ckpt",
                              ("original", "original", "original/xlnet_model.ckpt")),
    "TF1 checkpoint without its config": ("no_config", ("original", "no_config", None)),
    "its prefix": ("no_config/xlnet_model.ckpt",
                   ("original", "no_config", "no_config/xlnet_model.ckpt")),
    "missing directory": ("none", (FileNotFoundError, "no such directory; expected a "
                                   "directory holding xlnet_tf's own files")),
    "missing prefix": ("original/absent.ckpt", (FileNotFoundError, "no such directory")),
    "file of the wrong kind": ("original/xlnet_model.ckpt.index",
                               (UserInputError, "a file; expected a directory holding")),
    "directory of no known layout": ("bert", (UserInputError, "not a pretrained XLNet "
                                              "directory; expected")),
    "cached hub id": (CACHED_HUB_ID, ("huggingface", SNAPSHOT, None)),
    "hub id not cached": (ABSENT_HUB_ID, (FileNotFoundError, "no such directory")),
}


def verdict(locate, name):
  """(layout, directory, prefix) that `locate` gives `name`, or (error class, message)."""
  try:
    place = locate(name)
  except (FileNotFoundError, UserInputError) as error:
    return type(error), str(error)
  return place.layout, os.path.realpath(place.directory), place.prefix


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_library_and_the_commands_give_one_verdict(model_paths, offline_hub, case):
  root = model_paths["root"]
  name, expected = CASES[case]
  name = name if name.startswith("xlnet-tests/") else str(root / name)
  library = verdict(pretrained.locate, name)  # what from_pretrained reads
  # --model_dir, --input; the fine-tuning commands' --init_checkpoint calls locate itself
  # (xlnet_tf/tasks/pretrained_model.py).
  command_line = verdict(pretrained_flags.located, name)
  assert library == command_line
  if isinstance(expected[0], str):
    layout, directory, prefix = expected
    assert library == (layout, os.path.realpath(root / directory),
                       prefix and str(root / prefix))
  else:
    error, message = expected
    assert library[0] is error and library[1].startswith(f"{name}: {message}"), library


def test_a_prefix_loads_the_checkpoint_it_names(model_paths, tmp_path, rng):
  """from_pretrained of the prefix reads that checkpoint, of the directory the latest (the
  `checkpoint` file's); so do the LM tools' --model_dir (the LM head's weights too) and
  run/convert_checkpoint.py --input. A prefix whose config is not beside it: from_pretrained
  says what is missing; the conversion takes the config apart."""
  root = model_paths["root"]
  first, second = model_paths["first"].backbone, model_paths["second"].backbone
  batch = padded_pair_batch(rng, 3, 8, 50, pad_lengths=[0, 2, 1])

  def assert_same(model, expected):
    np.testing.assert_array_equal(model(batch)["sequence_output"].numpy(),
                                  expected(batch)["sequence_output"].numpy())
  assert_same(XLNetModel.from_pretrained(str(root / "original" / "xlnet_model.ckpt")), first)
  assert_same(XLNetModel.from_pretrained(str(root / "original")), second)
  assert not np.array_equal(first(batch)["sequence_output"], second(batch)["sequence_output"])
  lm = pretrained_flags.stored_head(pretrained_flags.located(
      str(root / "original" / "xlnet_model.ckpt")), XLNetPretrainer, "model_dir")
  np.testing.assert_array_equal(lm.lm_bias.numpy(), model_paths["first"].lm_bias.numpy())
  assert_same(lm.backbone, first)
  result = run_tool("run/convert_checkpoint.py", f"--input={root}/original/xlnet_model.ckpt",
                    f"--output={tmp_path}/converted")
  assert result.returncode == 0, result.stderr[-3000:]
  assert_same(XLNetModel.from_pretrained(str(tmp_path / "converted")), first)
  prefix = str(root / "no_config" / "xlnet_model.ckpt")
  with pytest.raises(FileNotFoundError, match=rf"^{prefix}: a TF1 checkpoint without "
                     r"xlnet_config.json beside it \(.*no_config holds: checkpoint, "
                     r"xlnet_model.ckpt.data-00000-of-00001, xlnet_model.ckpt.index\); put the "
                     r"model's xlnet_config.json there \(the command-line tools also take it "
                     r"as --model_config\)$"):
    XLNetModel.from_pretrained(prefix)
  # The conversion (--config_file) and the fine-tuning tools (--model_config) take it apart.
  shutil.copy(root / "original" / "xlnet_config.json", tmp_path / "config.json")
  convert_checkpoint(prefix, "original", str(tmp_path / "from_prefix"),
                     config_file=str(tmp_path / "config.json"))
  assert_same(XLNetModel.from_pretrained(str(tmp_path / "from_prefix")), first)
