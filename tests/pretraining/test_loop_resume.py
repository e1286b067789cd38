"""The pretraining loop: kill -9 and resume (one device, mirrored, dropout on)."""

import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from forked_tools import run_forked
from tiny_pretraining import RUNNER, make_run, run_distributed
from xlnet_tf import XLNetModel
from xlnet_tf.training import run_lock


def test_killed_run_resumes_to_the_same_weights(small_data, tmp_path):
  data = small_data["bi"]
  straight = make_run(data, tmp_path / "straight", 6)
  straight.train()
  assert not os.path.exists(tmp_path / "straight" / "pretrained")  # the caller exports
  assert straight.export() == {"pretrained": str(tmp_path / "straight" / "pretrained"),
                               "lm": str(tmp_path / "straight" / "lm")}
  assert XLNetModel.from_pretrained(str(tmp_path / "straight" / "pretrained")).config == (
      straight.config)
  interrupted = make_run(data, tmp_path / "interrupted", 6)
  interrupted.train(stop_after=4)  # checkpoint at 3; step 4 is lost with the "kill"
  assert interrupted.checkpoints.manager.latest_checkpoint.endswith("ckpt-3")
  resumed = make_run(data, tmp_path / "interrupted", 6, seed=99)  # other init: restored anyway
  result = resumed.train()
  assert result["history"][0]["step"] == 4
  for a, b in zip(straight.model.weights, resumed.model.weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
  saved = sorted(f for f in os.listdir(tmp_path / "interrupted") if f.startswith("mems-"))
  assert saved == ["mems-3-worker0.npz", "mems-6-worker0.npz"]


DROPOUT = {"dropout": 0.1, "dropatt": 0.1}


def _runner_options(**options):
  """distributed_run.py's arguments for 6 steps with make_run's options and dropout."""
  return ["--model=" + json.dumps(DROPOUT),
          "--options=" + json.dumps(dict(save_steps=3, warmup_steps=2, **options))]


def _kill_at_step_4(strategy, cpu_replicas, data, model_dir, **options):
  """A process training 6 steps with dropout (checkpoints every 3, as make_run's) killed with
  SIGKILL right after step 4: resuming repeats step 4 from the checkpoint of step 3."""
  killed = run_forked([RUNNER, strategy, str(cpu_replicas), data, str(model_dir), "6",
                       "--kill_after=4", *_runner_options(**options)], timeout=600)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-3")
  assert os.path.exists(os.path.join(model_dir, run_lock.LOCK_FILE))  # left by the dead run


def _assert_same_weights(expected, actual):
  assert len(expected) == len(actual)
  for path, value in expected.items():
    np.testing.assert_allclose(actual[path], value, atol=1e-6, rtol=0, err_msg=path)


def test_killed_process_resumes_to_the_weights_of_an_uninterrupted_run_with_dropout(
    small_data, tmp_path):
  """Dropout 0.1: the masks of a step depend on (seed, step, replica) only, so the resumed
  run redraws step 4's masks; its lock is taken over."""
  data = small_data["bi"]
  _kill_at_step_4("one_device", 0, data, tmp_path / "killed")
  resumed = make_run(data, tmp_path / "killed", 6, seed=99, model=DROPOUT)  # other init
  assert resumed.train()["history"][0]["step"] == 4
  assert not os.path.exists(tmp_path / "killed" / run_lock.LOCK_FILE)
  straight = make_run(data, tmp_path / "straight", 6, model=DROPOUT)
  straight.train()
  _assert_same_weights({v.path: v.numpy() for v in straight.model.weights},
                       {v.path: v.numpy() for v in resumed.model.weights})


@pytest.mark.slow
def test_killed_mirrored_run_resumes_to_the_weights_of_an_uninterrupted_run_with_dropout(
    small_data, tmp_path):
  """Two replicas (each its own masks): killed at step 4, resumed in a new process, equal to
  an uninterrupted run (without XLA, which compiles slowly per replica; the one-device test
  covers it)."""
  data = small_data["uni"]
  _kill_at_step_4("mirrored", 2, data, tmp_path / "killed", jit_compile=False)
  run_distributed(["mirrored", 2, data, f"{tmp_path / 'killed'},{tmp_path / 'straight'}", 6,
                   "--weights", *_runner_options(jit_compile=False)])
  with np.load(tmp_path / "straight.npz") as straight, np.load(tmp_path / "killed.npz") as resumed:
    _assert_same_weights(dict(straight), dict(resumed))


