"""What every command-line tool in run/ and data/ shares: quiet TensorFlow, one-line user errors.

A tool (xlnet_tf/cli/) imports this module before anything that imports TensorFlow, and starts
with `cli.run(main, usage=__doc__)` in place of absl's `app.run(main)`. Unless `--verbose` is on
the command line:

- TensorFlow's C++ logging is set to silent (TF_CPP_MIN_LOG_LEVEL=3, unless already set; it is
  read once, when TensorFlow loads), and the lines TensorFlow prints while it is imported
  (oneDNN, CUDA: written before that setting applies) are captured and dropped, or shown if the
  import fails;
- TensorFlow's Python logs show errors only (its own logger, and what its modules log through
  absl), and Keras' and TensorFlow's Python warnings are ignored;
- a user error (UserInputError, a missing file, absl's UsageError) ends the tool with one line,
  `error: <message>`, and exit status 1; so does a fault of the disk a write meets (no space
  left, no permission, a read-only file system, a file where a directory is needed:
  errors.file_system_fault), naming the path; every other exception is a bug and keeps its
  traceback;
- a run stopped by SIGTERM or SIGINT after saving its checkpoint (errors.StoppedBySignal) ends
  with its one line and exit status 128 + the signal's number (143, 130), --verbose or not.

With --verbose nothing is silenced and every error shows its traceback. The tools' own progress
(absl logging from xlnet_tf) is not affected.
"""

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings
from typing import Optional

from absl import app
from absl import flags

from xlnet_tf.utils.errors import StoppedBySignal, UserInputError, file_system_fault

flags.DEFINE_bool("verbose", False, "Show TensorFlow's logs and warnings, and a traceback with "
                  "every error.")

# Errors that are about the user's input, not bugs: shown as one line.
USER_ERRORS = (UserInputError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
               app.UsageError)

_VERBOSE_ARGUMENT = re.compile(r"--?(no)?verbose(?:=(.*))?")
_HELP_ARGUMENT = re.compile(r"--?(help|helpshort|helpfull|helpxml|\?)")
_LIBRARY_FILE = re.compile(r"[/\\](tensorflow|keras)[/\\]")


def verbose_requested(argv) -> bool:
  """Whether `argv` turns --verbose on, read as absl will read it (the last setting wins).

  Needed before absl parses the flags: TensorFlow may be imported (and log) before that."""
  verbose = False
  for argument in argv[1:]:
    if argument == "--":
      break
    match = _VERBOSE_ARGUMENT.fullmatch(argument)
    if match:
      negated, value = match.groups()
      verbose = not negated and (value is None or value.lower() in ("true", "t", "1"))
  return verbose


def help_requested(argv) -> bool:
  """Whether `argv` asks for absl's help (--help, --helpshort, --helpfull, --helpxml, -?)."""
  arguments = argv[1:argv.index("--")] if "--" in argv else argv[1:]
  return any(_HELP_ARGUMENT.fullmatch(argument) for argument in arguments)


@contextlib.contextmanager
def _standard_error_captured():
  """Everything written to file descriptor 2 (C++ code writes there directly) goes to a
  temporary file; it is written out after all if the block raises."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    except BaseException:
      os.dup2(saved, 2)
      captured.seek(0)
      os.write(2, captured.read())
      raise
    finally:
      os.dup2(saved, 2)
      os.close(saved)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` with the other finders and loads it with standard error captured.

  An import hook rather than importing TensorFlow here: tools that may not need TensorFlow
  (run/benchmark.py's PyTorch workers) do not load it."""

  def find_spec(self, name, path=None, target=None):
    if name != "tensorflow":
      return None
    sys.meta_path.remove(self)  # once; and the lookup below must not come back here
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.loader is not None:
      load = spec.loader.exec_module

      def load_quietly(module):
        with _standard_error_captured():
          load(module)
      spec.loader.exec_module = load_quietly
    return spec


def _not_a_library_message(record) -> bool:
  """Drops what TensorFlow's and Keras' modules log through absl below ERROR (checkpoint
  saving, for one, logs at INFO); xlnet_tf's own absl logs pass."""
  return record.levelno >= logging.ERROR or not _LIBRARY_FILE.search(record.pathname)


def quiet_tensorflow() -> None:
  """Silences TensorFlow's C++ and Python logs and Keras' and TensorFlow's Python warnings."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if "tensorflow" not in sys.modules:
    sys.meta_path.insert(0, _QuietTensorFlowImport())
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  logging.getLogger("absl").addFilter(_not_a_library_message)
  warnings.filterwarnings("ignore", module=r"(keras|tensorflow)(\.|$)")


def list_flag(name: str, convert=int, kind: str = "integers") -> list:
  """The values of the list flag --name converted (int, float); a value that does not convert
  is a user error naming the flag."""
  values = flags.FLAGS[name].value
  try:
    return [convert(value) for value in values]
  except ValueError:
    raise app.UsageError(f"--{name}: {values} are not {kind}") from None


def run(main, usage: Optional[str] = None) -> None:
  """absl's app.run(main), with user errors as one line unless --verbose, and --help exiting
  with status 0 (absl's exits with 1, a failure to installers' and CI's checks). `usage` (the
  tool's docstring) is what --help shows: absl reads the __main__ module's, which is a thin
  run/ script's or an installed console script's, not the tool's module."""
  if usage is not None:
    sys.modules["__main__"].__doc__ = usage

  def main_reporting_user_errors(argv):
    try:
      return main(argv)
    except StoppedBySignal as stop:  # not an error: what it saved resumes the run
      print(stop, file=sys.stderr)
      sys.exit(stop.exit_status)
    except USER_ERRORS as error:
      if flags.FLAGS.verbose:
        raise
      # A file where a directory is needed is a fault of the path, read or write: in
      # file_system_fault's words, as the other faults, not "[Errno 20] ...".
      fault = file_system_fault(error) if isinstance(error, NotADirectoryError) else None
      print(f"error: {fault or error}", file=sys.stderr)
      sys.exit(1)
    except Exception as error:
      fault = file_system_fault(error)  # a full disk, a read-only mount, ...: not a bug
      if fault is None or flags.FLAGS.verbose:
        raise
      print(f"error: {fault}", file=sys.stderr)
      sys.exit(1)
  try:
    app.run(main_reporting_user_errors)
  except SystemExit as exit:
    if exit.code == 1 and help_requested(sys.argv):
      sys.exit(0)
    raise


if not verbose_requested(sys.argv):
  quiet_tensorflow()
