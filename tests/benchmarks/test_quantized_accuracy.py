"""int8 against float32 on a fine-tuned classifier's dev set
(xlnet_tf.benchmarks.quantized_accuracy): the scores of given logits, and the tool
(run/quantized_accuracy.py) end to end on a classifier that run/classifier.py fine-tuned, its
float32 accuracy that of the tool's own --do_eval."""

import json

import numpy as np
import pytest

from xlnet_tf import XLNetConfig
from xlnet_tf.benchmarks import quantized_accuracy
from xlnet_tf.text.tokenizer import XLNetTokenizer

from cli_output import run_tool

WORDS = {"code": ["class", "function", "module", "method"],
         "data": ["value", "string", "number", "list"]}


def test_scores_count_the_changed_predictions_and_the_logits_error():
  labels = np.array([0, 1, 1, 0])
  reference = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])  # 2 of 4 right
  moved = reference.copy()
  moved[2] = [0.0, 2.0]  # a wrong prediction made right: +25 points, 1 changed
  rows = quantized_accuracy.compare({"float32": reference, "int8": moved}, labels)
  assert rows["float32"] == {"accuracy": 0.5, "difference_points": 0.0,
                             "differing_predictions": 0, "logits_mean_relative_error": 0.0}
  assert rows["int8"]["accuracy"] == 0.75
  assert rows["int8"]["difference_points"] == pytest.approx(25.0)
  assert rows["int8"]["differing_predictions"] == 1
  # One example of four moved by sqrt(8) against a norm of 2.
  assert rows["int8"]["logits_mean_relative_error"] == pytest.approx(np.sqrt(8) / 2 / 4)


def labelled_file(path, count, seed):
  rng = np.random.default_rng(seed)
  with open(path, "w") as handle:
    for _ in range(count):
      label = str(rng.choice(sorted(WORDS)))
      handle.write(json.dumps({"text": " ".join(rng.choice(WORDS[label], 4)), "label": label})
                   + "\n")


def test_a_fine_tuned_classifier_end_to_end(sp_model, tmp_path):
  labelled_file(tmp_path / "train.jsonl", 64, 0)
  labelled_file(tmp_path / "dev.jsonl", 24, 1)
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size).to_json_file(
      str(tmp_path / "xlnet_config.json"))
  trained = run_tool(
      "run/classifier.py", "--task_name=generic", f"--train_file={tmp_path}/train.jsonl",
      f"--dev_file={tmp_path}/dev.jsonl", f"--sp_path={sp_model}",
      f"--model_config={tmp_path}/xlnet_config.json", "--max_seq_length=16",
      "--train_batch_size=8", "--train_steps=4", "--eval_every=4", "--nojit_compile",
      f"--output_dir={tmp_path}/out", "--do_train", "--do_eval")
  assert trained.returncode == 0, trained.stderr[-3000:]
  output = tmp_path / "int8.json"
  measured = run_tool(
      "run/quantized_accuracy.py", f"--model_dir={tmp_path}/out/best",
      f"--data={tmp_path}/dev.jsonl", f"--sp_path={sp_model}", "--max_seq_length=16",
      "--batch_size=8", f"--results_json={output}")
  assert measured.returncode == 0, measured.stderr[-3000:]
  written = json.loads(output.read_text())
  assert written["markdown"] in measured.stdout
  assert written["markdown"] == quantized_accuracy.markdown(written)
  assert written["examples"] == 24 and written["labels"] == ["code", "data"]
  assert list(written["rows"]) == ["float32", "int8"]
  reported = json.loads((tmp_path / "out" / "dev_metrics.json").read_text())
  assert written["rows"]["float32"]["accuracy"] == pytest.approx(reported["accuracy"])
  for row in written["rows"].values():
    assert set(row) == {"accuracy", "difference_points", "differing_predictions",
                        "logits_mean_relative_error"}
    assert 0 <= row["differing_predictions"] <= 24
    assert row["logits_mean_relative_error"] < 0.1  # int8 weights: near the float logits
  assert written["markdown"].count("\n") == 3  # the header, its rule and two rows
