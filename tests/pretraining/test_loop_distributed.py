"""The pretraining loop under tf.distribute: mirrored (with and without gradient accumulation,
its held-out evaluation and TensorBoard images included) and two workers equal one device; two
workers stop together at a signal to one of them. Every test compares with one run on one
device (a module fixture: one process instead of three)."""

import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from event_files import summary_tags
from forked_tools import start_forked
from local_cluster import free_ports
from tiny_pretraining import RUNNER, run_distributed, run_distributed_printed

INTERRUPTED_TOOL = os.path.join(os.path.dirname(__file__), "..", "interrupted_tool.py")


STEPS = 4
EVALUATED_BATCHES = 2


@pytest.fixture(scope="module")
def one_device(small_data, tmp_path_factory):
  """(losses, final weights by variable path, held-out evaluation after training) of STEPS
  steps on one device, on the two identical shards: the global batch of one device, of
  mirrored replicas and of two workers each reading one shard."""
  model_dir = tmp_path_factory.mktemp("one_device") / "one"
  printed = run_distributed_printed(["one_device", 0, small_data["twin"], model_dir, STEPS,
                                     "--weights", f"--evaluate={EVALUATED_BATCHES}"])
  with np.load(f"{model_dir}.npz") as weights:
    return printed["LOSSES"], {name: weights[name] for name in weights.files}, printed[
        "EVALUATION"]


@pytest.mark.slow
def test_mirrored_equals_one_device(small_data, one_device, tmp_path):
  """Losses, the held-out evaluation after training (XLA-compiled on each replica) and the
  example images TensorBoard gets at the start (an eager forward of mirrored variables)."""
  one, _, one_evaluation = one_device
  model_dir = tmp_path / "mirrored"
  printed = run_distributed_printed([
      "mirrored", 2, small_data["twin"], model_dir, STEPS, f"--evaluate={EVALUATED_BATCHES}",
      "--options=" + json.dumps({"summaries": True})])
  assert len(one) == STEPS
  np.testing.assert_allclose(printed["LOSSES"], one, rtol=2e-5)
  evaluation = printed["EVALUATION"]
  assert evaluation["targets"] == one_evaluation["targets"] > 0
  np.testing.assert_allclose(evaluation["loss"], one_evaluation["loss"], rtol=2e-5)
  assert {"permutation/content_stream_visible", "permutation/query_stream_visible",
          "attention/layer_0_heads"} <= summary_tags(os.path.join(model_dir, "train"))


@pytest.mark.slow
def test_micro_batches_over_mirrored_replicas_equal_one_device(small_data, one_device, tmp_path):
  """Two logical CPU devices, 2 rows each split into 2 micro-batches of one row: the weights
  of one device on the whole batch (one step on one device with micro-batches:
  test_gradient_accumulation.py)."""
  _, one, _ = one_device
  run_distributed(["mirrored", 2, small_data["twin"], tmp_path / "micro", STEPS, "--weights",
                   "--options=" + json.dumps({"gradient_accumulation_steps": 2})])
  with np.load(tmp_path / "micro.npz") as weights:
    micro = {name: weights[name] for name in weights.files}
  assert one.keys() == micro.keys()
  for name in one:
    np.testing.assert_allclose(micro[name], one[name], rtol=0, atol=2e-6, err_msg=name)


@pytest.mark.slow
def test_two_workers_equal_one_device_and_stop_together_at_a_signal_to_one(small_data, one_device,
                                                                           tmp_path):
  """Two worker processes on 127.0.0.1, each reading one of two identical shards: the global
  batch holds every row twice, so loss and update equal one device on one copy. SIGTERM to
  worker 1 alone during step 2 stops both after it (the flag agreed by an all-reduce: neither
  waits for the other in step 3), each with its line and 143; both started again resume from
  the chief's checkpoint (worker 1 its memory) and go on as one device does."""
  data = small_data["twin"]
  one, _, _ = one_device
  model_dir = tmp_path / "mw"

  def workers(pause_worker_1):
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
      env = dict(os.environ, TF_CONFIG=json.dumps(
          {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}))
      pause = [INTERRUPTED_TOOL, "--pause_after=2"] if pause_worker_1 and index == 1 else []
      processes.append(start_forked([*pause, RUNNER, "multi_worker_mirrored", "0", data,
                                     str(model_dir), str(STEPS)], env=env))
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
    assert f"Resuming from step 2 of {STEPS}: {model_dir}/ckpt-2" in stdout
    losses = json.loads([out for out in stdout.splitlines()
                         if out.startswith("LOSSES ")][-1][len("LOSSES "):])
    np.testing.assert_allclose(losses, one[2:], rtol=2e-5)
