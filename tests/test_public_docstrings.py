"""The public API's docstrings, in the Google style the TensorFlow Model Garden writes.

Every public name has a docstring whose first line is a one-line summary (followed by a blank
line when more comes). A function or method that takes arguments (besides self, cls and
**kwargs) names each of them under `Args:`, and says under `Returns:` what it returns when it
returns a value (`Yields:` for a generator). A class names its constructor's arguments under
`Args:` in the class docstring; a dataclass names its fields under `Attributes:`.

The names: the `__all__` lists of PUBLIC_MODULES and the ENTRY_POINTS, and of each class the
public methods and properties that xlnet_tf's own classes define (not those it inherits from
Keras). Whether a function returns a value is read from its source (a `return` with a value
in its own body). Nothing is built: the docstrings, signatures and sources are read.
"""

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
import types

import pytest

PUBLIC_MODULES = ("xlnet_tf", "xlnet_tf.checkpoints", "xlnet_tf.inference", "xlnet_tf.serving",
                  "xlnet_tf.text")
ENTRY_POINTS = {"xlnet_tf.training": ("create_optimizer",),
                "xlnet_tf.pretraining": ("pretraining_dataset", "create_pretraining_data"),
                "xlnet_tf.tasks": ("finetune", "run_finetuning", "ModelSource", "PretrainedModel",
                                   "TaskOptions")}
# An entry of an Args:/Attributes: section: `name:` or `name (type):`, *args and **kwargs too.
_ENTRY = re.compile(r"^(\*{0,2}\w+)(?: \([^)]*\))?:(?:\s|$)")


def public_names():
  """{qualified name: object} of PUBLIC_MODULES' __all__ and ENTRY_POINTS (values without a
  docstring of their own, such as ints and dicts, left out)."""
  names = {}
  for module_name in PUBLIC_MODULES:
    module = importlib.import_module(module_name)
    for name in module.__all__:
      names[f"{module_name}.{name}"] = getattr(module, name)
  for module_name, entry_points in ENTRY_POINTS.items():
    module = importlib.import_module(module_name)
    for name in entry_points:
      names[f"{module_name}.{name}"] = getattr(module, name)
  return {name: value for name, value in names.items()
          if isinstance(value, types.ModuleType) or callable(value)}


def own_members(cls):
  """{qualified name: function or property} of the public methods and properties defined by
  the xlnet_tf classes among `cls` and its bases."""
  members = {}
  for klass in cls.__mro__:
    if not klass.__module__.startswith("xlnet_tf."):
      continue
    for name, value in vars(klass).items():
      if name.startswith("_"):
        continue
      if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
      if isinstance(value, property) or inspect.isfunction(value):
        members[f"{klass.__module__}.{klass.__qualname__}.{name}"] = value
  return members


def documented():
  """{qualified name: object} of everything checked: the public names and their classes'
  members."""
  everything = {}
  for name, value in public_names().items():
    qualified = (f"{value.__module__}.{value.__qualname__}"
                 if inspect.isclass(value) or inspect.isfunction(value) else name)
    everything[qualified] = value
    if inspect.isclass(value):
      everything.update(own_members(value))
  return everything


DOCUMENTED = documented()


def section_entries(docstring: str, title: str):
  """The names listed in the `title:` section of `docstring` (None without the section)."""
  lines = inspect.cleandoc(docstring).splitlines()
  for index, line in enumerate(lines):
    if line.strip() != f"{title}:":
      continue
    indent = len(line) - len(line.lstrip())
    entries, entry_indent = set(), None
    for entry in lines[index + 1:]:
      if not entry.strip():
        continue
      depth = len(entry) - len(entry.lstrip())
      if depth <= indent:
        break
      entry_indent = depth if entry_indent is None else entry_indent
      match = _ENTRY.match(entry.strip())
      if depth == entry_indent and match:
        entries.add(match.group(1).lstrip("*"))
    return entries
  return None


def has_section(docstring: str, title: str) -> bool:
  return any(line.strip() == f"{title}:" for line in docstring.splitlines())


def arguments(function, bound: bool):
  """The parameter names a docstring must document: all but self/cls (`bound`) and **kwargs."""
  parameters = list(inspect.signature(function).parameters.values())
  if bound:
    parameters = parameters[1:]
  return [parameter.name for parameter in parameters
          if parameter.kind is not parameter.VAR_KEYWORD]


def returns_and_yields(function):
  """(whether `function`'s own body returns a value, whether it yields), read from its source."""
  source = textwrap.dedent(inspect.getsource(inspect.unwrap(function)))
  definition = ast.parse(source).body[0]
  returns = yields = False
  pending = list(definition.body)
  while pending:
    node = pending.pop()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
      continue  # a nested definition's returns are its own
    if isinstance(node, ast.Return) and node.value is not None and not (
        isinstance(node.value, ast.Constant) and node.value.value is None):
      returns = True
    if isinstance(node, (ast.Yield, ast.YieldFrom)):
      yields = True
    pending.extend(ast.iter_child_nodes(node))
  return returns, yields


def test_the_names_are_found():
  """The enumeration reaches what the API promises (a guard against an empty parametrization)."""
  for name in ("xlnet_tf.config.XLNetConfig.from_json_file",
               "xlnet_tf.modeling.backbone.XLNetModel.save_pretrained",
               "xlnet_tf.heads.base.XLNetHead.quantize",
               "xlnet_tf.heads.base.XLNetHead.preprocessor",
               "xlnet_tf.text.tokenizer.XLNetTokenizer.encode",
               "xlnet_tf.inference.generation.generate",
               "xlnet_tf.serving.saved_model.export_saved_model",
               "xlnet_tf.tasks.finetuning.finetune"):
    assert name in DOCUMENTED, name
  assert not any(".keras." in name or name.startswith("keras.") for name in DOCUMENTED)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_docstring(name):
  value = DOCUMENTED[name]
  target = value.fget if isinstance(value, property) else value
  # Its own: inspect.getdoc would take an overridden method's from the base class (Keras').
  docstring = target.__doc__
  assert docstring and docstring.strip(), f"{name}: no docstring"
  lines = inspect.cleandoc(docstring).splitlines()
  assert lines[0].strip(), f"{name}: the docstring starts with an empty line"
  assert len(lines) == 1 or not lines[1].strip(), (
      f"{name}: the summary is not one line followed by a blank line: {lines[:2]}")
  if isinstance(value, types.ModuleType) or isinstance(value, property):
    return
  if inspect.isclass(value):
    if dataclasses.is_dataclass(value):
      fields = [field.name for field in dataclasses.fields(value)]
      listed = section_entries(docstring, "Attributes") or set()
      assert not set(fields) - listed, (
          f"{name}: Attributes: does not name {sorted(set(fields) - listed)}")
      return
    constructor = next(klass.__dict__["__init__"] for klass in value.__mro__
                       if "__init__" in klass.__dict__)
    if getattr(constructor, "__module__", "").startswith("xlnet_tf."):
      wanted = arguments(constructor, bound=True)
      listed = section_entries(docstring, "Args") or set()
      assert not set(wanted) - listed, (
          f"{name}: its Args: do not name the constructor's {sorted(set(wanted) - listed)}")
    return
  bound = "." in value.__qualname__  # a method (or classmethod) of a class
  wanted = arguments(value, bound)
  if wanted:
    listed = section_entries(docstring, "Args")
    assert listed is not None, f"{name}: no Args: section for {wanted}"
    assert not set(wanted) - listed, f"{name}: Args: does not name {sorted(set(wanted) - listed)}"
  returns, yields = returns_and_yields(value)
  if returns:
    assert has_section(docstring, "Returns"), f"{name}: returns a value, has no Returns:"
  if yields:
    assert has_section(docstring, "Yields"), f"{name}: yields, has no Yields:"
