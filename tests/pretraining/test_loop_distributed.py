"""The pretraining loop under tf.distribute: mirrored and two workers equal one device; two
workers stop together at a signal to one of them."""

import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from forked_tools import start_forked
from local_cluster import free_ports
from tiny_pretraining import RUNNER, run_distributed

INTERRUPTED_TOOL = os.path.join(os.path.dirname(__file__), "..", "interrupted_tool.py")


@pytest.mark.slow
def test_mirrored_equals_one_device(small_data, tmp_path):
  data = small_data["uni"]
  one = run_distributed(["one_device", 0, data, tmp_path / "one", 5])
  mirrored = run_distributed(["mirrored", 2, data, tmp_path / "mirrored", 5])
  assert len(one) == 5
  np.testing.assert_allclose(mirrored, one, rtol=2e-5)


@pytest.mark.slow
def test_two_workers_equal_one_device_and_stop_together_at_a_signal_to_one(small_data, tmp_path):
  """Two worker processes on 127.0.0.1, each reading one of two identical shards: the global
  batch holds every row twice, so loss and update equal one device on one copy. SIGTERM to
  worker 1 alone during step 2 stops both after it (the flag agreed by an all-reduce: neither
  waits for the other in step 3), each with its line and 143; both started again resume from
  the chief's checkpoint (worker 1 its memory) and go on as one device does."""
  data = small_data["twin"]
  one = run_distributed(["one_device", 0, data, tmp_path / "one", 4])
  model_dir = tmp_path / "mw"

  def workers(pause_worker_1):
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
      env = dict(os.environ, TF_CONFIG=json.dumps(
          {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}))
      pause = [INTERRUPTED_TOOL, "--pause_after=2"] if pause_worker_1 and index == 1 else []
      processes.append(start_forked([*pause, RUNNER, "multi_worker_mirrored", "0", data,
                                     str(model_dir), "4"], env=env))
    return processes

  processes = workers(pause_worker_1=True)
  try:
    processes[1].wait_for_output(r"^PAUSED after step 2$")
    processes[1].send_signal(signal.SIGTERM)
    for process in processes:
      stdout, stderr = process.communicate(timeout=600)
      assert process.returncode == 143, stderr[-3000:]
      assert stderr.splitlines()[-1] == (
          f"Stopped by SIGTERM at step 2: checkpoint written to {model_dir}/ckpt-2; rerun the "
          "same command to resume")
  finally:
    for process in processes:
      process.__exit__()
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")
  assert sorted(name for name in os.listdir(model_dir) if name.startswith("mems-")) == [
      "mems-2-worker0.npz", "mems-2-worker1.npz"]
  for process in workers(pause_worker_1=False):
    with process:
      stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert f"Resuming from step 2 of 4: {model_dir}/ckpt-2" in stdout
    losses = json.loads([out for out in stdout.splitlines()
                         if out.startswith("LOSSES ")][-1][len("LOSSES "):])
    np.testing.assert_allclose(losses, one[2:], rtol=2e-5)
