"""The error type of bad input: what a user gave (a flag, a file, its contents) cannot be used.

Library checks of user input raise `UserInputError` with a message that names the input (the
flag, or `path:line`). The command-line tools print it as one line without a traceback (see
xlnet_tf.utils.cli); any other exception is a bug and keeps its traceback. A ValueError, so callers
that catch ValueError still do.
"""

import numbers


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
