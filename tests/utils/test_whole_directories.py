"""Directories placed whole (xlnet_tf/utils/whole_directories.py), without a model: new, over
an existing one (swapped, or two renames where the system has no exchange call), a failing
block, the run lock carried through a swap, a remote directory with its config copied last."""

import fcntl
import os

import pytest

from xlnet_tf.training import run_lock
from xlnet_tf.utils import files, whole_directories
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.whole_directories import staged_directory


def write_files(directory, names):
  for name in names:
    with open(os.path.join(directory, name), "w") as handle:
      handle.write(name)


def test_a_new_directory_appears_with_every_file(tmp_path):
  target = tmp_path / "a" / "b" / "model"
  with staged_directory(str(target)) as staging:
    write_files(staging, ["config.json", "weights"])
    assert not target.exists()
  assert sorted(os.listdir(target)) == ["config.json", "weights"]
  assert os.listdir(target.parent) == ["model"]


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two_renames"])
def test_an_existing_directory_is_replaced_whole(tmp_path, monkeypatch, exchange):
  if not exchange:
    monkeypatch.setattr(whole_directories, "_exchange", lambda first, second: False)
  target = tmp_path / "model"
  target.mkdir()
  write_files(str(target), ["config.json", "labels.json", "old_only"])
  with staged_directory(str(target)) as staging:
    write_files(staging, ["config.json"])
  assert os.listdir(target) == ["config.json"]
  assert os.listdir(tmp_path) == ["model"]  # no work folder, no old directory set aside


def test_a_failing_block_leaves_the_old_directory_and_no_folder_it_made(tmp_path):
  with pytest.raises(RuntimeError):
    with staged_directory(str(tmp_path / "new" / "model")) as staging:
      write_files(staging, ["config.json"])
      raise RuntimeError("the write failed")
  assert os.listdir(tmp_path) == []
  (tmp_path / "model").mkdir()
  write_files(str(tmp_path / "model"), ["config.json"])
  with pytest.raises(RuntimeError):
    with staged_directory(str(tmp_path / "model")) as staging:
      raise RuntimeError("the write failed")
  assert os.listdir(tmp_path) == ["model"] and os.listdir(tmp_path / "model") == ["config.json"]


def test_a_file_where_the_directory_goes_is_refused(tmp_path):
  (tmp_path / "model").write_text("a file")
  with pytest.raises(UserInputError, match=r"model: exists and is not a directory"):
    with staged_directory(str(tmp_path / "model")):
      pass


def test_the_run_lock_holds_through_a_swap(tmp_path):
  """A run holding best/'s lock saves a new best/ over it: the lock file of the new directory
  is the one it holds (a hard link), so another run is still refused."""
  target = str(tmp_path / "best")
  with run_lock.hold(target):
    for _ in range(2):
      with staged_directory(target) as staging:
        write_files(staging, ["config.json"])
    lock_path = os.path.join(target, run_lock.LOCK_FILE)
    with open(lock_path) as handle:
      with pytest.raises(BlockingIOError):  # held by this process's open file description
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
  assert os.listdir(target) == ["config.json"]  # the lock removed when the run ended


def test_a_remote_directory_is_replaced_with_its_marker_file_last(monkeypatch):
  target = "ram://whole_directories_test/model"
  files.makedirs(target)
  files.write_text(files.join(target, "labels.json"), "[]")
  copied = []
  copy = files.copy
  monkeypatch.setattr(files, "copy", lambda source, to: copied.append(
      os.path.basename(to)) or copy(source, to))
  with staged_directory(target, last="config.json") as staging:
    write_files(staging, ["config.json", "weights", "head.json"])
  assert copied[-1] == "config.json" and sorted(copied) == ["config.json", "head.json", "weights"]
  assert sorted(files.listdir(target)) == ["config.json", "head.json", "weights"]
  files.rmtree("ram://whole_directories_test")
