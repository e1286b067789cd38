"""The package's floors: every module imports only its own folder and the folders below it,
at module level (no import cycle hidden in a function), and nothing imports a sibling on its
floor. BUILD.md states the same floors."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "xlnet_tf")

# Lowest first. Folders on one floor do not import each other. The command-line tools stand on
# top: nothing imports them (their flags are defined when they are imported).
# The checkpoint formats stand below the model classes: they read and write any model handed
# to them, so XLNetModel.from_pretrained and the heads' call down into them.
FLOORS = (("utils", "numerics"), ("config",), ("text",), ("checkpoints",), ("modeling",),
          ("objectives",), ("heads",), ("training",), ("inference", "serving"),
          ("pretraining", "tasks"), ("studies",), ("benchmarks",), ("cli",))
FLOOR_OF = {folder: level for level, folders in enumerate(FLOORS) for folder in folders}
# Imports of the package's top-level names (`from xlnet_tf import XLNetModel`) are allowed here
# only: run/benchmark.py --baseline times another revision's package with this revision's
# benchmark code, which therefore names what every revision has. No module imports xlnet_tf
# inside a function (run/benchmark.py imports the module of a row in the row's process).
TOP_LEVEL_NAMES_ALLOWED = ("benchmarks",)


def modules():
  for directory, _, files in os.walk(PACKAGE):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(directory, name)
        parts = os.path.relpath(path, PACKAGE)[:-3].split(os.sep)
        yield path, parts


def folder_of(parts):
  """The top folder (or loose module) of xlnet_tf a module path lies in; None for __init__."""
  return None if parts == ["__init__"] else parts[0]


def imported_folders(node):
  """The xlnet_tf folders an import statement names."""
  if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
    parts = node.module.split(".")
    if parts[0] != "xlnet_tf":
      return []
    if len(parts) > 1:
      return [parts[1]]
    return [alias.name for alias in node.names]  # from xlnet_tf import checkpoints, XLNetModel
  if isinstance(node, ast.Import):
    return [(alias.name.split(".") + ["the package itself"])[1] for alias in node.names
            if alias.name.split(".")[0] == "xlnet_tf"]
  return []


def test_floors_cover_every_folder():
  folders = {folder_of(parts) for _, parts in modules()} - {None}
  assert folders == set(FLOOR_OF)
  loose = [name for name in os.listdir(PACKAGE) if name.endswith(".py")]
  assert len(loose) <= 3, loose


@pytest.mark.parametrize("path,parts", list(modules()), ids=lambda value: "/".join(value)
                         if isinstance(value, list) else None)
def test_imports_run_downward(path, parts):
  folder = folder_of(parts)
  if folder is None:
    return  # the package's public names, loaded on first use
  with open(path, encoding="utf-8") as handle:
    tree = ast.parse(handle.read())
  top_level = set(map(id, tree.body))
  wrong = []
  for node in ast.walk(tree):
    for imported in imported_folders(node):
      if id(node) not in top_level:
        wrong.append(f"line {node.lineno}: a function-local import of xlnet_tf.{imported}")
      elif imported not in FLOOR_OF:
        if folder not in TOP_LEVEL_NAMES_ALLOWED:
          wrong.append(f"line {node.lineno}: the package's top-level name {imported}")
      elif imported != folder and FLOOR_OF[imported] >= FLOOR_OF[folder]:
        wrong.append(f"line {node.lineno}: {imported} is not below {folder}")
  assert not wrong, "\n".join(wrong)


def test_no_lazy_subpackages():
  """Only the package's own __init__ loads names on first use (so `import xlnet_tf` stays
  light); a subpackage imports what it exports."""
  for path, parts in modules():
    if parts[-1] == "__init__" and len(parts) > 1:
      with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
      names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
      assert "__getattr__" not in names, path
