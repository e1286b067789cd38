"""Each row of run/benchmark.py in a process of its own (its own peak RSS, its own xlnet_tf
package for a --baseline row), and the --baseline revision checked out beside the repository.

A fresh row runs `python SCRIPT --worker=SPEC` (the script re-runs itself by path) and prints
its result as one `RESULT {json}` line. With --fork_rows, the rows whose process imports
TensorFlow anyway run in a child forked from a server that has imported it
(multiprocessing's forkserver, TensorFlow preloaded, no op run: forking after TensorFlow's
thread pools have started is unsafe), saving each row the 2-3 s import; the PyTorch and ONNX
Runtime rows still start a fresh interpreter. A forked child's peak RSS misses the pages of
the import it does not touch again (a tiny forward: 0.59 GB against 0.83 fresh), hence off by
default and refused with --memory.
"""

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.benchmarks import rows

_forkserver = {}


def measure(spec, script, work=None):
  """Runs the row `spec` in a process of its own: `python script --worker=SPEC`, or, given
  `work` (the worker's function, SPEC -> result) and a row that imports TensorFlow, a child
  forked from the forkserver. Returns the row's result, or spec with `error`: the last line
  the row's process wrote."""
  implementation = spec.get("implementation")
  forked = work is not None and (implementation in rows.TENSORFLOW_ROWS or (
      implementation == "matmul" and spec.get("device") != "cuda"))
  measured = _measure_forked(spec, work) if forked else _measure_fresh(spec, script)
  if implementation != "onnx_export":
    measured.pop("onnx_dir", None)  # the run's temporary folder: gone when the report is read
  return measured


def _measure_fresh(spec, script):
  result = subprocess.run([sys.executable, script, f"--worker={json.dumps(spec)}"],
                          capture_output=True, text=True)
  lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
  if result.returncode != 0 or not lines:
    return dict(spec, error=(result.stderr.strip().splitlines() or ["failed"])[-1][:200])
  return json.loads(lines[-1][len("RESULT "):])


def _measure_forked(spec, work):
  if "context" not in _forkserver:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["xlnet_tf.utils.cli", "tensorflow"])  # imported quietly
    _forkserver["context"] = context
  context = _forkserver["context"]
  receiver, sender = context.Pipe(duplex=False)
  with tempfile.NamedTemporaryFile(prefix="xlnet_tf_benchmark_", suffix=".log") as log:
    process = context.Process(target=_forked_worker, args=(spec, sender, log.name, work))
    process.start()
    sender.close()  # the child's end: recv() sees the end of the pipe if the child dies
    try:
      measured = receiver.recv()
    except EOFError:  # it died: its output's last line, as a fresh process's stderr
      measured = None
    process.join()
    if measured is None:
      lines = log.read().decode(errors="replace").strip().splitlines()
      measured = dict(spec, error=(lines or [f"exit code {process.exitcode}"])[-1][:200])
  return measured


def _forked_worker(spec, sender, log_path, work):
  """A forked row: its output into log_path, its result (or its error's line) back through
  `sender`."""
  log = os.open(log_path, os.O_WRONLY | os.O_TRUNC)
  os.dup2(log, 1)
  os.dup2(log, 2)
  try:
    result = work(spec)
  except Exception as error:  # noqa: BLE001  (any failure is the row's error, as a fresh run's)
    result = dict(spec, error=traceback.format_exception_only(error)[-1].strip()[:200])
  sender.send(result)


def baseline_worktree(repository, revision):
  """Checks `revision` out into a temporary git worktree of `repository`: {"revision",
  "source"} for the specs of its rows (revision with its short commit when it names another,
  such as a branch)."""
  source = tempfile.mkdtemp(prefix="xlnet_tf_baseline_")
  checkout = subprocess.run(["git", "-C", repository, "worktree", "add", "--detach", "--force",
                             source, revision], capture_output=True, text=True)
  if checkout.returncode != 0:
    shutil.rmtree(source, ignore_errors=True)
    raise UserInputError(f"--baseline={revision}: git worktree add failed: "
                         f"{checkout.stderr.strip().splitlines()[-1:]}")
  commit = subprocess.run(["git", "-C", source, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
  return {"revision": f"{revision} ({commit})" if commit and commit != revision else revision,
          "source": source}


def remove_worktree(repository, source):
  """Removes the worktree baseline_worktree made."""
  subprocess.run(["git", "-C", repository, "worktree", "remove", "--force", source],
                 capture_output=True)
  shutil.rmtree(source, ignore_errors=True)
