"""The run-directory lock (training.run_lock): a live holder refuses, a dead one is taken over."""

import logging
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.tasks.finetuning import FinetuningOptions, feature_dataset, finetune
from xlnet_tf.training import run_lock

# Another process takes the flock and names itself in the file, as run_lock does; it holds the
# lock until its standard input closes, then ends without removing the file (as a killed run).
_HOLDER = """
import fcntl, os, sys
descriptor = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(descriptor, fcntl.LOCK_EX)
os.write(descriptor, b"pid %d on elsewhere\\n" % os.getpid())
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path):
  """holder(directory): a live process holding `directory`'s lock (ended after the test)."""
  processes = []

  def hold(directory):
    os.makedirs(directory, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, os.path.join(directory, run_lock.LOCK_FILE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "held\n"
    processes.append(process)
    return process
  yield hold
  for process in processes:
    process.stdin.close()
    process.wait(timeout=30)


def _refusal(directory, pid):
  return (f"{directory}: another run (pid {pid} on elsewhere) is using this directory (lock "
          f"{directory}/{run_lock.LOCK_FILE}); wait for it to end or use another directory")


def test_a_live_holder_refuses_and_a_dead_ones_lock_is_taken_over(tmp_path, holder, caplog):
  directory = str(tmp_path / "run")
  other = holder(directory)
  with pytest.raises(UserInputError) as raised:
    with run_lock.hold(directory):
      pass
  assert str(raised.value) == _refusal(directory, other.pid)
  assert os.listdir(directory) == [run_lock.LOCK_FILE]  # the holder's, untouched

  other.stdin.close()  # the holder dies; its file still names it
  other.wait(timeout=30)
  caplog.set_level(logging.WARNING)
  with run_lock.hold(directory):
    with open(os.path.join(directory, run_lock.LOCK_FILE)) as handle:
      assert handle.read() == f"pid {os.getpid()} on {socket.gethostname()}\n"
  assert [record.getMessage() for record in caplog.records] == [
      f"{directory}: taking over the lock of pid {other.pid} on elsewhere, which is no longer "
      "running (its run was killed)"]
  assert os.listdir(directory) == []  # released: the lock file is gone, the directory stays


def test_the_lock_is_reentrant_and_leaves_nothing_behind(tmp_path):
  """Nested holds in one process (a CLI around the library); directories the lock made are
  removed when nothing else was written into them, kept otherwise."""
  directory = tmp_path / "made" / "run"
  with run_lock.hold(str(directory)):
    with run_lock.hold(str(directory)):
      assert (directory / run_lock.LOCK_FILE).exists()
    assert (directory / run_lock.LOCK_FILE).exists()
  assert os.listdir(tmp_path) == []
  with run_lock.hold(str(directory)):
    (directory / "ckpt-1.index").write_text("")
  assert os.listdir(directory) == ["ckpt-1.index"]


def test_finetuning_refuses_a_best_dir_in_use(tmp_path, holder):
  best_dir = str(tmp_path / "best")
  other = holder(best_dir)
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  features = {"input_ids": rng.integers(5, 50, (8, 6)).astype(np.int32),
              "label": rng.integers(0, 2, 8).astype(np.int32)}
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", n_token=50)), 2)
  options = FinetuningOptions(train_steps=2, batch_size=4, learning_rate=1e-3,
                              jit_compile=False, progress="lines")
  with pytest.raises(UserInputError) as raised:
    finetune(model, feature_dataset(features, 4, label_key="label", repeat=True), options,
             best_dir=best_dir,
             loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  assert str(raised.value) == _refusal(best_dir, other.pid)
  assert os.listdir(best_dir) == [run_lock.LOCK_FILE]  # nothing written


def test_a_remote_directory_takes_no_lock_and_says_so_once(tmp_path, monkeypatch, caplog):
  """gs:// (ram:// here) has no flock: the run goes on, unlocked, with one warning line per
  outermost hold, and nothing is made locally (os.makedirs would make a `ram:` folder)."""
  monkeypatch.chdir(tmp_path)
  directory = "ram://run-lock/model"
  with caplog.at_level(logging.WARNING):
    with run_lock.hold(directory):
      with run_lock.hold(directory + "/"):  # re-entrant, as a CLI around the library's hold
        pass
  lines = [record.getMessage() for record in caplog.records]
  assert lines == [f"{directory}: a remote directory takes no run lock; make sure no other run "
                   "writes into it at the same time"]
  assert os.listdir(tmp_path) == []
  assert not run_lock._held  # released
