"""Writing JSON files: the one writer every module and CLI uses."""

import json
import os


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
