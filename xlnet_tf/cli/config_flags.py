"""--config_file, and a command's options tree built from it and from the command line.

A command's options are one tree of dataclasses (training.run_config). The command names once,
explicitly, which flag sets which field: a mapping {flag name: dotted path}, e.g.
{"learning_rate": "training.optimizer.learning_rate", "clip": "training.optimizer.clip_norm"}.
Nothing is routed by a flag's position or guessed from its name. Then:

  define_config_file_flag()       defines --config_file (a run_config.json, e.g. a run's own)
  options_from_flags(preset, mapping, paths)
      with --config_file: the file's tree, read strictly as type(preset) (run_config.read), and
        over it each mapped flag given on the command line (FLAGS[name].present);
      without: `preset`, and over it each mapped flag's value that is not None (defaults
        included; a flag whose default is None leaves the preset's value).
      `paths`: the mapped flags that name files or directories. A config file's paths are
      recorded, not followed (a file from elsewhere could name any path): each path the file
      holds must be given again on the command line, else one UsageError line names its flag.
  flag_names(mapping, paths)      dotted paths as the user knows them, for messages: "--flag"
                                  where a flag sets the field, else the path

The same command line with the run's own MODEL_DIR/run_config.json as --config_file (and its
paths) repeats the run; flags given beside it change what they set.
"""

from typing import Any, Callable, Dict, Iterable, List, Mapping

from absl import app
from absl import flags

from xlnet_tf.training import run_config
from xlnet_tf.utils.errors import UserInputError

__all__ = ["CONFIG_FILE_FLAG", "define_config_file_flag", "flag_names", "options_from_flags"]

CONFIG_FILE_FLAG = "config_file"


def define_config_file_flag(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines --config_file."""
  flags.DEFINE_string(
      CONFIG_FILE_FLAG, None, f"A {run_config.RUN_CONFIG_FILE} (a run's own, in its model "
      "directory) holding every setting of this command: the run starts from it, and the flags "
      "given on the command line change what they set. Its paths are not followed: give them "
      "as flags.", flag_values=flag_values)


def options_from_flags(preset, mapping: Mapping[str, str], paths: Iterable[str] = (),
                       replace: Callable = run_config.replace,
                       flag_values: flags.FlagValues = flags.FLAGS):
  """The command's options tree (see the module docstring).

  Args:
    preset: the options without a config file (a dataclass: the tree's root); its type is the
      type the config file is read as.
    mapping: {flag name: the dotted path of the field it sets}.
    paths: the flags of `mapping` that name files or directories.
    replace: (options, {dotted path: value}, {dotted path: "--flag"}) -> options, the setter
      (run_config.replace, or one that also keeps the tree consistent, such as a recipe's);
      the names, for messages, are those of every mapped flag.
    flag_values: the parsed flags.

  Returns:
    The options tree, of type(preset).

  Raises:
    app.UsageError: a path the config file holds and the command line does not give.
    UserInputError: a faulty config file, or a flag value of the wrong type for its field (one
      line naming the file and the key, or the flag).
  """
  unknown = [name for name in mapping if name not in flag_values]
  paths = set(paths)
  if unknown or not paths <= set(mapping):
    raise KeyError(f"flags not defined or not mapped: {unknown or sorted(paths - set(mapping))}")
  names = {path: f"--{name}" for name, path in mapping.items()}
  config_file = flag_values[CONFIG_FILE_FLAG].value if CONFIG_FILE_FLAG in flag_values else None
  if config_file:
    options = run_config.read(config_file, type(preset))
    recorded = run_config.to_dict(options)
    for name in sorted(paths):
      if _at(recorded, mapping[name]) is not None and not flag_values[name].present:
        raise app.UsageError(
            f"--{CONFIG_FILE_FLAG}={config_file}: {mapping[name]} is "
            f"{_at(recorded, mapping[name])!r}; a config file's paths are not followed: give "
            f"--{name}")
      if not flag_values[name].present:  # None there, and not given: the flag's default
        options = replace(options, {mapping[name]: flag_values[name].value}, names)
    given = [name for name in mapping if flag_values[name].present]
  else:
    options = preset
    given = [name for name in mapping if flag_values[name].value is not None]
  values: Dict[str, Any] = {mapping[name]: flag_values[name].value for name in given}
  try:
    return replace(options, values, names)
  except UserInputError as error:
    if config_file:
      raise UserInputError(f"--{CONFIG_FILE_FLAG}={config_file} with the flags given: {error}"
                           ) from None
    raise


def _at(tree: Mapping[str, Any], path: str):
  for name in path.split("."):
    tree = tree[name]
  return tree


def flag_names(mapping: Mapping[str, str], paths: Iterable[str]) -> List[str]:
  """Each dotted path of `paths` as "--flag (path)" where a flag of `mapping` sets it, else
  the path itself."""
  by_path = {path: name for name, path in mapping.items()}
  return [f"--{by_path[path]} ({path})" if path in by_path else path for path in paths]
