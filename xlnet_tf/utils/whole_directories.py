"""Directories written whole or not at all: a model saved with save_pretrained, a converted
checkpoint, fine-tuning's best/, an export's version.

`staged_directory(directory)` yields a folder to write every file into; when the block ends
without an error, that folder becomes `directory`:

- Local: the folder is `<parent>/.<name>.partial-<pid>@<host>-<random>` (a dot name, beside
  the target, on its file system) and is renamed to `<name>` in one step. Over an existing
  directory (`replace=True`) the two are swapped in one call (Linux renameat2
  RENAME_EXCHANGE; where that is missing, two renames, between which the directory is briefly
  absent) and the old one is removed: no file of the old directory survives in the new one,
  and a process killed at any byte leaves the old directory or the new one, never a mix. A
  killed process leaves its work folder; the next save of the same name removes it, or refuses
  to share the name with a save still running (utils.temporary_folders).
- Remote (gs://..., any tf.io.gfile file system: utils.files): object stores have no atomic
  rename of a directory. The files are written in a local temporary folder; the old directory
  is removed; the files are copied in with `last` (the file a reader looks for first: the
  model's config) copied after all the others, so a reader never finds it beside partial
  weights. A copy that fails removes what it copied. A reader that lists the directory during
  the copy finds no config, i.e. no model.

`keep` names files of the old directory that move into the new one: by default the run lock
of a directory a run holds (a hard link to the same file keeps its lock).

An error in the block, or in placing the folder, leaves no work folder and no parent folder
that this call made.
"""

import contextlib
import ctypes
import errno
import os
import shutil
import tempfile
from typing import Iterator, Optional, Sequence

from absl import logging

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.temporary_folders import owner_suffix, temporary_folder

# The file a run holds locked in the directory it writes (training.run_lock): carried into the
# new directory by a hard link, which keeps the lock, so a swap never unlocks a run's directory.
RUN_LOCK_FILE = ".run.lock"
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def work_folder_prefix(name: str) -> str:
  """The name a save's work folder for `name` starts with (a dot name: hidden, and no model
  directory or version number)."""
  return f".{name}.partial-"


@contextlib.contextmanager
def staged_directory(directory: str, replace: bool = True, last: Optional[str] = None,
                     keep: Sequence[str] = (RUN_LOCK_FILE,),
                     prefix: Optional[str] = None) -> Iterator[str]:
  """A folder to write `directory`'s files into; it becomes `directory` when the block ends
  without an error (see the module docstring). `replace=False`: an existing `directory` is an
  error (FileExistsError) instead of being swapped out. `prefix`: the work folder's name
  prefix (default `work_folder_prefix(name)`)."""
  directory = files.absolute(directory).rstrip("/")
  parent, name = os.path.split(directory)
  if files.exists(directory) and not files.isdir(directory):
    raise UserInputError(f"{directory}: exists and is not a directory")
  if not files.is_remote(directory):
    try:
      os.stat(directory)
    except NotADirectoryError:  # a file stands on the path above it (its parent, or higher)
      raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), directory) from None
    except FileNotFoundError:
      pass
  prefix = prefix or work_folder_prefix(name)
  made = missing_folders(parent)
  work_folders = os.path.join(parent, prefix)
  try:
    with temporary_folder(parent, prefix) as staging:
      yield staging
      if files.is_remote(directory):
        _copy_into_place(staging, directory, last, replace)
      else:
        _rename_into_place(staging, directory, replace, keep, prefix)
  except OSError as error:  # the user knows the directory, not the work folder
    _remove(made)
    if isinstance(error.filename, str) and error.filename.startswith(work_folders):
      inside = error.filename[len(work_folders):].partition(os.sep)[2]
      raise OSError(error.errno, error.strerror, os.path.join(directory, inside).rstrip(os.sep)
                    ) from None
    raise
  except BaseException:
    _remove(made)
    raise


def _remove(folders) -> None:
  """Removes the (empty) folders a failed call made, deepest first."""
  for folder in folders:
    with contextlib.suppress(OSError):
      os.rmdir(folder)


def missing_folders(path: str):
  """The local folders from `path` upwards that do not exist yet, deepest first."""
  missing = []
  while not files.is_remote(path) and path and not os.path.exists(path):
    missing.append(path)
    path = os.path.dirname(path)
  return missing


def _exists_error(directory: str) -> FileExistsError:
  return FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), directory)


def _rename_into_place(staging: str, directory: str, replace: bool, keep: Sequence[str],
                       prefix: str) -> None:
  # mkdtemp makes the work folder private (0700); the directory it becomes gets the mode a new
  # directory gets (a model server or a teammate running as another user reads it).
  os.chmod(staging, 0o777 & ~_umask())
  if os.path.isdir(directory):
    if not replace:
      raise _exists_error(directory)
    for name in keep:
      if os.path.exists(os.path.join(directory, name)):
        os.link(os.path.join(directory, name), os.path.join(staging, name))
    if _exchange(staging, directory):
      return  # `staging` now holds the old directory; temporary_folder removes it
    # Two renames: the old directory aside (into a work folder's name, so that the next save
    # clears it if this process dies here), the new one in.
    aside = tempfile.mkdtemp(prefix=prefix + owner_suffix(), dir=os.path.dirname(directory))
    os.rename(directory, aside)
    os.rename(staging, directory)
    shutil.rmtree(aside, ignore_errors=True)
    return
  try:
    os.rename(staging, directory)
  except OSError as error:
    if error.errno in (errno.ENOTEMPTY, errno.EEXIST):  # made by another process meanwhile
      raise _exists_error(directory) from None
    raise


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def _exchange(first: str, second: str) -> bool:
  """Swaps two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the system or
  file system has no such call."""
  try:
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
  except (AttributeError, OSError, TypeError):  # not Linux (glibc 2.28+)
    return False
  renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                        ctypes.c_uint]
  if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
               _RENAME_EXCHANGE) == 0:
    return True
  code = ctypes.get_errno()
  if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
    return False
  raise OSError(code, os.strerror(code), second)


def _copy_into_place(staging: str, directory: str, last: Optional[str], replace: bool) -> None:
  """Copies the local `staging` folder into the remote `directory`, `last` (a file at the top)
  after everything else; removes what it copied if the copy fails."""
  if files.exists(directory):
    if not replace:
      raise _exists_error(directory)
    files.rmtree(directory)
  try:
    files.makedirs(directory)
    for name in sorted(os.listdir(staging)):
      if name != last:
        source, target = os.path.join(staging, name), files.join(directory, name)
        if os.path.isdir(source):
          files.copy_tree(source, target)
        else:
          files.copy(source, target)
    if last and os.path.exists(os.path.join(staging, last)):
      files.copy(os.path.join(staging, last), files.join(directory, last))
  except BaseException:
    try:
      if files.exists(directory):
        files.rmtree(directory)
    except Exception as error:  # the copy's own error matters more
      logging.warning("%s: could not remove the part copied (%s); remove it", directory, error)
    raise
