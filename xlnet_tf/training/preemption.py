"""Stopping a training run on SIGTERM or SIGINT with a checkpoint of the step it reached.

A preemptible machine (a spot VM, a Kubernetes pod being evicted, a batch system's time limit)
gets SIGTERM and a grace period of seconds; Ctrl-C is SIGINT. Inside `watch()` either signal only
sets a flag; the training loop (pretraining's and fine-tuning's) asks `requested()` between
steps, and when it is set saves a checkpoint of the step just finished and raises
`stopped(...)`: errors.StoppedBySignal, whose one line the CLIs print

  Stopped by SIGTERM at step 37: checkpoint written to DIR/ckpt-37; rerun the same command to resume

before exiting with 128 + the signal's number (143 for SIGTERM, 130 for SIGINT, what a shell
reports for a process the signal ended). The same command resumes from that checkpoint. A second
signal of the same kind while the checkpoint is written acts as it did before `watch()` (SIGTERM:
the process ends; SIGINT: KeyboardInterrupt), and the checkpoints stay whole or invisible
(training.resume).

Why a flag checked between steps, not TensorFlow's
tf.distribute.experimental.PreemptionCheckpointHandler: the handler needs a cluster resolver (a
multi-worker or TPU strategy, with the coordination service) and wraps the step function itself
(`handler.run(step_fn, ...)`), saving a tf.train.Checkpoint of its own making and exiting through
its own exit code; the runs here save more than one checkpoint object (pretraining's per-worker
memory files, fine-tuning's dev history and best-so-far) and run on one device and under
MirroredStrategy as well. A flag is a few lines, needs no strategy, and serves the custom loop and
a Model.fit callback alike (a callback's on_train_batch_end is between steps too).

Several workers: a signal reaches the workers at different moments (or only one of them), and a
worker that stopped alone would leave the others waiting in the next step's all-reduce. So with
more than one worker `requested()` is agreed: each worker's flags (one per signal) go through
an all-reduce (a sum over the replicas) after every step, and every worker stops after the same
step; the workers other than the signal's print the line too, naming the signal they were told
of. On one worker (one device, mirrored replicas) the flag is read as it is, without a
collective.
"""

import contextlib
import signal
import threading
from typing import Iterator, Optional

import tensorflow as tf

from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.utils.errors import StoppedBySignal

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_received = []  # the numbers of the signals received inside watch(), in order


def received() -> Optional[int]:
  """The first signal received inside `watch()` (its number), or None."""
  return _received[0] if _received else None


@contextlib.contextmanager
def watch() -> Iterator[None]:
  """Inside, SIGTERM and SIGINT set the flag `requested()` reads instead of ending the process;
  each signal's previous handler comes back after its first arrival and when the block ends.
  Outside the main thread (where Python cannot install handlers) signals keep their handlers."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = {number: signal.getsignal(number) for number in SIGNALS}

  def note(number, frame):
    del frame
    _received.append(number)
    signal.signal(number, previous[number])  # a second one acts as before

  _received.clear()
  for number in SIGNALS:
    signal.signal(number, note)
  try:
    yield
  finally:
    for number, handler in previous.items():
      signal.signal(number, handler)
    _received.clear()


def requested(strategy: Optional[tf.distribute.Strategy] = None) -> Optional[int]:
  """The signal a run should stop for now (its number), or None: this process's flag, or with
  several workers under `strategy` the flag of any of them (an all-reduce every worker makes
  at the same point of the loop)."""
  local = received()
  if strategy is None or strategy_lib.num_workers(strategy) <= 1:
    return local
  # Each replica's flags, one per signal of SIGNALS, summed over every replica of every worker.
  flags = strategy.experimental_distribute_values_from_function(
      lambda context: tf.constant([int(number == local) for number in SIGNALS], tf.int32))
  counts = strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None).numpy()
  return next((int(number) for number, count in zip(SIGNALS, counts) if count), None)


def stopped(signal_number: int, step: int, checkpoint: Optional[str]) -> StoppedBySignal:
  """The exception that ends a run stopped by `signal_number` after `step`, its checkpoint
  (None: nothing was trained, nothing to save) named in its one line."""
  name = signal.Signals(signal_number).name
  if checkpoint is None:
    return StoppedBySignal(f"Stopped by {name} before the first step: nothing to save; rerun the "
                           "same command to start", signal_number)
  return StoppedBySignal(f"Stopped by {name} at step {step}: checkpoint written to {checkpoint}; "
                         "rerun the same command to resume", signal_number)
