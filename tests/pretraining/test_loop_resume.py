"""The pretraining loop: kill -9 or SIGTERM and resume (one device, mirrored, dropout
on); a newest checkpoint or memory file cut short."""

import json
import logging
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from forked_tools import run_forked, start_forked
from tiny_pretraining import RUNNER, make_run, run_distributed
from xlnet_tf import XLNetModel
from xlnet_tf.training import run_lock
from xlnet_tf.utils.errors import UserInputError

INTERRUPTED_TOOL = os.path.join(os.path.dirname(__file__), "..", "interrupted_tool.py")


DROPOUT = {"dropout": 0.1, "dropatt": 0.1}


@pytest.fixture(scope="module")
def straight(small_data, tmp_path_factory):
  """6 uninterrupted steps with dropout on one device: the run each interrupted one here must
  end as (trained once for both one-device tests)."""
  run = make_run(small_data["bi"], tmp_path_factory.mktemp("straight") / "straight", 6,
                 model=DROPOUT)
  run.train()
  return run


def test_killed_run_resumes_to_the_same_weights(small_data, straight, tmp_path):
  data = small_data["bi"]
  model_dir = straight.options.model_dir
  assert not os.path.exists(os.path.join(model_dir, "pretrained"))  # the caller exports
  assert straight.export() == {"pretrained": os.path.join(model_dir, "pretrained"),
                               "lm": os.path.join(model_dir, "lm")}
  assert XLNetModel.from_pretrained(os.path.join(model_dir, "pretrained")).config == (
      straight.config)
  interrupted = make_run(data, tmp_path / "interrupted", 6, model=DROPOUT)
  interrupted.train(stop_after=4)  # checkpoint at 3; step 4 is lost with the "kill"
  assert interrupted.checkpoints.manager.latest_checkpoint.endswith("ckpt-3")
  # other init: restored anyway
  resumed = make_run(data, tmp_path / "interrupted", 6, seed=99, model=DROPOUT)
  result = resumed.train()
  assert result["history"][0]["step"] == 4
  for a, b in zip(straight.model.weights, resumed.model.weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
  saved = sorted(f for f in os.listdir(tmp_path / "interrupted") if f.startswith("mems-"))
  assert saved == ["mems-3-worker0.npz", "mems-6-worker0.npz"]
  _assert_damaged_newest_passed_over(data, tmp_path / "interrupted")


def _assert_damaged_newest_passed_over(data, model_dir):
  """The newest checkpoint (6) cut short, then its memory file: a resume takes step 3's, with
  its memory, and one warning line naming the damaged file; none left: one error line."""
  data_file = model_dir / "ckpt-6.data-00000-of-00001"
  whole = data_file.read_bytes()
  mems_file = model_dir / "mems-6-worker0.npz"
  for damaged, cut in ((data_file, "Read less bytes than requested"),
                       (mems_file, "File is not a zip file")):
    original = damaged.read_bytes()
    damaged.write_bytes(original[:len(original) // 2])
    run = make_run(data, model_dir, 6, seed=99, model=DROPOUT)
    expected = np.load(model_dir / "mems-3-worker0.npz")["layer_0"]
    with _warnings() as warnings:
      step = run.checkpoints.restore()
    assert step == 3
    np.testing.assert_array_equal(run.memory.state[0].numpy(), expected)
    assert len(warnings) == 1 and warnings[0].startswith(f"{model_dir}/ckpt-6 (") and (
        cut in warnings[0]), warnings
    assert warnings[0].endswith(f"resuming from the checkpoint before: {model_dir}/ckpt-3")
    damaged.write_bytes(original)
  data_file.write_bytes(whole[:10])
  (model_dir / "ckpt-3.data-00000-of-00001").write_bytes(b"")
  with pytest.raises(UserInputError, match=rf"^{model_dir}: no checkpoint reads whole: "
                     rf"{model_dir}/ckpt-6 \(.*\), {model_dir}/ckpt-3 \(.*\); restore them"):
    make_run(data, model_dir, 6, model=DROPOUT).checkpoints.restore()


class _warnings:
  """The messages of the WARNING records logged inside (absl logs through `logging`)."""

  def __enter__(self):
    self.records = []
    self.handler = logging.Handler(logging.WARNING)
    self.handler.emit = lambda record: self.records.append(record.getMessage())
    logging.getLogger().addHandler(self.handler)
    return self.records

  def __exit__(self, *exception):
    logging.getLogger().removeHandler(self.handler)


def _runner_options(n_layer=2, **options):
  """distributed_run.py's arguments for 6 steps with make_run's options and dropout."""
  return ["--model=" + json.dumps(dict(DROPOUT, n_layer=n_layer)),
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


def _stop_by_sigterm(strategy, cpu_replicas, data, model_dir, step, resumed_from=None,
                     **options):
  """A process training 6 steps with dropout (resuming from `resumed_from`'s checkpoint)
  sent SIGTERM during `step`, once it has printed its step lines: it saves that step's
  checkpoint, says so in one line on stderr and exits with 143 (128 + SIGTERM)."""
  command = [INTERRUPTED_TOOL, f"--pause_after={step - (resumed_from or 0)}", RUNNER, strategy,
             str(cpu_replicas), data, str(model_dir), "6", *_runner_options(**options)]
  with start_forked(command) as stopped:
    stopped.wait_for_output(r"^PAUSED after step \d+$")
    assert f"step {step - 1}/6: loss" in stopped.output_so_far()  # step lines as it runs
    stopped.send_signal(signal.SIGTERM)
    stdout, stderr = stopped.communicate(timeout=600)
  assert stopped.returncode == 143, stderr[-3000:]
  assert stderr.splitlines()[-1] == (f"Stopped by SIGTERM at step {step}: checkpoint written to "
                                     f"{model_dir}/ckpt-{step}; rerun the same command to resume")
  if resumed_from:
    assert (f"Resuming from step {resumed_from} of 6: {model_dir}/ckpt-{resumed_from}\n"
            in stdout)
  assert tf.train.latest_checkpoint(str(model_dir)).endswith(f"ckpt-{step}")
  assert not os.path.exists(os.path.join(model_dir, run_lock.LOCK_FILE))  # released


def test_killed_process_resumes_to_the_weights_of_an_uninterrupted_run_with_dropout(
    small_data, straight, tmp_path):
  """Dropout 0.1: the masks of a step depend on (seed, step, replica) only, so the resumed
  run redraws step 4's masks; its lock is taken over. Resumed, it is stopped by SIGTERM
  during step 5 and resumed again."""
  data = small_data["bi"]
  _kill_at_step_4("one_device", 0, data, tmp_path / "killed")
  _stop_by_sigterm("one_device", 0, data, tmp_path / "killed", 5, resumed_from=3)
  resumed = make_run(data, tmp_path / "killed", 6, seed=99, model=DROPOUT)  # other init
  assert resumed.train()["history"][0]["step"] == 6
  assert not os.path.exists(tmp_path / "killed" / run_lock.LOCK_FILE)
  _assert_same_weights({v.path: v.numpy() for v in straight.model.weights},
                       {v.path: v.numpy() for v in resumed.model.weights})


@pytest.mark.slow
def test_mirrored_run_stopped_by_sigterm_resumes_to_the_weights_of_an_uninterrupted_run(
    small_data, tmp_path):
  """Two replicas (each its own masks and memory rows): stopped by SIGTERM during step 4,
  resumed in a new process, equal to an uninterrupted run (one layer and no XLA, which compiles
  slowly per replica: the one-device tests cover both). kill -9 resumes the same way (the
  one-device test)."""
  data = small_data["uni"]
  _stop_by_sigterm("mirrored", 2, data, tmp_path / "stopped", 4, jit_compile=False, n_layer=1)
  run_distributed(["mirrored", 2, data, f"{tmp_path / 'stopped'},{tmp_path / 'straight'}", 6,
                   "--weights", *_runner_options(jit_compile=False, n_layer=1)])
  with np.load(tmp_path / "straight.npz") as straight, np.load(tmp_path / "stopped.npz") as resumed:
    _assert_same_weights(dict(straight), dict(resumed))
