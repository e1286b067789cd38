"""One run at a time in a run directory (pretraining's model_dir, fine-tuning's best/).

Two runs writing into one directory interleave their checkpoints and summaries, and the last
to finish wins. `hold(directory)` takes an exclusive lock for the duration of a run:

- the lock is a `flock` on DIR/.run.lock, which holds the holder's pid and host; the kernel
  drops it when the process ends in any way (kill -9 included), so a crash never leaves a
  directory locked;
- a second run is refused with a UserInputError naming the directory and the holder's pid;
- a lock file left behind by a run that died (still naming its pid, no longer locked) is
  taken over, with a warning naming that pid;
- the file is removed when the run ends, and the directories the lock created too if nothing
  else was written there.

Re-entrant within a process: a CLI holds the lock around the whole command while the library
call it makes holds it again.

A remote directory (gs://..., any `scheme://`: utils.files) cannot be locked: object stores
have no flock, and a lock file there could not be released by a killed run. `hold` then takes
no lock, creates nothing, and logs one line saying so: one run at a time writing into a remote
directory is the user's responsibility (a TPU pod's job names its own model_dir).
"""

import contextlib
import fcntl
import os
import socket

from absl import logging

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.whole_directories import RUN_LOCK_FILE

LOCK_FILE = RUN_LOCK_FILE  # kept through a swap of the directory (utils.whole_directories)

_held = {}  # real path of a directory this process holds -> how many holds are open


@contextlib.contextmanager
def hold(directory: str):
  """Holds `directory`'s run lock inside the block (creating the directory if needed); a
  remote directory is not locked (see the module docstring)."""
  key = directory.rstrip("/") if files.is_remote(directory) else os.path.realpath(directory)
  if key in _held:
    _held[key] += 1
    try:
      yield
    finally:
      _held[key] -= 1
    return
  if files.is_remote(directory):
    logging.warning("%s: a remote directory takes no run lock; make sure no other run writes "
                    "into it at the same time", directory)
    _held[key] = 1
    try:
      yield
    finally:
      del _held[key]
    return
  created = _missing_directories(directory)
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, LOCK_FILE)
  try:
    descriptor = _lock(path, directory)
  except BaseException:
    _remove_if_empty(created)
    raise
  _held[key] = 1
  try:
    yield
  finally:
    del _held[key]
    with contextlib.suppress(FileNotFoundError):  # before unlocking: see _lock
      os.remove(path)
    os.close(descriptor)
    _remove_if_empty(created)


def _lock(path: str, directory: str) -> int:
  """The descriptor of `path` under an exclusive flock, with this process named in it."""
  while True:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _holder(descriptor) or "unknown"
      os.close(descriptor)
      raise UserInputError(f"{directory}: another run (pid {holder}) is using this directory "
                           f"(lock {path}); wait for it to end or use another directory"
                           ) from None
    # The previous holder removes the file before unlocking: a file we opened before that is
    # no longer the lock others see, so lock the new one.
    try:
      current = os.stat(path).st_ino == os.fstat(descriptor).st_ino
    except FileNotFoundError:
      current = False
    if current:
      break
    os.close(descriptor)
  previous = _holder(descriptor)
  if previous:
    logging.warning("%s: taking over the lock of pid %s, which is no longer running (its "
                    "run was killed)", directory, previous)
  os.ftruncate(descriptor, 0)
  os.pwrite(descriptor, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
  return descriptor


def _holder(descriptor: int) -> str:
  """Who the lock file names ("1234 on host"), or "" when it is empty."""
  text = os.pread(descriptor, 512, 0).decode("utf-8", "replace").strip()
  return text[len("pid "):] if text.startswith("pid ") else text


def _missing_directories(directory: str):
  """`directory` and those of its parents that do not exist, innermost first."""
  missing = []
  directory = os.path.abspath(directory)
  while not os.path.isdir(directory):
    missing.append(directory)
    directory = os.path.dirname(directory)
  return missing


def _remove_if_empty(directories) -> None:
  """Removes `directories` (innermost first) while they are empty (one the run removed
  itself, e.g. a failed fine-tuning run's best/, is passed over)."""
  for directory in directories:
    if not os.path.isdir(directory):
      continue
    if os.listdir(directory):
      return
    os.rmdir(directory)
