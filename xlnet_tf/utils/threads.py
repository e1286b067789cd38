"""The CPU threads TensorFlow runs a process's ops with.

TensorFlow's defaults (every CPU for one op, every CPU for independent ops) suit large
products. A batch-1 int8 decoding step is ~50 oneDNN products and compiled regions of 20-100 us
each, where handing half of each to a second thread costs more than it saves: on a 2-core
machine one thread generates faster (docs/performance.md, "Generation at the memory limit").
"""

import contextlib

import tensorflow as tf
from tensorflow.python.eager import context as _eager_context

from xlnet_tf.utils.errors import UserInputError, is_int, require

DEFAULT = 0  # TensorFlow's own choice


def set_cpu_threads(threads: int, argument: str = "threads") -> None:
  """TensorFlow's intra-op and inter-op threads become `threads` (DEFAULT: left as they are).

  Call it before TensorFlow runs its first op: the thread pools are made then, and a later
  setting is refused (UserInputError naming `argument`) rather than ignored."""
  require(is_int(threads) and threads >= 0, argument,
          f"a number of threads >= 0 ({DEFAULT}: TensorFlow's default)", threads)
  if threads == DEFAULT:
    return
  threading = tf.config.threading
  if (threading.get_intra_op_parallelism_threads(),
      threading.get_inter_op_parallelism_threads()) == (threads, threads):
    return
  try:
    threading.set_intra_op_parallelism_threads(threads)
    threading.set_inter_op_parallelism_threads(threads)
  except RuntimeError as error:  # "... cannot be modified after initialization."
    raise UserInputError(f"{argument}={threads}: TensorFlow has already run an op in this "
                         "process, and its thread pools are set then; set the threads before "
                         "the first op") from error


@contextlib.contextmanager
def ops_in_sequence():
  """tf.functions called in this context run their ops one at a time, on the calling thread
  (TensorFlow's single-threaded function executor); each op still splits its own work over the
  intra-op threads. For a decoding step, a chain of small products that overlap badly: with the
  default executor two independent products compete for the same two cores."""
  with _eager_context.function_executor_type("SINGLE_THREADED_EXECUTOR"):
    yield
