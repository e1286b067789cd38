"""The pretraining loop under tf.distribute: mirrored and two workers equal one device."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from local_cluster import free_ports
from tiny_pretraining import RUNNER, run_distributed


@pytest.mark.slow
def test_mirrored_equals_one_device(small_data, tmp_path):
  data = small_data["uni"]
  one = run_distributed(["one_device", 0, data, tmp_path / "one", 5])
  mirrored = run_distributed(["mirrored", 2, data, tmp_path / "mirrored", 5])
  assert len(one) == 5
  np.testing.assert_allclose(mirrored, one, rtol=2e-5)


@pytest.mark.slow
def test_two_workers_equal_one_device(small_data, tmp_path):
  """Two worker processes on 127.0.0.1, each reading one of two identical shards: the global
  batch holds every row twice, so loss and update equal one device on one copy."""
  data = small_data["twin"]
  one = run_distributed(["one_device", 0, data, tmp_path / "one", 4])
  workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
  processes = []
  for index in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
    processes.append(subprocess.Popen(
        [sys.executable, RUNNER, "multi_worker_mirrored", "0", data, str(tmp_path / "mw"), "4"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  outputs = []
  for process in processes:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    outputs.append(json.loads([out for out in stdout.splitlines()
                               if out.startswith("LOSSES ")][-1][len("LOSSES "):]))
  np.testing.assert_allclose(outputs[0], one, rtol=2e-5)
  np.testing.assert_allclose(outputs[1], one, rtol=2e-5)


