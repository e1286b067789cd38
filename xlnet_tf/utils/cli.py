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

With --verbose nothing is silenced and every error shows its traceback; absl's INFO lines (a
loader's summary, ...) show only then: a tool says what it does in lines of its own.

--help (-h, --helpshort, -?) shows the usage under the name the tool was called by (an
installed command, `xlnet-classify`, or `python run/classifier.py`), then the tool's own flags
grouped by the module that defines them, each with its default, the required ones marked;
--helpfull is absl's list of every flag, TensorFlow's included.
"""

import contextlib
import importlib.abc
import importlib.metadata
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
from absl import logging as absl_logging

from xlnet_tf.utils.errors import StoppedBySignal, UserInputError, file_system_fault

flags.DEFINE_bool("verbose", False, "Show TensorFlow's logs and warnings, and a traceback with "
                  "every error.")

# Errors that are about the user's input, not bugs: shown as one line.
USER_ERRORS = (UserInputError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
               app.UsageError)

_VERBOSE_ARGUMENT = re.compile(r"--?(no)?verbose(?:=(.*))?")
_HELP_ARGUMENT = re.compile(r"--?(help|helpshort|helpfull|helpxml|\?)")
# What shows the tool's own help (this module's); --helpfull and --helpxml stay absl's.
_OWN_HELP_ARGUMENT = re.compile(r"-h|--?(help|helpshort|\?)")
# A tool named in a usage text: `python run/classifier.py`, `python data/train_sentencepiece.py`.
_SCRIPT_IN_USAGE = re.compile(r"python (?:run|data)/(\w+)\.py")
# The title of the flags a module defines, in --help: its HELP_GROUP, else this.
HELP_GROUP = "Messages"
_OWN_GROUP = "This tool's flags"
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
  return any(_HELP_ARGUMENT.fullmatch(argument)
             for argument in _arguments_before_separator(argv))


def _arguments_before_separator(argv):
  return argv[1:argv.index("--")] if "--" in argv else argv[1:]


def own_help_requested(argv) -> bool:
  """Whether `argv` asks for the tool's own help: --help, -h, --helpshort or -?."""
  return any(_OWN_HELP_ARGUMENT.fullmatch(argument)
             for argument in _arguments_before_separator(argv))


def invoked_name(program: str) -> str:
  """The command as it was typed: an installed command's name (`xlnet-classify`, called by its
  full path from PATH), or `python run/classifier.py` for a script."""
  return f"python {program}" if program.endswith(".py") else os.path.basename(program)


def _installed_commands() -> dict:
  """{xlnet_tf.cli module name: its installed command}; empty where the package is not
  installed (a checkout on sys.path)."""
  try:
    scripts = importlib.metadata.entry_points(group="console_scripts")
  except Exception:  # broken metadata of some installed package: the help does without
    return {}
  return {script.value.split(":")[0].rsplit(".", 1)[-1]: script.name for script in scripts
          if script.value.startswith("xlnet_tf.cli.")}


def _with_commands(usage: str, tool_module: str, name: str) -> str:
  """`usage` with the tool's own `python run/x.py` as `name`; called as an installed command,
  the other tools' scripts as their commands too."""
  own = tool_module.rsplit(".", 1)[-1]
  commands = {} if name.startswith("python ") else _installed_commands()

  def command(match):
    return name if match.group(1) == own else commands.get(match.group(1), match.group(0))
  return _SCRIPT_IN_USAGE.sub(command, usage)


def _is_required(flag) -> bool:
  """Whether flags.mark_flag_as_required was called for `flag` (its validator, by absl's
  message: absl keeps no other record of it)."""
  message = f"Flag --{flag.name} must have a value other than None."
  return any(getattr(validator, "message", None) == message for validator in flag.validators)


def _shown_default(value) -> str:
  if isinstance(value, bool):
    return str(value).lower()
  if isinstance(value, (list, tuple)):
    value = ",".join(map(str, value))
  return str(value) if value != "" else "''"


def _flag_help(flag) -> str:
  """One flag: `--name (required): help (default: ...)`, wrapped (an enum's help starts with
  its choices, <a|b|c>, as absl writes it)."""
  name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
  required = _is_required(flag)
  help_words = " ".join((flag.help or "").split())  # absl puts a multi flag's note on a line
  text = f"{name}{' (required)' if required else ''}: {help_words}".rstrip()
  if flag.default is not None and not required:
    text += f" (default: {_shown_default(flag.default)})"
  return flags.text_wrap(text, indent="      ", firstline_indent="  ")


def _flag_groups(tool_module: str):
  """[(title, flags)]: the flags xlnet_tf's modules define (not TensorFlow's, absl's or a test
  runner's), by module in the order they were defined: the tool's own first, this module's
  last."""
  values = flags.FLAGS
  modules = {module: [flag for flag in module_flags
                      if flag.name in values and values[flag.name] is flag]
             for module, module_flags in values.flags_by_module_dict().items()
             if module == tool_module or module.startswith("xlnet_tf.")}
  order = sorted(modules, key=lambda module: (module != tool_module, module == __name__))
  groups = []
  for module in order:
    if not modules[module]:
      continue
    title = (_OWN_GROUP if module == tool_module else
             getattr(sys.modules.get(module), "HELP_GROUP", None)
             or module.rsplit(".", 1)[-1].replace("_", " ").capitalize())
    groups.append((title, list(dict.fromkeys(modules[module]))))
  return groups


def help_text(tool_module: str, usage: Optional[str], program: str) -> str:
  """What --help shows: the usage line (the required flags), the tool's docstring under the
  name it was called by, the tool's flags by group."""
  name = invoked_name(program)
  groups = _flag_groups(tool_module)
  required = [flag.name for _, group in groups for flag in group if _is_required(flag)]
  lines = ["usage: " + " ".join([name] + [f"--{flag}={flag.upper()}" for flag in required]
                                + ["[--flag=value ...]"]), ""]
  if usage:
    lines += [_with_commands(usage.strip("\n"), tool_module, name).rstrip(), ""]
  for title, group in groups:
    lines += [f"{title}:"] + [_flag_help(flag) for flag in group] + [""]
  lines.append("--helpfull lists every flag, TensorFlow's and absl's too.")
  return "\n".join(lines) + "\n"


def _print_help(tool_module: str, usage: Optional[str]) -> None:
  try:
    sys.stdout.write(help_text(tool_module, usage, sys.argv[0]))
    sys.stdout.flush()
  except BrokenPipeError:  # `xlnet-classify --help | head`: what was read is enough
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


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
  tool's docstring) is what --help shows (help_text); --helpfull's absl reads the __main__
  module's, which is a thin run/ script's or an installed console script's, not the tool's
  module."""
  if own_help_requested(sys.argv):
    # absl files a script's own flags (run/benchmark.py's) under its path, not "__main__".
    module = sys.argv[0] if main.__module__ == "__main__" else main.__module__
    _print_help(module, usage if usage is not None else sys.modules["__main__"].__doc__)
    sys.exit(0)
  if usage is not None:
    sys.modules["__main__"].__doc__ = usage

  def main_reporting_user_errors(argv):
    # absl shows INFO by default; a tool's INFO lines (a loader's summary) repeat or detail
    # what it prints itself. absl's own --verbosity (-v), when given, decides.
    if not flags.FLAGS.verbose and not flags.FLAGS["verbosity"].present:
      absl_logging.set_verbosity(absl_logging.WARNING)
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
