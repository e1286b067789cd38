"""Paths on any file system TensorFlow reads and writes: local paths, and `scheme://` paths
(gs://, s3://, hdfs://, ram://, ...) through `tf.io.gfile`.

Every data, model, output, export and checkpoint path of the library goes through here. A
local path takes the standard library's calls exactly as before (the same behaviour, the same
error messages); a remote one (any `scheme://`) takes tf.io.gfile's, with a missing file
raised as the standard library's FileNotFoundError. TensorFlow is imported for a remote path
only, so reading a local file costs no TensorFlow import.

What needs a local file (SentencePiece training, h5py, the data stage's worker files) works in
a local temporary folder and copies the result through here (`local_copy`, `move`,
`copy_tree`); os.path.join and os.path.basename/dirname are right for both kinds of path,
os.path.abspath and os.makedirs are not (`os.makedirs("ram://x")` makes a local folder named
`ram:`): use `absolute` and `makedirs`.
"""

import builtins
import contextlib
import errno
import glob as local_glob
import io
import os
import re
import shutil
import tempfile
from typing import Iterator, List

from xlnet_tf.utils.errors import UserInputError, disk_fault_code

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

join = os.path.join


def is_remote(path) -> bool:
  """Whether `path` names a file system through a scheme (gs://bucket/x, ram://x, ...)."""
  return bool(_SCHEME.match(os.fspath(path))) if path else False


def _gfile():
  import tensorflow as tf  # remote paths only: a local one needs no TensorFlow
  return tf.io.gfile


def _not_found(path: str) -> FileNotFoundError:
  return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def absolute(path: str) -> str:
  """os.path.abspath for a local path; a remote path as it is."""
  return path if is_remote(path) else os.path.abspath(path)


def exists(path: str) -> bool:
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
  if is_remote(path):
    return _gfile().exists(path) and not _gfile().isdir(path)
  return os.path.isfile(path)


def listdir(path: str) -> List[str]:
  """The names in a directory (a remote listing's folder names without their trailing /)."""
  if is_remote(path):
    if not _gfile().isdir(path):
      raise _not_found(path)
    return [name.rstrip("/") for name in _gfile().listdir(path)]
  return os.listdir(path)


def getsize(path: str) -> int:
  if is_remote(path):
    if not _gfile().exists(path):
      raise _not_found(path)
    return _gfile().stat(path).length
  return os.path.getsize(path)


def modification_stamp(path: str):
  """What changes when the file is replaced: its modification time in ns (remote: with its
  size, as some file systems keep no time)."""
  if is_remote(path):
    if not _gfile().exists(path):
      raise _not_found(path)
    stat = _gfile().stat(path)
    return stat.mtime_nsec, stat.length
  return os.stat(path).st_mtime_ns


def makedirs(path: str) -> None:
  """The directory and its parents, if missing."""
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def glob(pattern: str) -> List[str]:
  """The paths matching `pattern` (unsorted, as glob.glob gives them)."""
  return _gfile().glob(pattern) if is_remote(pattern) else local_glob.glob(pattern)


def open_file(path: str, mode: str = "r", encoding: str = "utf-8", errors=None, newline=None):
  """`open(path, mode, ...)`: a local file as the standard library opens it; a remote one as a
  tf.io.gfile.GFile (binary modes: seek, read, readline, iteration by line), its text read
  whole and decoded as `open` would (`encoding`, `errors`, universal newlines). Text is
  written as UTF-8."""
  binary = "b" in mode
  if not is_remote(path):
    if binary:
      return builtins.open(path, mode)
    return builtins.open(path, mode, encoding=encoding, errors=errors, newline=newline)
  if "r" in mode and not _gfile().exists(path):
    raise _not_found(path)
  if binary or "r" not in mode:
    return _gfile().GFile(path, mode)
  return io.TextIOWrapper(io.BytesIO(read_bytes(path)), encoding=encoding, errors=errors,
                          newline=newline)


def read_bytes(path: str) -> bytes:
  with open_file(path, "rb") as handle:
    return handle.read()


def write_bytes(path: str, data) -> str:
  """Writes `data` (bytes-like) to `path` whole or not at all: a local file is written beside
  it (`.<name>.partial-<pid>`) and renamed over it; a remote object is written in one upload.
  A failing write (no space left, no permission) is an OSError naming `path`."""
  with named_on_failure(path):
    if is_remote(path):
      with open_file(path, "wb") as handle:
        handle.write(data)
      return path
    partial = os.path.join(os.path.dirname(path),
                           f".{os.path.basename(path)}.partial-{os.getpid()}")
    try:
      with builtins.open(partial, "wb") as handle:
        handle.write(data)
      os.replace(partial, path)
    except BaseException:
      with contextlib.suppress(OSError):
        os.remove(partial)
      raise
  return path


def read_text(path: str, encoding: str = "utf-8") -> str:
  with open_file(path, encoding=encoding) as handle:
    return handle.read()


def write_text(path: str, text: str) -> str:
  """Writes `text` as UTF-8, whole or not at all (write_bytes)."""
  return write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def named_on_failure(path: str):
  """An OSError raised inside the block without a file name (a write that fails with no space
  left: Python names no file) is raised again naming `path`, as the same OSError subclass; so
  is a TensorFlow error that stands for a fault of the disk (its writers' ResourceExhaustedError
  of a full disk, naming a temporary file or none: errors.disk_fault_code)."""
  try:
    yield
  except OSError as error:
    if error.filename is None and error.errno:
      raise OSError(error.errno, error.strerror or os.strerror(error.errno), path) from None
    raise
  except Exception as error:
    code = disk_fault_code(error)
    if code is None:
      raise
    raise OSError(code, os.strerror(code), path) from None


def copy(source: str, target: str) -> str:
  """Copies the file `source` to `target` (replacing it), between any two file systems."""
  if is_remote(source) or is_remote(target):
    if not _gfile().exists(source):
      raise _not_found(source)
    _gfile().copy(source, target, overwrite=True)
  else:
    with named_on_failure(target):
      shutil.copyfile(source, target)
  return target


def move(source: str, target: str) -> str:
  """Moves the file `source` to `target`, replacing it: os.replace between local paths (atomic
  on one file system); a rename within one remote file system; else a copy, then the source
  removed."""
  if not (is_remote(source) or is_remote(target)):
    os.replace(source, target)
  elif _scheme(source) == _scheme(target):
    _gfile().rename(source, target, overwrite=True)
  else:
    copy(source, target)
    remove(source)
  return target


def _scheme(path: str) -> str:
  match = _SCHEME.match(path)
  return match.group(0) if match else ""


def remove(path: str) -> None:
  """Removes a file (FileNotFoundError when there is none)."""
  if is_remote(path):
    if not _gfile().exists(path):
      raise _not_found(path)
    _gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path: str, ignore_errors: bool = False) -> None:
  """Removes a directory and everything in it."""
  if not is_remote(path):
    shutil.rmtree(path, ignore_errors=ignore_errors)
    return
  try:
    if not _gfile().exists(path):
      raise _not_found(path)
    _gfile().rmtree(path)
  except Exception:
    if not ignore_errors:
      raise


def copy_tree(source: str, target: str) -> str:
  """Copies the directory `source` into `target` (made if missing), file by file, between any
  two file systems; files already in `target` under the same names are replaced."""
  makedirs(target)
  for name in listdir(source):
    path = join(source, name)
    if isdir(path):
      copy_tree(path, join(target, name))
    else:
      copy(path, join(target, name))
  return target


def confined(directory: str, name, source: str) -> str:
  """`directory/name` for a file name read from the file `source` (a shard index, a
  tokenizer config): refused with one UserInputError naming `source` and the entry when it
  leads outside `directory` (an absolute path, `..`, a symbolic link pointing out), since a
  downloaded directory could otherwise name any file the user can read."""
  if not isinstance(name, str) or not name or "\0" in name:
    raise UserInputError(f"{source}: names {name!r}, which is not a file name in {directory}")
  outside = UserInputError(f"{source}: names {name!r}, a path outside {directory}; a file it "
                           "names must be inside its directory")
  if os.path.isabs(name) or is_remote(name) or name.startswith(("/", "\\")) or \
      ".." in re.split(r"[/\\]", name):
    raise outside
  path = join(directory, name)
  if not is_remote(path):
    root = os.path.realpath(_link_root(directory))
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
      raise outside
  return path


def _link_root(directory: str) -> str:
  """Where a symbolic link in `directory` may point: the directory itself, or for a snapshot of
  huggingface_hub's cache (`models--org--name/snapshots/<revision>`, whose files are links to
  `../../blobs/<hash>`) the cache folder of that repository."""
  snapshots, _ = os.path.split(os.path.normpath(directory))
  repository, folder = os.path.split(snapshots)
  if folder == "snapshots" and os.path.basename(repository).startswith("models--"):
    return repository
  return directory


def walk(top: str) -> Iterator:
  """(directory, folder names, file names) of `top` and every folder under it, as os.walk."""
  return _gfile().walk(top) if is_remote(top) else os.walk(top)


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
  """A local path holding the file `path`: `path` itself when it is local, else a copy in a
  temporary folder, removed when the block ends (for readers that need a local file)."""
  if not is_remote(path):
    yield path
    return
  folder = tempfile.mkdtemp(prefix="xlnet_tf-")
  try:
    local = copy(path, os.path.join(folder, os.path.basename(path)))
    yield local
  finally:
    shutil.rmtree(folder, ignore_errors=True)
