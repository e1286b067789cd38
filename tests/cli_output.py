"""Running the command-line tools in a subprocess and reading what they print."""

import os
import re
import subprocess
import sys

from forked_tools import run_forked, start_forked

ROOT = os.path.join(os.path.dirname(__file__), "..")
# absl's log line format: C++ lines name a .cc/.h file, Python lines a .py file.
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\]")
_OWN_FILES = {name for _, _, names in os.walk(os.path.join(ROOT, "xlnet_tf")) for name in names}


# Read when an interpreter starts: a forked child cannot take them.
_START_UP_VARIABLES = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONHOME")


def run_tool(script, *arguments, timeout=600, extra_environment=None, fresh_process=False):
  """Runs run/ or data/ `script` with TensorFlow's logging settings left at their defaults
  (and `extra_environment`'s variables set), in a child of the forking server
  (tests/forked_tools.py); in a new interpreter with `fresh_process` (what a test of the
  tool's start-up output needs) or when `extra_environment` sets a start-up variable."""
  environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  environment.update(extra_environment or {})
  argv = [os.path.join(ROOT, script), *map(str, arguments)]
  if not fresh_process and not set(extra_environment or {}) & set(_START_UP_VARIABLES):
    return run_forked(argv, env=environment, timeout=timeout)
  return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                        timeout=timeout, env=environment)


def start_tool(script, *arguments, extra_environment=None):
  """run_tool's run started and left running (a forked_tools.ForkedProcess, as
  subprocess.Popen's): the test reads its output as it comes and may send it signals."""
  environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  environment.update(extra_environment or {})
  script = script if os.path.isabs(script) else os.path.join(ROOT, script)
  return start_forked([script, *map(str, arguments)], env=environment)


def tensorflow_log_lines(stderr):
  """The lines of TensorFlow's (and other libraries') logs and warnings, not xlnet_tf's own
  progress logs."""
  noise = []
  for line in stderr.splitlines():
    match = _LOG_LINE.match(line)
    if ((match and match.group(1) not in _OWN_FILES) or "absl::InitializeLog" in line
        or line.startswith("WARNING:tensorflow") or "Warning:" in line):
      noise.append(line)
  return noise
