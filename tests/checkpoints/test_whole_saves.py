"""save_pretrained writes a directory whole or not at all (xlnet_tf/checkpoints/own.py over
xlnet_tf/utils/whole_directories.py): a process killed at any byte of the save leaves the old
model or none, never a mix; a save over a model replaces every file of it; a full disk or a
read-only mount is an OSError naming the file, with nothing left behind; an existing directory
of other files is refused, not replaced."""

import errno
import os

import keras
import numpy as np
import pytest

from cli_output import ROOT
from forked_tools import run_forked
from mounts import fill, small_tmpfs
from xlnet_tf import XLNetClassifier, XLNetConfig
from xlnet_tf.utils.errors import UserInputError, file_system_fault

SAVE_RUN = os.path.join(ROOT, "tests", "checkpoints", "save_model_run.py")


def tiny_classifier(seed, labels=None):
  """The classifier save_model_run.py builds from `seed` (the same weights)."""
  keras.utils.set_random_seed(seed)
  head = XLNetClassifier(XLNetConfig.preset("tiny"), num_classes=2)
  head({"input_ids": np.zeros([2, 4], np.int32)})
  head.labels = labels
  return head


def assert_holds(directory, model):
  """`directory` loads back as `model`: its weights, and its labels (or none)."""
  loaded = XLNetClassifier.from_pretrained(str(directory))
  for mine, theirs in zip(model.get_weights(), loaded.get_weights()):
    np.testing.assert_array_equal(mine, theirs)
  assert loaded.labels == model.labels


def work_folders(parent):
  return [name for name in os.listdir(parent) if ".partial-" in name]


# Byte limits of any one file: inside xlnet_config.json (about 350 bytes, written first), the
# weights' middle and last page (model.weights.h5: about 290 kB).
KILL_OFFSETS = (200, 150_000, 288_000)


@pytest.mark.parametrize("over_existing", [False, True], ids=["new", "over_existing"])
def test_a_save_killed_at_any_byte_leaves_the_old_model_or_none(tmp_path, over_existing):
  directory = tmp_path / "model"
  old = tiny_classifier(seed=1, labels=["yes", "no"])
  if over_existing:
    old.save_pretrained(str(directory))
  for limit in KILL_OFFSETS:
    result = run_forked([SAVE_RUN, str(directory), "2", str(limit)])
    assert result.returncode != 0 and "saved" not in result.stdout, (limit, result.stderr)
    if over_existing:
      assert sorted(os.listdir(directory)) == ["head.json", "labels.json", "model.weights.h5",
                                               "xlnet_config.json"], limit
      assert_holds(directory, old)
    else:
      assert not directory.exists(), limit
    assert len(work_folders(tmp_path)) == 1, limit  # the killed save's: cleared by the next
  # The next save clears what the killed ones left and puts the new model in whole: no file of
  # the old one (its labels.json) survives beside the new weights.
  new = tiny_classifier(seed=2)
  new.save_pretrained(str(directory))
  assert_holds(directory, new)
  assert sorted(os.listdir(directory)) == ["head.json", "model.weights.h5", "xlnet_config.json"]
  assert work_folders(tmp_path) == []


def test_an_unlabelled_save_over_a_labelled_one_leaves_no_labels(tmp_path):
  tiny_classifier(seed=1, labels=["yes", "no"]).save_pretrained(str(tmp_path / "model"))
  new = tiny_classifier(seed=2)
  new.save_pretrained(str(tmp_path / "model"))
  assert XLNetClassifier.from_pretrained(str(tmp_path / "model")).labels is None
  assert_holds(tmp_path / "model", new)


def test_a_directory_of_other_files_is_refused_not_replaced(tmp_path):
  (tmp_path / "notes").mkdir()
  (tmp_path / "notes" / "thesis.tex").write_text("months of work")
  with pytest.raises(UserInputError, match=r"notes: holds files that are not a model's "
                     r"\(thesis.tex\)"):
    tiny_classifier(seed=1).save_pretrained(str(tmp_path / "notes"))
  assert os.listdir(tmp_path / "notes") == ["thesis.tex"]


def test_a_full_disk_is_one_error_naming_the_file_and_leaves_nothing(tmp_path):
  """h5py writing to a full disk crashed the interpreter (its File.close, a segmentation
  fault); the weights are built in memory, so the fault is an OSError naming the file."""
  with small_tmpfs(tmp_path / "disk", size_kb=512) as disk:
    fill(disk, leave_bytes=64 * 1024)
    with pytest.raises(OSError) as raised:
      tiny_classifier(seed=1).save_pretrained(os.path.join(disk, "model"))
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == os.path.join(disk, "model", "model.weights.h5")
    assert file_system_fault(raised.value) == (
        f"{disk}/model/model.weights.h5: no space left on the device; free some, or write "
        "elsewhere")
    assert sorted(os.listdir(disk)) == ["filler"]


def test_a_full_disk_over_an_existing_model_keeps_it(tmp_path):
  old = tiny_classifier(seed=1, labels=["yes", "no"])
  with small_tmpfs(tmp_path / "disk", size_kb=1024) as disk:
    directory = os.path.join(disk, "model")
    old.save_pretrained(directory)
    fill(disk, leave_bytes=64 * 1024)
    with pytest.raises(OSError, match="No space left"):
      tiny_classifier(seed=2).save_pretrained(directory)
    assert_holds(directory, old)
    assert sorted(os.listdir(disk)) == ["filler", "model"]


def test_a_read_only_file_system_is_one_error_naming_the_directory(tmp_path):
  with small_tmpfs(tmp_path / "disk", size_kb=256, read_only=True) as disk:
    with pytest.raises(OSError) as raised:
      tiny_classifier(seed=1).save_pretrained(os.path.join(disk, "model"))
    assert raised.value.errno == errno.EROFS
    assert file_system_fault(raised.value).startswith(f"{disk}/model")
    assert file_system_fault(raised.value).endswith("a read-only file system; write elsewhere")
    assert os.listdir(disk) == []
