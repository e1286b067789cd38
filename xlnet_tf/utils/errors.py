"""The error type of bad input: what a user gave (a flag, a file, its contents) cannot be used.

Library checks of user input raise `UserInputError` with a message that names the input (the
flag, or `path:line`). The command-line tools print it as one line without a traceback (see
xlnet_tf.utils.cli); any other exception is a bug and keeps its traceback. A ValueError, so callers
that catch ValueError still do.
"""

import errno
import numbers
import os
import re
from typing import Optional


class UserInputError(ValueError):
  """A flag, file or value supplied by the user cannot be used; the message says which."""


_NOT_GIVEN = object()


def require(ok: bool, argument: str, expected: str, got=_NOT_GIVEN) -> None:
  """The library's one input check: raises UserInputError "<argument> must be <expected>;
  got <got>" unless `ok`. `argument` names what the user gave (a flag, a field, `path:line`);
  `got` is shown as given (pass repr(value) for a quoted value).

  >>> require(3 > 0, "XLNetConfig.n_layer", "a positive integer", 3)  # passes silently
  """
  if ok:
    return
  message = f"{argument} must be {expected}"
  if got is not _NOT_GIVEN:
    message += f"; got {got}"
  raise UserInputError(message)


def is_int(value) -> bool:
  """An integer (Python's or NumPy's), not a bool: what the checks of integer settings accept."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class StoppedBySignal(BaseException):
  """A run stopped on SIGTERM or SIGINT after saving what resumes it (training.preemption).

  Not an error, and so, like KeyboardInterrupt, not an Exception: `except Exception` does not
  swallow it. The CLIs print its message (one line: the signal, the step, the checkpoint
  written) and exit with `exit_status`, 128 + the signal's number as a shell reports a process
  that signal ended: 143 for SIGTERM, 130 for SIGINT."""

  def __init__(self, message: str, signal_number: int):
    super().__init__(message)
    self.signal_number = signal_number
    self.exit_status = 128 + signal_number


# The faults of a disk or a mount, not of the program: what each means to the user.
_WRITE_FAULTS = {
    errno.ENOSPC: "no space left on the device; free some, or write elsewhere",
    errno.EDQUOT: "the disk quota is exceeded; free some space, or write elsewhere",
    errno.EFBIG: "the file is larger than this file system or process allows",
    errno.EACCES: "permission denied; write into a directory you may write to",
    errno.EPERM: "operation not permitted (an immutable or protected path?); write elsewhere",
    errno.EROFS: "a read-only file system; write elsewhere",
    errno.ENOTDIR: "a file stands where a directory is needed on this path",
    errno.EISDIR: "a directory stands where a file is to be written",
    errno.EEXIST: "exists, and is not what was to be written there",
    errno.EIO: "an input/output error of the device",
}
# What TensorFlow's file system layer says for the same faults: the system's words.
_FAULT_TEXTS = {os.strerror(code): code for code in (
    errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS,
    errno.ENOTDIR, errno.EIO)}
# The first absolute or remote path in a message ("/a/b; No space left on device", "file
# '/a/b'", "gs://b/x: ...").
_PATH_IN_MESSAGE = re.compile(r"(?<![\w.])((?:/|[A-Za-z][\w+.-]*://)[^\s',;:]+)")


def disk_fault_code(error: BaseException) -> Optional[int]:
  """The errno of the fault of a disk or a mount an error stands for (no space left, a
  read-only file system, ...: see _WRITE_FAULTS), None for any other error: an OSError's own;
  a TensorFlow error's (its file system layer reports them in the system's words) read from
  its message."""
  if isinstance(error, OSError):
    return error.errno if error.errno in _WRITE_FAULTS else None
  if type(error).__module__.startswith("tensorflow"):
    message = str(getattr(error, "message", error))
    return next((code for text, code in _FAULT_TEXTS.items() if text in message), None)
  return None


def file_system_fault(error: BaseException) -> Optional[str]:
  """One line for an error that is a fault of the disk or the mount a write met (no space
  left, no permission, a read-only file system, a file where a directory is needed), naming
  the path and what to do; None for any other error (a bug keeps its traceback).

  OSError carries its path; TensorFlow's errors (a SavedModel or checkpoint write) say the
  fault in their message, and the path where they name one."""
  code = disk_fault_code(error)
  if code is None:
    return None
  if isinstance(error, OSError):
    path = error.filename if error.filename is not None else "a file"
  else:
    named = _PATH_IN_MESSAGE.search(str(getattr(error, "message", error)))
    path = named.group(1) if named else "a file TensorFlow was writing"
  return f"{path}: {_WRITE_FAULTS[code]}"
