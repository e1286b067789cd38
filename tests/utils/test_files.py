"""utils.files: local paths as the standard library treats them, remote ones (TensorFlow's
in-memory ram:// file system here, as gs:// would be) through tf.io.gfile, with the same
errors; nothing of a remote path ever appears on local disk."""

import os
import tempfile
import uuid

import pytest

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json, read_json_object, write_json
from xlnet_tf.utils.temporary_folders import temporary_folder


@pytest.fixture
def remote(tmp_path, monkeypatch):
  """A fresh ram:// root, with the working directory an empty folder that must stay empty."""
  monkeypatch.chdir(tmp_path)
  yield f"ram://files-{uuid.uuid4().hex}"
  assert os.listdir(tmp_path) == []  # no local `ram:` folder


def test_which_paths_are_remote():
  assert files.is_remote("gs://bucket/model") and files.is_remote("ram://x")
  assert files.is_remote("s3://b/k") and files.is_remote("hdfs://namenode/x")
  assert not files.is_remote("/tmp/model") and not files.is_remote("model/best")
  assert not files.is_remote("C:/model") and not files.is_remote("")
  assert files.absolute("gs://bucket/a") == "gs://bucket/a"
  assert files.absolute("a") == os.path.abspath("a")


def test_directories_files_and_listing(remote):
  files.makedirs(f"{remote}/a/b")
  files.makedirs(f"{remote}/a/b")  # exists already: no error
  assert files.isdir(f"{remote}/a/b") and not files.isfile(f"{remote}/a/b")
  files.write_text(f"{remote}/a/b/x.txt", "one\ntwo\n")
  files.write_bytes(f"{remote}/a/y.bin", b"\0\1")
  assert files.isfile(f"{remote}/a/b/x.txt") and files.exists(f"{remote}/a/y.bin")
  assert sorted(files.listdir(f"{remote}/a")) == ["b", "y.bin"]
  assert files.getsize(f"{remote}/a/b/x.txt") == 8
  assert files.glob(f"{remote}/a/b/*.txt") == [f"{remote}/a/b/x.txt"]
  assert files.read_bytes(f"{remote}/a/y.bin") == b"\0\1"
  files.rmtree(f"{remote}/a/b")
  assert not files.exists(f"{remote}/a/b/x.txt") and files.exists(f"{remote}/a/y.bin")


def test_text_reads_as_open_reads_it(remote, tmp_path):
  """Universal newlines, the encoding and its errors, as `open` gives them locally."""
  content = "caf\u00e9\r\nline two\rend".encode("utf-8")
  local, far = str(tmp_path / "text.txt"), f"{remote}/text.txt"
  for path in (local, far):
    files.write_bytes(path, content)
  for path in (local, far):
    with files.open_file(path) as handle:
      assert handle.read() == "caf\u00e9\nline two\nend"
    with files.open_file(path, newline="") as handle:
      assert handle.readlines() == ["caf\u00e9\r\n", "line two\r", "end"]
  os.remove(local)
  files.write_bytes(far, b"\xff bad")
  with files.open_file(far, errors="strict") as handle, pytest.raises(UnicodeDecodeError):
    handle.read()


def test_binary_reads_seek_and_go_line_by_line(remote):
  path = files.write_bytes(f"{remote}/lines.txt", b"first\nsecond\nthird\n")
  with files.open_file(path, "rb") as handle:
    handle.seek(6)
    assert handle.read(3) == b"sec" and handle.readline() == b"ond\n"
  with files.open_file(path, "rb") as handle:
    assert list(handle) == [b"first\n", b"second\n", b"third\n"]


@pytest.mark.parametrize("call", [files.read_bytes, files.read_text, files.getsize,
                                  files.remove, files.rmtree, files.listdir,
                                  lambda path: files.copy(path, path + ".copy")])
def test_a_missing_remote_path_is_file_not_found(remote, call):
  with pytest.raises(FileNotFoundError, match=f"No such file or directory: '{remote}/none'"):
    call(f"{remote}/none")


def test_copy_and_move_between_file_systems(remote, tmp_path):
  local = str(tmp_path / "a.bin")
  with open(local, "wb") as handle:
    handle.write(b"payload")
  files.copy(local, f"{remote}/copy.bin")
  files.move(local, f"{remote}/moved.bin")  # local -> remote: copied, then removed here
  assert not os.path.exists(local)
  files.move(f"{remote}/moved.bin", f"{remote}/renamed.bin")
  assert not files.exists(f"{remote}/moved.bin")
  files.copy(f"{remote}/renamed.bin", str(tmp_path / "back.bin"))
  with open(tmp_path / "back.bin", "rb") as handle:
    assert handle.read() == b"payload" == files.read_bytes(f"{remote}/copy.bin")
  os.remove(tmp_path / "back.bin")


def test_copy_tree_and_local_copy(remote, tmp_path):
  source = tmp_path / "tree"
  (source / "inner").mkdir(parents=True)
  (source / "top.txt").write_text("top")
  (source / "inner" / "deep.txt").write_text("deep")
  files.copy_tree(str(source), f"{remote}/tree")
  assert files.read_text(f"{remote}/tree/inner/deep.txt") == "deep"
  with files.local_copy(f"{remote}/tree/top.txt") as local:
    assert not files.is_remote(local) and open(local).read() == "top"
  assert not os.path.exists(local)  # the temporary copy is gone
  with files.local_copy(str(source / "top.txt")) as local:
    assert local == str(source / "top.txt")  # a local file is its own copy
  files.rmtree(str(source))


def test_json_files_on_a_remote_path(remote):
  path = write_json(f"{remote}/deep/folder/values.json", {"b": 1, "a": [1.5]}, sort_keys=True)
  assert read_json(path) == {"a": [1.5], "b": 1}
  assert read_json_object(path) == {"a": [1.5], "b": 1}
  assert files.read_text(path) == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'
  files.write_text(f"{remote}/list.json", "[1]")
  with pytest.raises(ValueError, match=f"{remote}/list.json: expected a JSON object"):
    read_json_object(f"{remote}/list.json")


def test_makedirs_never_makes_a_local_scheme_folder(remote):
  """os.makedirs("ram://x") makes a local folder named `ram:`; files.makedirs does not."""
  files.makedirs(f"{remote}/made")
  assert files.isdir(f"{remote}/made")
  # (the fixture checks that the working directory stayed empty)


def test_a_remote_parent_builds_in_a_local_temporary_folder(remote):
  with temporary_folder(f"{remote}/out", ".work-") as work:
    assert not files.is_remote(work) and os.path.isdir(work)
    assert os.path.dirname(work) == tempfile.gettempdir()
    with open(os.path.join(work, "part"), "w") as handle:
      handle.write("x")
    files.move(os.path.join(work, "part"), f"{remote}/out/part")
  assert not os.path.exists(work)
  assert files.listdir(f"{remote}/out") == ["part"]  # nothing of the work folder


@pytest.mark.parametrize("name", ["../elsewhere/x.safetensors", "/etc/passwd", "a/../../x",
                                  "gs://bucket/x", "", "..\\x"])
def test_a_name_leading_out_of_its_directory_is_refused(tmp_path, name):
  with pytest.raises(UserInputError, match=r"^INDEX: names .*(a path outside|not a file name)"):
    files.confined(str(tmp_path), name, "INDEX")


def test_a_link_leading_out_is_refused_one_inside_followed(tmp_path):
  (tmp_path / "model").mkdir()
  (tmp_path / "secret").write_text("the user's")
  (tmp_path / "model" / "weights").write_text("weights")
  os.symlink(tmp_path / "secret", tmp_path / "model" / "out")
  os.symlink("weights", tmp_path / "model" / "in")
  with pytest.raises(UserInputError, match="names 'out', a path outside"):
    files.confined(str(tmp_path / "model"), "out", "INDEX")
  assert files.confined(str(tmp_path / "model"), "in", "INDEX") == str(tmp_path / "model" / "in")


def test_a_hub_snapshot_may_link_into_its_repositorys_blobs(tmp_path):
  """huggingface_hub's cache keeps a snapshot's files as links to ../../blobs/<hash>."""
  repository = tmp_path / "models--org--xlnet"
  (repository / "blobs").mkdir(parents=True)
  (repository / "blobs" / "abc123").write_text("weights")
  snapshot = repository / "snapshots" / "0123abcd"
  snapshot.mkdir(parents=True)
  os.symlink("../../blobs/abc123", snapshot / "model-00001-of-00002.safetensors")
  (tmp_path / "secret").write_text("the user's")
  os.symlink(tmp_path, snapshot / "escape")
  assert files.confined(str(snapshot), "model-00001-of-00002.safetensors", "INDEX")
  with pytest.raises(UserInputError, match="a path outside"):
    files.confined(str(snapshot), "escape/secret", "INDEX")
