"""Writing JSON files: the one writer every module and CLI uses; and reading a JSON object
file with its faults as one-line errors naming it."""

import json
import os

from xlnet_tf.utils.errors import UserInputError


def write_json(path: str, value, sort_keys: bool = False) -> str:
  """Writes `value` as indented UTF-8 JSON (NumPy scalars as floats), creating the directory,
  and closes the file; returns the path."""
  directory = os.path.dirname(path)
  if directory:
    os.makedirs(directory, exist_ok=True)
  with open(path, "w", encoding="utf-8") as handle:
    json.dump(value, handle, indent=2, sort_keys=sort_keys, default=float)
    handle.write("\n")
  return path


def read_json(path: str):
  with open(path, encoding="utf-8") as handle:
    return json.load(handle)


def read_json_object(path: str, expected: str = "a JSON object") -> dict:
  """The JSON object in `path`; UserInputError naming the file if it is not one (`expected`
  says what it should hold, for the message)."""
  try:
    with open(path, encoding="utf-8") as handle:
      value = json.load(handle)
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise UserInputError(f"{path}: not valid JSON ({error})") from None
  if not isinstance(value, dict):
    raise UserInputError(f"{path}: expected {expected}")
  return value
