"""Placing a version directory (xlnet_tf/serving/version_directories.py) without an export:
the swap without renameat2, a block that fails, a remote base. The exports themselves, watched
by a poller: tests/serving/test_saved_model.py."""

import os
import uuid

import pytest

from xlnet_tf.serving.version_directories import staged_version
from xlnet_tf.utils import files, whole_directories
from xlnet_tf.utils.errors import UserInputError


def write_version(folder, text):
  os.makedirs(os.path.join(folder, "variables"), exist_ok=True)
  files.write_text(os.path.join(folder, "variables", "variables.index"), text)
  files.write_text(os.path.join(folder, "saved_model.pb"), text)


def test_overwrite_without_an_exchange_call_renames_the_old_version_aside(tmp_path, monkeypatch):
  monkeypatch.setattr(whole_directories, "_exchange", lambda first, second: False)
  version = tmp_path / "m" / "1"
  write_version(str(version), "old")
  with staged_version(str(version), overwrite=True) as staging:
    write_version(staging, "new")
  assert os.listdir(tmp_path / "m") == ["1"]  # no work folder, no old version aside
  assert (version / "saved_model.pb").read_text() == "new"


def test_a_failing_block_leaves_no_version_work_folder_or_folder_it_made(tmp_path):
  version = tmp_path / "base" / "m" / "7"
  with pytest.raises(RuntimeError, match="midway"):
    with staged_version(str(version)) as staging:
      write_version(staging, "half")
      assert os.path.basename(staging).startswith(".export-7-")
      raise RuntimeError("midway")
  assert os.listdir(tmp_path) == []
  (tmp_path / "kept" / "m").mkdir(parents=True)  # folders that were there stay
  with pytest.raises(RuntimeError):
    with staged_version(str(tmp_path / "kept" / "m" / "7")):
      raise RuntimeError("midway")
  assert os.listdir(tmp_path / "kept" / "m") == []


def test_a_remote_version_is_copied_with_the_saved_model_last_and_never_replaced(monkeypatch):
  base = f"ram://versions-{uuid.uuid4().hex}/m"
  copied = []
  copy = files.copy
  monkeypatch.setattr(files, "copy", lambda source, target: copied.append(target) or copy(
      source, target))
  with staged_version(f"{base}/1") as staging:
    write_version(staging, "new")
    os.makedirs(os.path.join(staging, "assets"))
    files.write_text(os.path.join(staging, "assets", "spiece.model"), "pieces")
  assert copied[-1] == f"{base}/1/saved_model.pb" and len(copied) == 3
  for overwrite in (False, True):
    with pytest.raises(UserInputError, match=rf"^{base}/1: version 1 exists"):
      with staged_version(f"{base}/1", overwrite=overwrite):
        pass
  # A copy that fails removes what it copied.
  monkeypatch.setattr(files, "copy", lambda source, target: (_ for _ in ()).throw(
      OSError(28, "No space left on device")) if target.endswith(".pb") else copy(source, target))
  with pytest.raises(OSError, match="No space left"):
    with staged_version(f"{base}/2") as staging:
      write_version(staging, "new")
  assert not files.exists(f"{base}/2")
