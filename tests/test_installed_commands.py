"""The console scripts setup.cfg installs: each names an existing `entry` of an xlnet_tf/cli/
module and its --help exits with status 0, showing the tool's docstring; every run/ and data/
script is a thin caller of one of them (no flags of its own). .ci/installed_commands runs the
same commands from an installed wheel."""

import ast
import configparser
import glob
import os

import pytest

from forked_tools import run_forked
from repository import ROOT

CLI_PACKAGE = os.path.join(ROOT, "xlnet_tf", "cli")
# What is not a command: the package marker and the flags several commands share.
NOT_COMMANDS = {"__init__", "common_flags", "config_flags", "lm_flags", "pretrained_flags"}
# A checkout-only tool: it checks out --baseline revisions with git and re-runs itself by path.
CHECKOUT_ONLY = {"run/benchmark.py"}
THIN_SCRIPT_STATEMENTS = 3  # docstring, the import, `if __name__ == "__main__": module.entry()`

# Runs `module:function` (a console_scripts target) as the console script pip writes does.
_LAUNCHER = """import importlib, sys
module, function = sys.argv.pop(1).split(":")
sys.exit(getattr(importlib.import_module(module), function)())
"""


def console_scripts():
  """{command: "module:function"} from setup.cfg."""
  parser = configparser.ConfigParser()
  parser.read(os.path.join(ROOT, "setup.cfg"))
  lines = parser["options.entry_points"]["console_scripts"].strip().splitlines()
  return dict(tuple(part.strip() for part in line.split("=")) for line in lines)


def parsed(path):
  with open(path, encoding="utf-8") as handle:
    return ast.parse(handle.read())


def top_level_functions(tree):
  return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def command_modules():
  return sorted(os.path.basename(path)[:-3] for path in glob.glob(f"{CLI_PACKAGE}/*.py")
                if os.path.basename(path)[:-3] not in NOT_COMMANDS)


def test_every_console_script_names_an_entry_of_a_cli_module():
  targets = console_scripts()
  assert all(command.startswith("xlnet-") for command in targets), targets
  named = []
  for command, target in targets.items():
    module, function = target.split(":")
    assert module.startswith("xlnet_tf.cli."), (command, target)
    named.append(module.rsplit(".", 1)[1])
    path = os.path.join(CLI_PACKAGE, named[-1] + ".py")
    assert os.path.exists(path), (command, target)
    assert {function, "main"} <= top_level_functions(parsed(path)), (command, target)
  assert sorted(named) == command_modules()  # one command per module, no module left out


def thin_scripts():
  return sorted(os.path.relpath(path, ROOT) for folder in ("run", "data")
                for path in glob.glob(os.path.join(ROOT, folder, "*.py"))
                if os.path.relpath(path, ROOT) not in CHECKOUT_ONLY)


@pytest.mark.parametrize("script", thin_scripts())
def test_run_and_data_scripts_are_thin_callers_of_an_entry(script):
  tree = parsed(os.path.join(ROOT, script))
  source = ast.unparse(tree)
  assert len(tree.body) <= THIN_SCRIPT_STATEMENTS and "flags" not in source, source
  module = os.path.basename(script)[:-3]
  assert f"from xlnet_tf.cli import {module}" in source and f"{module}.entry()" in source
  assert f"xlnet_tf.cli.{module}:entry" in console_scripts().values()


def test_every_command_has_a_script_in_the_checkout():
  scripts = {os.path.basename(script)[:-3] for script in thin_scripts()}
  assert scripts == set(command_modules())


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
  path = tmp_path_factory.mktemp("launcher") / "console_script.py"
  path.write_text(_LAUNCHER)
  return path


@pytest.mark.parametrize("command", sorted(console_scripts()))
def test_help_of_each_entry_exits_with_0_and_shows_the_tools_docstring(command, launcher):
  """Each in a child of the forking server (TensorFlow already imported): as the installed
  script calls it, with a fresh set of flags."""
  target = console_scripts()[command]
  result = run_forked([launcher, target, "--help"], timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  module = target.split(":")[0].rsplit(".", 1)[1]
  docstring = ast.get_docstring(parsed(os.path.join(CLI_PACKAGE, module + ".py")))
  # After the usage line (tests/cli/test_help.py).
  assert result.stdout.split("\n\n", 1)[1].startswith(docstring.splitlines()[0]), \
      result.stdout[:300]
