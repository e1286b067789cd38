"""Command-line tools run in processes forked from one that has already imported TensorFlow.

Every run/ and data/ tool spends about 2.5 s of CPU importing TensorFlow before it reads its
first flag; the suite runs the tools over a hundred times. A forking server (one per test
process, started on first use) imports TensorFlow, Keras and xlnet_tf once and runs no
TensorFlow op (forking after ops have started thread pools is unsafe); each tool then runs in a
child forked from it: a process of its own, with its own flags, arguments, environment, working
directory, exit status, stdout and stderr, as `subprocess.run` would give.

What a forked child cannot show is how a tool imports TensorFlow: the server imported it with
TensorFlow's C++ logging at the level the tools set (TF_CPP_MIN_LOG_LEVEL=3, read once, when
TensorFlow loads). Tests of a tool's start-up output (tests/utils/test_cli.py) run a fresh
interpreter instead (`run_tool(..., fresh_process=True)`).
"""

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading

_SERVER_CODE = r'''
import json, os, runpy, sys, traceback
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow, keras  # noqa: F401  (what every tool imports; no op runs here)
import xlnet_tf.tasks.finetuning, xlnet_tf.pretraining.loop, xlnet_tf.serving  # noqa: F401

def child(request):
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

replies = os.fdopen(os.dup(1), "w", buffering=1)
for line in sys.stdin:
  request = json.loads(line)
  pid = os.fork()
  if pid == 0:
    child(request)
  replies.write(json.dumps({"pid": pid}) + "\n")
  _, status = os.waitpid(pid, 0)
  replies.write(json.dumps({"returncode": -os.WTERMSIG(status) if os.WIFSIGNALED(status)
                            else os.WEXITSTATUS(status)}) + "\n")
'''

_server = None
_lock = threading.Lock()


def _start_server():
  environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  server = subprocess.Popen([sys.executable, "-c", _SERVER_CODE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=environment)
  atexit.register(server.kill)
  return server


def run_forked(argv, env=None, cwd=None, timeout=600):
  """`subprocess.run([sys.executable, *argv], capture_output=True, text=True)` for a Python
  script `argv[0]`, in a child of the forking server."""
  global _server
  with _lock:
    if _server is None or _server.poll() is not None:
      _server = _start_server()
    with tempfile.TemporaryDirectory() as directory:
      paths = {name: os.path.join(directory, name) for name in ("stdout", "stderr")}
      request = {"argv": [str(a) for a in argv], "cwd": str(cwd or os.getcwd()),
                 "env": dict(os.environ if env is None else env), **paths}
      _server.stdin.write(json.dumps(request) + "\n")
      _server.stdin.flush()
      pid = json.loads(_server.stdout.readline())["pid"]
      expired = threading.Event()

      def kill():
        expired.set()
        os.kill(pid, 9)
      timer = threading.Timer(timeout, kill)
      timer.start()
      try:
        reply = _server.stdout.readline()
      finally:
        timer.cancel()
      if not reply:
        raise RuntimeError("the forking server ended while running " + " ".join(request["argv"]))
      returncode = json.loads(reply)["returncode"]
      outputs = {}
      for name, path in paths.items():
        with open(path, encoding="utf-8", errors="replace") as handle:
          outputs[name] = handle.read()
  if expired.is_set():
    raise subprocess.TimeoutExpired(request["argv"], timeout, outputs["stdout"],
                                    outputs["stderr"])
  return subprocess.CompletedProcess([sys.executable, *request["argv"]], returncode,
                                     outputs["stdout"], outputs["stderr"])
