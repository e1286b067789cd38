"""The public API: every name in every `__all__` imports and the top-level names are what the
package promises (the README's Python blocks run in tests/test_tool_chain.py, on directories
the tools wrote)."""

import importlib
import pkgutil

import pytest

import xlnet_tf
from xlnet_tf import XLNetPretrainer



def all_modules():
  names = ["xlnet_tf"]
  for info in pkgutil.walk_packages(xlnet_tf.__path__, "xlnet_tf."):
    # The commands define their absl flags when imported (several share names), so one process
    # imports one of them: tests/test_installed_commands.py runs each in its own.
    if not info.name.startswith("xlnet_tf.cli."):
      names.append(info.name)
  return names


def test_top_level_names():
  expected = {"XLNetConfig", "XLNetModel", "XLNetPretrainer", "XLNetClassifier",
              "XLNetMultipleChoice", "XLNetQuestionAnswering", "XLNetTokenClassifier",
              "XLNetTokenizer", "XLNetPreprocessor", "checkpoints"}
  assert set(xlnet_tf.__all__) == expected
  assert XLNetPretrainer.__module__ == "xlnet_tf.heads.pretrainer"
  with pytest.raises(AttributeError, match="no attribute 'XLNetNothing'"):
    xlnet_tf.XLNetNothing  # noqa: B018


@pytest.mark.parametrize("module_name", all_modules())
def test_every_name_in_all_imports(module_name):
  module = importlib.import_module(module_name)
  if module_name.endswith("__init__") or hasattr(module, "__path__"):  # a package
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
  for name in getattr(module, "__all__", []):
    assert getattr(module, name) is not None, f"{module_name}.{name}"


def test_subpackage_entry_points():
  from xlnet_tf.serving.saved_model import export_saved_model  # noqa: F401
  from xlnet_tf.pretraining import pretraining_dataset  # noqa: F401
  from xlnet_tf.tasks import finetune  # noqa: F401
  from xlnet_tf.training import create_optimizer  # noqa: F401
