"""Command-line tools run in processes forked from one that has already imported TensorFlow.

Every run/ and data/ tool spends about 2.5 s of CPU importing TensorFlow before it reads its
first flag; the suite runs the tools over a hundred times. A forking server (one per test
process, started on first use) imports TensorFlow, Keras and xlnet_tf once and runs no
TensorFlow op (forking after ops have started thread pools is unsafe); each tool then runs in a
child forked from it: a process of its own, with its own flags, arguments, environment, working
directory, exit status, stdout and stderr, as `subprocess.run` would give (`run_forked`), or,
as `subprocess.Popen` would, running while the test reads what it has printed so far, sends it
signals or starts others beside it (`start_forked`: a ForkedProcess; the server runs any number
of children at once).

What a forked child cannot show is how a tool imports TensorFlow: the server imported it with
TensorFlow's C++ logging at the level the tools set (TF_CPP_MIN_LOG_LEVEL=3, read once, when
TensorFlow loads). Tests of a tool's start-up output (tests/utils/test_cli.py) run a fresh
interpreter instead (`run_tool(..., fresh_process=True)`).
"""

import atexit
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

# The server: requests (one JSON line each) on stdin; for each it forks a child and answers
# {"id", "pid"}, and {"id", "returncode"} when that child ends. One thread, no TensorFlow op:
# it waits on stdin with a short timeout while children run and reaps those that ended.
_SERVER_CODE = r'''
import json, os, runpy, select, sys, traceback
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow, keras  # noqa: F401  (what every tool imports; no op runs here)
import xlnet_tf.tasks.finetuning, xlnet_tf.pretraining.loop, xlnet_tf.serving  # noqa: F401

replies = os.fdopen(os.dup(1), "w", buffering=1)

def child(request):
  replies.close()
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  for descriptor, path in ((1, request["stdout"]), (2, request["stderr"])):
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(handle, descriptor)
    os.close(handle)
  stdin = os.open(os.devnull, os.O_RDONLY)
  os.dup2(stdin, 0)
  sys.stdout = os.fdopen(1, "w", buffering=1)
  sys.stderr = os.fdopen(2, "w", buffering=1)
  script = request["argv"][0]
  sys.argv = list(request["argv"])
  sys.path[0] = os.path.dirname(os.path.abspath(script))
  code = 0
  try:
    runpy.run_path(script, run_name="__main__")
  except SystemExit as exit:
    if exit.code is None:
      code = 0
    elif isinstance(exit.code, int):
      code = exit.code
    else:
      print(exit.code, file=sys.stderr)
      code = 1
  except BaseException:
    traceback.print_exc()
    code = 1
  try:
    import atexit
    atexit._run_exitfuncs()
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

children = {}  # pid -> request id
pending = b""
while True:
  ready, _, _ = select.select([0], [], [], 0.02 if children else None)
  if ready:
    chunk = os.read(0, 1 << 16)
    if not chunk:
      break
    pending += chunk
    while b"\n" in pending:
      line, pending = pending.split(b"\n", 1)
      request = json.loads(line)
      pid = os.fork()
      if pid == 0:
        child(request)
      children[pid] = request["id"]
      replies.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
  while children:
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
      break
    returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    replies.write(json.dumps({"id": children.pop(pid), "returncode": returncode}) + "\n")
'''


class _Server:
  """The server process and its replies, read by a thread of their own and handed out by
  request id."""

  def __init__(self):
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    self.process = subprocess.Popen([sys.executable, "-c", _SERVER_CODE], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    env=environment)
    atexit.register(self.process.kill)
    self.replies, self.ended = {}, False
    self.changed = threading.Condition()
    self.ids = itertools.count()
    threading.Thread(target=self._read, daemon=True).start()

  def _read(self):
    for line in self.process.stdout:
      reply = json.loads(line)
      with self.changed:
        self.replies.setdefault(reply.pop("id"), {}).update(reply)
        self.changed.notify_all()
    with self.changed:
      self.ended = True
      self.changed.notify_all()

  def alive(self) -> bool:
    return not self.ended and self.process.poll() is None

  def submit(self, request) -> int:
    """Sends `request`; returns its id."""
    request = dict(request, id=next(self.ids))
    with self.changed:
      self.process.stdin.write(json.dumps(request) + "\n")
      self.process.stdin.flush()
    return request["id"]

  def reply(self, request_id: int, key: str, timeout=None):
    """The value of `key` in the replies to `request_id` (None after `timeout` seconds)."""
    with self.changed:
      ok = self.changed.wait_for(lambda: key in self.replies.get(request_id, {}) or self.ended,
                                 timeout)
      if ok and key in self.replies.get(request_id, {}):
        return self.replies[request_id][key]
      if self.ended:
        raise RuntimeError("the forking server ended")
      return None


_server = None
_server_lock = threading.Lock()


def _running_server() -> _Server:
  global _server
  with _server_lock:
    if _server is None or not _server.alive():
      _server = _Server()
    return _server


class ForkedProcess:
  """A Python script running in a child of the forking server, as subprocess.Popen([python,
  *argv], stdout=PIPE, stderr=PIPE, text=True) would run it: `pid`, `poll()`, `wait()`,
  `send_signal()`, `terminate()`, `kill()`, `communicate()`, `returncode`, and what it has
  printed so far (`output_so_far`, `wait_for_output`). A context manager: on leaving, a child
  still running is killed and waited for."""

  def __init__(self, argv, env=None, cwd=None):
    self.args = [sys.executable, *map(str, argv)]
    self._directory = tempfile.mkdtemp(prefix="forked-")
    self._paths = {name: os.path.join(self._directory, name) for name in ("stdout", "stderr")}
    self._server = _running_server()
    self._id = self._server.submit({
        "argv": [str(a) for a in argv], "cwd": str(cwd or os.getcwd()),
        "env": dict(os.environ if env is None else env), **self._paths})
    self.pid = self._server.reply(self._id, "pid")
    self.returncode = None
    self._outputs = None

  def poll(self):
    if self.returncode is None:
      self.returncode = self._server.reply(self._id, "returncode", timeout=0)
    return self.returncode

  def wait(self, timeout=None):
    if self.returncode is None:
      self.returncode = self._server.reply(self._id, "returncode", timeout)
      if self.returncode is None:
        raise subprocess.TimeoutExpired(self.args, timeout, *self._read())
    return self.returncode

  def send_signal(self, number):
    if self.poll() is None:
      os.kill(self.pid, number)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def output_so_far(self, stream="stdout") -> str:
    try:
      with open(self._paths[stream], encoding="utf-8", errors="replace") as handle:
        return handle.read()
    except FileNotFoundError:  # the child has not opened it yet
      return ""

  def wait_for_output(self, pattern, stream="stdout", timeout=300) -> "re.Match":
    """The first match of the regular expression `pattern` in what the child has printed on
    `stream`, waiting for it (AssertionError if the child ends, or `timeout` passes, first)."""
    deadline = time.monotonic() + timeout
    while True:
      ended = self.poll() is not None
      match = re.search(pattern, self.output_so_far(stream), re.M)
      if match:
        return match
      if ended or time.monotonic() > deadline:
        stdout, stderr = self._read()
        raise AssertionError(f"no {pattern!r} on {stream} of {self.args[1:]} "
                             f"({'ended: ' + str(self.returncode) if ended else 'timed out'})"
                             f"\nstdout: {stdout[-2000:]}\nstderr: {stderr[-3000:]}")
      time.sleep(0.02)

  def _read(self):
    return tuple(self.output_so_far(name) for name in ("stdout", "stderr"))

  def communicate(self, timeout=None):
    """(stdout, stderr) once the child has ended."""
    self.wait(timeout)
    if self._outputs is None:
      self._outputs = self._read()
      shutil.rmtree(self._directory, ignore_errors=True)
    return self._outputs

  def __enter__(self):
    return self

  def __exit__(self, *exception):
    if self.poll() is None:
      self.kill()
    self.communicate()


def start_forked(argv, env=None, cwd=None) -> ForkedProcess:
  """`subprocess.Popen([sys.executable, *argv], ...)` for a Python script `argv[0]`, in a child
  of the forking server (see ForkedProcess)."""
  return ForkedProcess(argv, env, cwd)


def run_forked(argv, env=None, cwd=None, timeout=600):
  """`subprocess.run([sys.executable, *argv], capture_output=True, text=True)` for a Python
  script `argv[0]`, in a child of the forking server."""
  with start_forked(argv, env, cwd) as process:
    try:
      stdout, stderr = process.communicate(timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      stdout, stderr = process.communicate()
      raise subprocess.TimeoutExpired(process.args[1:], timeout, stdout, stderr) from None
  return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
