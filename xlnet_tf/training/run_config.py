"""A run's options as one tree, and the file that records it (RUN_CONFIG_FILE).

A run's options are a dataclass (frozen or not) whose fields hold plain values (None, bool, int,
float, str, and lists, tuples or str-keyed dicts of them) or further dataclasses, the groups of
the tree. A field is named by its dotted path from the root: "training.optimizer.learning_rate".

  to_dict(options)                 the tree as JSON-ready nested dicts (tuples as lists)
  from_dict(cls, value, source)    strict: an unknown key, a value of the wrong type, a missing
                                   required field (one without a default) or a value the
                                   dataclass refuses is one UserInputError line naming `source`
                                   and the dotted key; a missing field with a default keeps it
  write(directory, options)        directory/RUN_CONFIG_FILE, written whole (utils.json_files)
  read(path, cls)                  from_dict of the file, its faults named the same way
  replace(options, values, names)  a copy with {dotted path: value} set, each value checked
                                   against its field's type (`names`: the fields' names for
                                   messages, such as their flags)
  value_at(options, path)          the value of the field at a dotted path
  field_paths(cls)                 the dotted paths of a class's values, in field order
  differences(recorded, current)   the dotted names of the fields whose values differ
  names_to_paths(cls, chosen)      {field name: dotted path} for options set by name

Paths go through utils.files, so gs:// works.
"""

import collections.abc
import dataclasses
import difflib
import functools
import math
import os
import typing
from typing import Any, Dict, List, Mapping, Optional

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json, write_json

__all__ = ["RUN_CONFIG_FILE", "differences", "field_paths", "from_dict", "names_to_paths",
           "read", "replace", "to_dict", "value_at", "write"]

RUN_CONFIG_FILE = "run_config.json"  # in a run's directory: its options, whole


def _is_options(value) -> bool:
  return dataclasses.is_dataclass(value)


def _fields(cls) -> List[dataclasses.Field]:
  return [field for field in dataclasses.fields(cls) if field.init]


@functools.lru_cache(maxsize=None)
def _types(cls) -> Dict[str, Any]:
  return typing.get_type_hints(cls)


def to_dict(options) -> Dict[str, Any]:
  """`options` (a dataclass) as nested dicts of JSON values, in field order."""
  return {field.name: _plain(getattr(options, field.name), field.name)
          for field in _fields(options)}


def _plain(value, name: str):
  if _is_options(value):
    return to_dict(value)
  if isinstance(value, (list, tuple)):
    return [_plain(item, name) for item in value]
  if isinstance(value, dict):
    return {str(key): _plain(item, name) for key, item in value.items()}
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  raise TypeError(f"{name}: {type(value).__name__} values have no JSON form in a run config")


def from_dict(cls, value: Mapping[str, Any], source: str = "the run config"):
  """The options of class `cls` that `value` (to_dict's form) holds; see the module docstring.
  Messages read "`source`: <dotted key>: <what is wrong>"."""
  return _build(cls, value, source, "")


def _build(cls, value, source: str, prefix: str):
  if not isinstance(value, dict):
    raise UserInputError(f"{source}: {prefix.rstrip('.') or 'the run config'}: expected an "
                         f"object of {cls.__name__}'s fields, got {_shown(value)}")
  fields = {field.name: field for field in _fields(cls)}
  unknown = [key for key in value if key not in fields]
  if unknown:
    close = difflib.get_close_matches(unknown[0], fields, n=1)
    raise UserInputError(f"{source}: {prefix}{unknown[0]}: unknown key"
                         + (f" (did you mean {prefix}{close[0]}?)" if close else ""))
  types = _types(cls)
  values = {}
  for name, field in fields.items():
    key = prefix + name
    if name not in value:
      if (field.default is dataclasses.MISSING
          and field.default_factory is dataclasses.MISSING):
        raise UserInputError(f"{source}: {key}: missing (a required field)")
      continue
    values[name] = _value(types[name], value[name], source, key)
  try:
    return cls(**values)
  except (UserInputError, TypeError, ValueError) as error:  # the dataclass's own checks
    raise UserInputError(f"{source}: {prefix.rstrip('.') or cls.__name__}: {error}") from None


def _value(kind, value, source: str, key: str):
  """`value` as a value of type `kind`, or UserInputError naming `key`."""
  converted = _converted(kind, value, source, key)
  if converted is _WRONG:
    raise UserInputError(f"{source}: {key}: expected {_described(kind)}, got {_shown(value)}")
  return converted


_WRONG = object()  # what _converted returns for a value of another type


def _converted(kind, value, source: str, key: str):
  if kind is Any:
    return value
  if dataclasses.is_dataclass(kind):
    return _build(kind, value, source, key + ".") if isinstance(value, dict) else _WRONG
  origin, arguments = typing.get_origin(kind), typing.get_args(kind)
  if origin is typing.Union:
    if value is None:
      return None if type(None) in arguments else _WRONG
    for option in arguments:
      if option is not type(None):
        converted = _converted(option, value, source, key)
        if converted is not _WRONG:
          return converted
    return _WRONG
  if kind is type(None):
    return None if value is None else _WRONG
  if kind is bool:
    return value if isinstance(value, bool) else _WRONG
  if kind is int:
    return value if isinstance(value, int) and not isinstance(value, bool) else _WRONG
  if kind is float:  # an integer is a float's value too (JSON writes 2.0 as 2.0, people 2)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
      return float(value)
    return _WRONG
  if kind is str:
    return value if isinstance(value, str) else _WRONG
  if origin in (list, tuple, typing.Sequence, collections.abc.Sequence):
    if not isinstance(value, (list, tuple)):
      return _WRONG
    if origin is tuple and arguments and arguments[-1] is not Ellipsis:
      if len(arguments) != len(value):
        return _WRONG
      kinds = arguments
    else:
      kinds = [arguments[0] if arguments else Any] * len(value)
    items = [_value(item_kind, item, source, f"{key}[{index}]")
             for index, (item_kind, item) in enumerate(zip(kinds, value))]
    return list(items) if origin is list else tuple(items)
  if origin in (dict, typing.Mapping, collections.abc.Mapping):
    if not isinstance(value, dict):
      return _WRONG
    key_kind, item_kind = arguments or (str, Any)
    if key_kind is not str:
      raise TypeError(f"{key}: a run config's dicts have str keys, not {key_kind}")
    return {name: _value(item_kind, item, source, f"{key}.{name}") for name, item in value.items()}
  raise TypeError(f"{key}: a run config holds no values of type {kind}")


def _described(kind) -> str:
  if dataclasses.is_dataclass(kind):
    return f"an object of {kind.__name__}'s fields"
  if typing.get_origin(kind) is typing.Union:
    return " or ".join(_described(option) for option in typing.get_args(kind))
  names = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
           type(None): "null"}
  if kind in names:
    return names[kind]
  origin = typing.get_origin(kind)
  if origin in (dict, typing.Mapping, collections.abc.Mapping):
    return "an object"
  return "a list"


def _shown(value) -> str:
  text = repr(value)
  return text if len(text) <= 60 else text[:57] + "..."


def write(directory: str, options) -> str:
  """Writes `options` to directory/RUN_CONFIG_FILE, whole or not at all; returns the path."""
  return write_json(os.path.join(directory, RUN_CONFIG_FILE), to_dict(options))


def read(path: str, cls):
  """The options of class `cls` recorded in the JSON file `path` (from_dict, messages naming
  `path`)."""
  if not files.exists(path):
    raise UserInputError(f"{path}: no such run config file")
  value = read_json(path, f"a run config (an object of {cls.__name__}'s fields)")
  return from_dict(cls, value, path)


def field_paths(cls) -> List[str]:
  """The dotted paths of the values (not the groups) of options of class `cls`, in order."""
  paths = []
  types = _types(cls)
  for field in _fields(cls):
    kind = types[field.name]
    if dataclasses.is_dataclass(kind):
      paths += [f"{field.name}.{path}" for path in field_paths(kind)]
    else:
      paths.append(field.name)
  return paths


def replace(options, values: Mapping[str, Any], names: Optional[Mapping[str, str]] = None,
            _prefix: str = ""):
  """A copy of `options` with each of `values` ({dotted path: value}) set; a value of the wrong
  type is one UserInputError line naming the field as `names` ({dotted path: name}) does (the
  flag that sets it), else by its path. An unknown path is a KeyError (a caller's mistake, not
  the user's)."""
  names = names or {}
  grouped: Dict[str, Dict[str, Any]] = {}
  own = {}
  types = _types(type(options))
  fields = {field.name for field in _fields(options)}
  for path, value in values.items():
    name, _, rest = path.partition(".")
    if name not in fields or (rest and not dataclasses.is_dataclass(types[name])):
      raise KeyError(f"{type(options).__name__} has no field {_prefix + path!r}")
    if rest:
      grouped.setdefault(name, {})[rest] = value
    else:
      kind = types[name]
      if dataclasses.is_dataclass(kind) and not isinstance(value, kind):
        raise KeyError(f"{_prefix + path!r} is a group of options; set its fields")
      own[name] = value if dataclasses.is_dataclass(kind) else _checked(
          kind, value, names.get(path, _prefix + path))
  for name, group_values in grouped.items():
    group = own.get(name, getattr(options, name))
    inner = {path[len(name) + 1:]: shown for path, shown in names.items()
             if path.startswith(name + ".")}
    own[name] = replace(group, group_values, inner, f"{_prefix}{name}.")
  return dataclasses.replace(options, **own)


def _checked(kind, value, shown: str):
  converted = _converted(kind, value, shown, "")
  if converted is _WRONG:
    raise UserInputError(f"{shown}={_shown(value)}: expected {_described(kind)}")
  return converted


def value_at(options, path: str):
  """The value of the field of `options` at the dotted `path`."""
  for name in path.split("."):
    options = getattr(options, name)
  return options


def differences(recorded, current) -> List[str]:
  """The dotted names of the fields whose values differ between two trees (dataclasses, or
  to_dict's form, such as a file read as JSON), in field order; a field only one of them holds
  counts as differing. Numbers compare by value (1 == 1.0); NaN equals NaN."""
  recorded = to_dict(recorded) if _is_options(recorded) else recorded
  current = to_dict(current) if _is_options(current) else current
  return _differing(recorded, current, "")


def _differing(recorded, current, prefix: str) -> List[str]:
  if isinstance(recorded, dict) and isinstance(current, dict):
    names = list(recorded) + [name for name in current if name not in recorded]
    found = []
    for name in names:
      if name not in recorded or name not in current:
        found.append(prefix + name)
      else:
        found += _differing(recorded[name], current[name], f"{prefix}{name}.")
    return found
  return [] if _same(recorded, current) else [prefix.rstrip(".")]


def _same(recorded, current) -> bool:
  if isinstance(recorded, (list, tuple)) and isinstance(current, (list, tuple)):
    return len(recorded) == len(current) and all(map(_same, recorded, current))
  if isinstance(recorded, bool) or isinstance(current, bool):
    return type(recorded) is type(current) and recorded == current
  if isinstance(recorded, float) and isinstance(current, float):
    if math.isnan(recorded) and math.isnan(current):
      return True
  return recorded == current


def names_to_paths(cls, chosen: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
  """{name: dotted path} of the values of options of class `cls` (`field_paths`), for setting
  them by their own names: each name leads to the one field it names. A name that two fields
  share must be `chosen` ({name: the dotted path it names}); one not chosen is a TypeError (at
  import, so no name silently goes to one of two fields)."""
  chosen = dict(chosen or {})
  found: Dict[str, List[str]] = {}
  for path in field_paths(cls):
    found.setdefault(path.rsplit(".", 1)[-1], []).append(path)
  result = {}
  for name, paths in found.items():
    if name in chosen:
      if chosen[name] not in paths:
        raise TypeError(f"{cls.__name__}: {name!r} is chosen as {chosen[name]!r}, which is not "
                        f"one of its fields {paths}")
      result[name] = chosen.pop(name)
    elif len(paths) > 1:
      raise TypeError(f"{cls.__name__}: the name {name!r} is {' and '.join(paths)}; choose "
                      "the one it sets (names_to_paths' `chosen`)")
    else:
      result[name] = paths[0]
  if chosen:
    raise TypeError(f"{cls.__name__}: no field is named {sorted(chosen)}")
  return result
