"""Writing JSON files: the one writer every module and CLI uses; and reading a JSON object
file with its faults as one-line errors naming it. Paths on any file system (utils.files)."""

import json
import os

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError


def write_json(path: str, value, sort_keys: bool = False) -> str:
  """Writes `value` as indented UTF-8 JSON (NumPy scalars as floats), creating the directory,
  whole or not at all (files.write_text); returns the path."""
  directory = os.path.dirname(path)
  if directory:
    files.makedirs(directory)
  text = json.dumps(value, indent=2, sort_keys=sort_keys, default=float)
  return files.write_text(path, text + "\n")


def read_json(path: str, expected: str = "a JSON value"):
  """The JSON value in `path`; UserInputError naming the file if it is not JSON (`expected`
  says what it should hold, for the message)."""
  try:
    with files.open_file(path) as handle:
      return json.load(handle)
  except UnicodeDecodeError as error:  # a binary file (a SentencePiece model, weights, ...)
    raise UserInputError(f"{path}: not a JSON file: byte 0x{error.object[error.start]:02x} at "
                         f"offset {error.start} is not UTF-8 text; expected {expected}"
                         ) from None
  except json.JSONDecodeError as error:
    raise UserInputError(f"{path}: not valid JSON ({error})") from None
  except RecursionError:  # nesting deeper than the parser's stack
    raise UserInputError(f"{path}: JSON nested too deeply; expected {expected}") from None


def read_json_object(path: str, expected: str = "a JSON object") -> dict:
  """The JSON object in `path`; UserInputError naming the file if it is not one (`expected`
  says what it should hold, for the message)."""
  value = read_json(path, expected)
  if not isinstance(value, dict):
    raise UserInputError(f"{path}: expected {expected}")
  return value
