"""Runs a tool (run/..., or any script) that the test interrupts at a known step.

  python interrupted_tool.py (--pause_after=S | --kill_after=S) [--file_size_limit=BYTES]
      SCRIPT [ARGUMENTS...]

Every training step of pretraining and fine-tuning goes through
training.distributed_steps.DistributedSteps.train_step; here, after the S-th step this process
runs:
  --pause_after  it prints "PAUSED after step S" on stdout and waits (up to 5 minutes) until a
                 signal has arrived inside training.preemption.watch() (the test sends SIGTERM
                 or SIGINT once it reads that line), then goes on: the run stops at step S
                 exactly, however slow the machine;
  --kill_after   it sends itself SIGKILL (kill -9) right after the step.
--file_size_limit sets RLIMIT_FSIZE (SIGXFSZ ignored), so that a write making a file larger
fails with EFBIG as a full disk fails with ENOSPC: a real failure of the checkpoint writer.
"""

import os
import resource
import runpy
import signal
import sys
import time


def _interrupting(train_step, after: int, pause: bool):
  from xlnet_tf.training import preemption
  calls = []

  def step(*args, **kwargs):
    result = train_step(*args, **kwargs)
    calls.append(None)
    if len(calls) == after:
      float(result[0])  # the step has run
      if not pause:
        os.kill(os.getpid(), signal.SIGKILL)
      print(f"PAUSED after step {after}", flush=True)
      deadline = time.monotonic() + 300
      while preemption.received() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return result
  return step


def main():
  options = {}
  while sys.argv[1].startswith("--"):
    name, _, value = sys.argv.pop(1)[2:].partition("=")
    options[name] = int(value)
  if "file_size_limit" in options:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = options["file_size_limit"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
  from xlnet_tf.training.distributed_steps import DistributedSteps
  pause = "pause_after" in options
  after = options.get("pause_after", options.get("kill_after"))
  if after is not None:
    build = DistributedSteps.__init__

    def __init__(self, *args, **kwargs):
      build(self, *args, **kwargs)
      self.train_step = _interrupting(self.train_step, after, pause)
    DistributedSteps.__init__ = __init__
  script = sys.argv.pop(1)
  sys.argv[0] = script
  sys.path[0] = os.path.dirname(os.path.abspath(script))
  runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
  main()
