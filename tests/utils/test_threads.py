"""TensorFlow's CPU threads set for a process (xlnet_tf.utils.threads): before the first op, or
refused in one line after it."""

import pytest
import tensorflow as tf

from forked_tools import run_forked
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.threads import set_cpu_threads

# Run in a fresh process (forked before any TensorFlow op): prints the threads set, then what a
# later, different setting raises.
_SCRIPT = """
import tensorflow as tf
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.threads import set_cpu_threads
set_cpu_threads(1, "--threads")
print(tf.config.threading.get_intra_op_parallelism_threads(),
      tf.config.threading.get_inter_op_parallelism_threads())
print(float(tf.reduce_sum(tf.ones([4]))))
set_cpu_threads(1, "--threads")  # the same setting again: nothing to change
try:
  set_cpu_threads(2, "--threads")
except UserInputError as error:
  print("refused:", error)
"""


def test_threads_are_set_before_the_first_op_and_a_change_after_it_is_refused(tmp_path):
  script = tmp_path / "threads.py"
  script.write_text(_SCRIPT)
  result = run_forked([str(script)])
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.splitlines()
  assert lines[:2] == ["1 1", "4.0"]
  assert lines[2].startswith("refused: --threads=2: TensorFlow has already run an op")


@pytest.mark.parametrize("threads", [-1, 1.5, True, "2"])
def test_a_bad_number_of_threads_names_the_argument(threads):
  with pytest.raises(UserInputError, match=r"--threads must be a number of threads >= 0"):
    set_cpu_threads(threads, "--threads")


def test_the_default_changes_nothing_even_after_ops_ran():
  assert float(tf.reduce_sum(tf.ones([2]))) == 2  # an op: the thread pools are made
  set_cpu_threads(0)
  with pytest.raises(UserInputError, match="already run an op"):
    set_cpu_threads(3)
