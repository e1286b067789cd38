"""--help of every installed command: the usage under the name it was called by, the tool's own
flags (each with its default and help, the required ones marked), grouped by the module that
defines them; not TensorFlow's, absl's or a test runner's flags (--helpfull lists those)."""

import ast
import os
import re

import pytest

import cli_output
from cli_output import run_tool
from forked_tools import run_forked
from test_installed_commands import CLI_PACKAGE, console_scripts

# Flags of TensorFlow, absl and test runners that absl's --helpfull shows.
OTHER_FLAGS = re.compile(r"(tf_|xla_|test_srcdir|test_tmpdir|test_random_seed|flagfile|undefok|"
                         r"verbosity|logtostderr|alsologtostderr|only_check_args|pdb)")
_FLAG_DEFINITION = re.compile(r"DEFINE_\w+$")
# A flag's entry in the help: `  --name: ...` or `  --[no]name (required): ...`, and the lines
# it wraps onto.
_FLAG_ENTRY = re.compile(r"^  --(?:\[no\])?(\w+)( \(required\))?: (.*(?:\n {6}.*)*)", re.M)


def defined_flags(module):
  """The flags a command's module defines itself (flags.DEFINE_*("name", ...) calls)."""
  with open(os.path.join(CLI_PACKAGE, module + ".py"), encoding="utf-8") as handle:
    tree = ast.parse(handle.read())
  return [node.args[0].value for node in ast.walk(tree)
          if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and _FLAG_DEFINITION.match(node.func.attr) and node.args
          and isinstance(node.args[0], ast.Constant)]


@pytest.fixture(scope="module")
def launchers(tmp_path_factory):
  """{command: a script named as the command}, which calls its entry as the script pip writes
  does: its name is what the help shows."""
  folder = tmp_path_factory.mktemp("bin")
  paths = {}
  for command, target in console_scripts().items():
    module, function = target.split(":")
    paths[command] = folder / command
    paths[command].write_text(f"import sys\nfrom {module} import {function}\n"
                              f"sys.exit({function}())\n")
  return paths


def flag_entries(text):
  """{flag: (required, its help and default as one line)} of a help text."""
  return {match.group(1): (bool(match.group(2)), " ".join(match.group(3).split()))
          for match in _FLAG_ENTRY.finditer(text)}


@pytest.mark.parametrize("command", sorted(console_scripts()))
def test_help_shows_the_commands_own_flags_under_its_name(command, launchers):
  result = run_forked([launchers[command], "--help"], timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  text = result.stdout
  assert text.startswith(f"usage: {command} "), text[:300]
  module = console_scripts()[command].split(":")[0].rsplit(".", 1)[1]
  own = defined_flags(module)
  shown = flag_entries(text)
  assert own and set(own) <= set(shown), (set(own) - set(shown), text)
  assert "This tool's flags:\n" in text and "verbose" in shown
  assert not [flag for flag in shown if OTHER_FLAGS.match(flag)], sorted(shown)
  # Its own examples under its name, not as the checkout's script.
  assert f"python run/{module}.py" not in text and f"python data/{module}.py" not in text


def test_the_required_flags_and_defaults_are_shown(launchers):
  text = run_forked([launchers["xlnet-classify"], "--help"], timeout=120).stdout
  assert text.splitlines()[0] == "usage: xlnet-classify --output_dir=OUTPUT_DIR [--flag=value ...]"
  shown = flag_entries(text)
  assert shown["output_dir"][0] and not shown["train_file"][0]
  assert shown["regression"] == (False, "generic: real-valued labels. (default: false)")
  assert shown["train_batch_size"][1].endswith("(default: 32)")
  assert "default" not in shown["init_checkpoint"][1]  # None: nothing to show
  # The shared flags under their module's title; the shortest command first in the usage.
  assert ("\nModel, training and run (the training tools' shared flags):\n  --init_checkpoint:"
          in text)
  assert "\n  xlnet-classify --train_file=train.csv --init_checkpoint=" in text


@pytest.mark.parametrize("argument", ["-h", "--helpshort", "-?", "-help"])
def test_every_way_of_asking_shows_the_same_help(argument, launchers):
  expected = run_forked([launchers["xlnet-tag"], "--help"], timeout=120).stdout
  result = run_forked([launchers["xlnet-tag"], "--output_dir=out", argument], timeout=120)
  assert result.returncode == 0 and result.stdout == expected


def test_a_checkout_script_is_named_as_it_was_called():
  result = run_tool("run/classifier.py", "--help")
  assert result.returncode == 0, result.stderr[-2000:]
  name = f"python {os.path.join(cli_output.ROOT, 'run/classifier.py')}"  # as run_tool calls it
  assert result.stdout.startswith(f"usage: {name} --output_dir=OUTPUT_DIR"), result.stdout[:300]
  assert f"\n  {name} --train_file=train.csv" in result.stdout
