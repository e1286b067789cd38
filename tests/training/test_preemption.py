"""training.preemption: SIGTERM and SIGINT become a flag read between steps, and the stop's one
line and exit status. The runs stopped by a real signal: tests/pretraining/test_loop_resume.py
(SIGTERM, one device and mirrored), tests/tasks/test_finetuning_resume*.py (the CLI, the
library)."""

import os
import signal
import threading

import pytest
import tensorflow as tf

from xlnet_tf.training import preemption
from xlnet_tf.utils.errors import StoppedBySignal


@pytest.fixture(autouse=True)
def main_thread():
  assert threading.current_thread() is threading.main_thread()  # where the signals go


@pytest.mark.parametrize("number, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_inside_watch_is_a_flag_read_between_steps(number, status):
  """The first signal only sets the flag; a second acts as before watch() (here: raises), and
  the handlers come back when the block ends."""
  before = signal.getsignal(number)

  def second(*_):
    raise RuntimeError("the handler before watch()")
  signal.signal(number, second)
  try:
    with preemption.watch():
      assert preemption.requested() is None
      os.kill(os.getpid(), number)
      assert preemption.requested() == number
      assert preemption.requested(tf.distribute.OneDeviceStrategy("/cpu:0")) == number
      with pytest.raises(RuntimeError, match="the handler before"):
        os.kill(os.getpid(), number)
    assert signal.getsignal(number) is second
    assert preemption.received() is None
  finally:
    signal.signal(number, before)
  stop = preemption.stopped(number, 37, "DIR/ckpt-37")
  assert isinstance(stop, StoppedBySignal) and not isinstance(stop, Exception)
  assert str(stop) == (f"Stopped by {signal.Signals(number).name} at step 37: checkpoint written "
                       "to DIR/ckpt-37; rerun the same command to resume")
  assert stop.exit_status == status


def test_outside_the_main_thread_signals_keep_their_handlers():
  seen = []

  def watch_in_a_thread():
    with preemption.watch():
      seen.append(signal.getsignal(signal.SIGTERM))
  thread = threading.Thread(target=watch_in_a_thread)
  thread.start()
  thread.join()
  assert seen == [signal.getsignal(signal.SIGTERM)]
