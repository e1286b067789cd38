"""run/classifier.py resumes into the same --output_dir after kill -9, a full disk (a real
failure of the checkpoint writer) and SIGTERM, dropout on, and ends as an uninterrupted run: its
dev history and best/. The library's cases (a cut-short checkpoint, a run that finished, the
weights): tests/tasks/test_finetuning_resume.py."""

import json
import os
import re
import signal

import h5py
import numpy as np

from cli_output import ROOT, run_tool, start_tool
from forked_tools import run_forked
from task_files import reordering_task
from xlnet_tf import XLNetConfig
from xlnet_tf.text.tokenizer import XLNetTokenizer

INTERRUPTED_TOOL = os.path.join(ROOT, "tests", "interrupted_tool.py")
CLASSIFIER = os.path.join(ROOT, "run", "classifier.py")


def _weights(best_dir):
  values = {}
  with h5py.File(os.path.join(best_dir, "model.weights.h5"), "r") as weights:
    weights.visititems(lambda name, item: values.__setitem__(name, item[()])
                       if isinstance(item, h5py.Dataset) else None)
  return values


def test_classifier_resumes_after_kill_9_a_full_disk_and_sigterm_to_an_uninterrupted_end(
    small_data, tmp_path):
  reordering_task(tmp_path / "train.csv", 48, 0)
  reordering_task(tmp_path / "dev.csv", 16, 1)
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(small_data["sp_path"]).vocab_size
                     ).to_json_file(str(tmp_path / "xlnet_config.json"))
  flags = ["--task_name=generic", f"--train_file={tmp_path}/train.csv",
           f"--dev_file={tmp_path}/dev.csv", f"--sp_path={small_data['sp_path']}",
           f"--model_config={tmp_path}/xlnet_config.json", "--max_seq_length=16",
           "--train_batch_size=8", "--train_steps=6", "--eval_every=2", "--save_steps=2",
           "--learning_rate=1e-3", "--nojit_compile",
           "--progress=lines", "--do_train"]  # --dropout and --dropatt: 0.1
  straight = run_tool("run/classifier.py", *flags, f"--output_dir={tmp_path}/straight")
  assert straight.returncode == 0, straight.stderr[-3000:]

  out = tmp_path / "out"
  checkpoints = out / "checkpoints"
  command = [CLASSIFIER, *flags, f"--output_dir={out}"]
  killed = run_forked([INTERRUPTED_TOOL, "--kill_after=3", *command])
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert sorted(name for name in os.listdir(checkpoints) if name.endswith(".index")) == [
      "ckpt-2.index"]

  # The disk fills: step 4's checkpoint cannot be written (no file may grow past the middle
  # between best/'s weights, which can still be written, and step 2's checkpoint data).
  weights = os.path.getsize(out / "best" / "model.weights.h5")
  limit = (weights + os.path.getsize(checkpoints / "ckpt-2.data-00000-of-00001")) // 2
  assert weights < limit
  full = run_forked([INTERRUPTED_TOOL, f"--file_size_limit={limit}", *command])
  assert full.returncode == 1, full.stderr[-3000:]
  assert f"Resuming from step 2 of 6: {checkpoints}/ckpt-2\n" in full.stdout
  assert "Traceback" not in full.stderr
  last_line = full.stderr.splitlines()[-1]
  assert re.fullmatch(
      rf"error: {checkpoints}: cannot write the checkpoint of step 4 \(.+\); the run stopped, "
      rf"and its latest complete checkpoint, {checkpoints}/ckpt-2, is kept: make room \(or fix "
      r"the directory\) and rerun the same command to resume", last_line), last_line
  assert sorted(name for name in os.listdir(checkpoints) if name.startswith("ckpt-")) == [
      "ckpt-2.data-00000-of-00001", "ckpt-2.index"]

  with start_tool(INTERRUPTED_TOOL, "--pause_after=2", *command) as stopped:
    stopped.wait_for_output(r"^PAUSED after step 2$")  # steps 3 and 4 of the run
    stopped.send_signal(signal.SIGTERM)
    stdout, stderr = stopped.communicate(timeout=300)
  assert stopped.returncode == 143, stderr[-3000:]
  assert stderr == (f"Stopped by SIGTERM at step 4: checkpoint written to {checkpoints}/ckpt-4; "
                    "rerun the same command to resume\n")

  resumed = run_tool("run/classifier.py", *flags, f"--output_dir={out}")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"Resuming from step 4 of 6: {checkpoints}/ckpt-4\n" in resumed.stdout
  assert "fine-tuned steps 5-6 of 6 in " in resumed.stdout
  best_line = [line for line in resumed.stdout.splitlines() if line.startswith("Best dev")]
  assert best_line == [line.replace("straight", "out") for line in straight.stdout.splitlines()
                       if line.startswith("Best dev")]
  expected = json.load(open(tmp_path / "straight" / "train_history.json"))
  actual = json.load(open(out / "train_history.json"))
  assert [h["step"] for h in actual["history"]] == [2, 4, 6]
  assert actual["best"]["step"] == expected["best"]["step"]
  for want, got in zip(expected["history"], actual["history"]):
    assert want.keys() == got.keys()
    np.testing.assert_allclose([got[k] for k in sorted(got)], [want[k] for k in sorted(want)],
                               rtol=1e-5, atol=1e-6)
  expected, actual = _weights(tmp_path / "straight" / "best"), _weights(out / "best")
  assert expected.keys() == actual.keys()
  for name in expected:
    np.testing.assert_allclose(actual[name], expected[name], atol=1e-6, rtol=0, err_msg=name)
  assert os.listdir(checkpoints) == ["finished.json"]
