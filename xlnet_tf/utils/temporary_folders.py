"""Temporary folders inside an output directory, and what an interrupted run leaves of them.

A tool that writes several files builds them in `<output>/<prefix><pid>@<host>-<random>` and
moves each into place (`os.replace`, atomic on one file system) only when all are complete, so
a failed or killed run never leaves a partial output under its final name. A killed process
cannot remove its folder: the next run into the same directory removes the folders of
processes that are no longer running (and says so), and refuses to share the directory with
one that still is: two runs writing the same outputs would mix them.

A remote parent (gs://..., any `scheme://`: utils.files) gets a local folder in the system's
temporary directory instead: the tools that build there (SentencePiece, the data stage's
workers) need local files, and the caller moves each complete output into the parent through
utils.files (a copy: no longer atomic, but nothing is copied before it is complete). Nothing
of it is left in the parent, so there is nothing to clear there.
"""

import contextlib
import os
import re
import shutil
import socket
import tempfile
from typing import Callable, Iterator

from absl import logging

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

_OWNER = re.compile(r"(\d+)@(.*)-[^-]*")


def _process_is_running(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # another user's process
  return True


def clear_stale_folders(parent: str, prefix: str,
                        report: Callable[[str], None] = logging.warning) -> None:
  """Removes `parent/<prefix>...` folders of runs that no longer run (with a line to
  `report`); raises UserInputError naming the folder if one belongs to a running process or to
  another host (whose processes cannot be seen from here)."""
  if not os.path.isdir(parent):
    return
  host = socket.gethostname()
  for name in sorted(os.listdir(parent)):
    path = os.path.join(parent, name)
    if not name.startswith(prefix) or not os.path.isdir(path):
      continue
    owner = _OWNER.fullmatch(name[len(prefix):])
    if owner:  # folders of older versions name no owner: stale, since no run uses them now
      pid, owner_host = int(owner.group(1)), owner.group(2)
      if owner_host != host:
        raise UserInputError(f"{path}: a run on host {owner_host} (pid {pid}) is writing into "
                             f"{parent}, or was killed; remove this folder if no such run is "
                             "still going")
      if pid == os.getpid() or _process_is_running(pid):
        raise UserInputError(f"{path}: another run (pid {pid}) is writing into {parent}; wait "
                             "for it to end, or write elsewhere")
    shutil.rmtree(path, ignore_errors=True)
    report(f"Removed {path}: the temporary folder of an interrupted run")


def owner_suffix() -> str:
  """`<pid>@<host>-`: what a temporary folder's name holds after its prefix, so that
  `clear_stale_folders` can tell whether the run that made it is still going."""
  return f"{os.getpid()}@{socket.gethostname()}-"


@contextlib.contextmanager
def temporary_folder(parent: str, prefix: str,
                     report: Callable[[str], None] = logging.warning) -> Iterator[str]:
  """A new folder `parent/<prefix><pid>@<host>-<random>`, removed when the block ends (also on
  an error), after clearing the stale folders of earlier runs (`clear_stale_folders`). A
  parent made here and left empty (the block failed) is removed too. A remote parent: a local
  folder in the system's temporary directory (see the module docstring)."""
  if files.is_remote(parent):
    path = tempfile.mkdtemp(prefix=f"xlnet_tf{prefix}{os.getpid()}-")
    try:
      yield path
    finally:
      shutil.rmtree(path, ignore_errors=True)
    return
  clear_stale_folders(parent, prefix, report)
  made_parent = not os.path.exists(parent)
  os.makedirs(parent, exist_ok=True)
  path = tempfile.mkdtemp(prefix=prefix + owner_suffix(), dir=parent)
  try:
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)
    if made_parent and not os.listdir(parent):
      os.rmdir(parent)
