"""Fine-tuning end to end: a task that needs both segments is learnt; a run trains, evaluates,
predicts, and its best/ exports and serves."""

import dataclasses
import io
import json
import re
import shutil

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.tasks import ModelSource, run_finetuning
from xlnet_tf.tasks import classification as finetuning
from xlnet_tf.tasks.classification import ClassificationOptions, ClassificationTask
from xlnet_tf.tasks.finetuning import FinetuningOptions, feature_dataset, finetune

from cli_output import run_tool
from event_files import scalar_series
from task_files import reordering_task


def test_learns_a_task_that_needs_both_segments(small_data, tmp_path):
  reordering_task(tmp_path / "train.csv", 2000, 0)
  reordering_task(tmp_path / "dev.csv", 300, 1)
  tokenizer = XLNetTokenizer(small_data["sp_path"])
  task = finetuning.load_task(finetuning.TaskDataOptions("generic", files={
      "train": str(tmp_path / "train.csv"), "dev": str(tmp_path / "dev.csv")},
      labels=["0", "1"], max_seq_length=16), tokenizer)
  keras.utils.set_random_seed(0)
  config = XLNetConfig(n_token=tokenizer.vocab_size, n_layer=2, d_model=64, n_head=4,
                       d_head=16, d_inner=128, dropout=0.0, dropatt=0.0)
  model = finetuning.build_classifier(config, task)
  # 1e-3 and 5e-4 both reach > 0.99 by step 400 (2e-3 stalls at 0.5-0.89 from some seeds).
  options = FinetuningOptions(train_steps=500, batch_size=32, learning_rate=1e-3,
                              warmup_steps=50, eval_every=100, jit_compile=True)
  result = finetuning.train_classifier(model, task, options)
  assert result["best"]["accuracy"] > 0.9, result["history"]


def test_a_run_trains_evaluates_predicts_and_exports(small_data, tmp_path, capsys):
  """Labels inferred from the training file (GLUE's sentence1/sentence2 header), saved beside
  the best weights and read back by a predict-only run (which predicts the same) and by the
  export."""
  names = ("other_words", "same_words")  # label 0, 1; sorted alike
  reordering_task(tmp_path / "train.csv", 64, 0, ("sentence1", "sentence2", "label"), names)
  reordering_task(tmp_path / "dev.csv", 16, 1, ("sentence1", "sentence2", "label"), names)
  (tmp_path / "test.jsonl").write_text("\n".join(
      json.dumps({"text": a, "text_b": b}) for a, b in (("class value", "value class"),
                                                         ("list type", "name method")) * 3))
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(small_data["sp_path"]).vocab_size
                     ).to_json_file(str(tmp_path / "xlnet_config.json"))
  options = ClassificationOptions(
      task_name="generic", test_file=f"{tmp_path}/test.jsonl",
      model=ModelSource(sp_path=small_data["sp_path"],
                        model_config=f"{tmp_path}/xlnet_config.json"),
      max_seq_length=16, output_dir=f"{tmp_path}/out", train_file=f"{tmp_path}/train.csv",
      dev_file=f"{tmp_path}/dev.csv", do_eval=True, do_predict=True,
      finetuning=FinetuningOptions(train_steps=6, eval_every=3, batch_size=8,
                                   summary_dir=f"{tmp_path}/out/train"))
  run_finetuning(ClassificationTask(options))
  printed = capsys.readouterr().out
  assert "Best dev accuracy" in printed
  assert (f"generic: 2 labels from the training file {tmp_path}/train.csv: other_words, "
          "same_words") in printed
  assert json.load(open(tmp_path / "out" / "best" / "labels.json")) == ["other_words",
                                                                        "same_words"]
  # stdout is no terminal here: plain progress lines, one per evaluation, no bar.
  assert re.findall(r"^step (\d)/6: dev accuracy", printed, re.M) == ["3", "6"]
  assert "\r" not in printed and "\x1b" not in printed
  metrics = json.load(open(tmp_path / "out" / "dev_metrics.json"))
  assert 0.0 <= metrics["accuracy"] <= 1.0
  predictions_path = tmp_path / "out" / "generic_test_predictions.tsv"
  lines = predictions_path.read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 7
  assert all(line.split("\t")[1] in names for line in lines[1:])
  history = json.load(open(tmp_path / "out" / "train_history.json"))
  assert [h["step"] for h in history["history"]] == [3, 6]
  scalars = scalar_series(str(tmp_path / "out" / "train"))  # TensorBoard: docs/finetuning.md
  assert [step for step, _ in scalars["loss"]] == list(range(1, 7))
  assert [step for step, _ in scalars["dev/accuracy"]] == [3, 6]
  run_finetuning(ClassificationTask(dataclasses.replace(
      options, train_file=None, dev_file=None, do_train=False, do_eval=False)))
  assert f"labels from {tmp_path}/out/best/labels.json" in capsys.readouterr().out
  assert predictions_path.read_text().splitlines() == lines
  # best/ holds the tokenizer the run read text with and its packed length.
  best = tmp_path / "out" / "best"
  assert (best / "spiece.model").read_bytes() == open(small_data["sp_path"], "rb").read()
  assert json.load(open(best / "preprocessor.json")) == {"sequence_length": 16,
                                                         "num_segments": 1}
  # So the export needs no --sp_path nor --max_seq_length; it takes the class count from
  # labels.json and ships the names with the model; --check serves it in a fresh process.
  exported = run_tool("run/export.py", f"--model_dir={best}", "--text_pairs",
                      f"--export_base={tmp_path}/serving", "--check")
  assert exported.returncode == 0, exported.stderr[-3000:]
  version = tmp_path / "serving" / "xlnet" / "1"
  outputs = "logits, predicted_label, predicted_label_name, probabilities"
  assert re.search(
      rf"^Wrote {version}, checked in a fresh process:\n"
      rf"serve_ids \(input_ids, segment_ids, input_mask\): {outputs} match the Keras model on "
      r"3 check rows \(largest difference [\d.e-]+\)\n"
      rf"serving_default \(text, text_b\): {outputs} match the Keras model on 4 check rows "
      r"\(largest difference [\d.e-]+\)\n\Z", exported.stdout, re.M), exported.stdout
  assert json.load(open(version / "assets" / "labels.json")) == ["other_words", "same_words"]
  assert served_input_shape(version, "serve_ids", "input_ids") == [-1, 16]
  # A version whose weights were changed since: the check fails in one line, naming it.
  shutil.copytree(version, version.parent / "2")
  add_to_saved_weights(str(version.parent / "2" / "variables" / "variables"), 1.0)
  damaged = run_tool("run/export.py", f"--model_dir={best}", f"--export_base={tmp_path}/serving",
                     "--version=2", "--check")
  assert damaged.returncode == 1
  assert re.fullmatch(rf"error: {version.parent}/2: serve_ids output logits differs from the "
                      r"Keras model's by [\d.e+-]+ \(the largest \|difference\| / max\(1, "
                      r"\|value\|\); tolerance 0\.0001\)\n",
                      damaged.stderr), damaged.stderr[-3000:]


def served_input_shape(saved_model_dir, signature, name):
  """The shape (-1: any) of a signature's input, read from saved_model.pb."""
  saved = saved_model_pb2.SavedModel()
  saved.ParseFromString((saved_model_dir / "saved_model.pb").read_bytes())
  shape = saved.meta_graphs[0].signature_def[signature].inputs[name].tensor_shape
  return [dim.size for dim in shape.dim]


def add_to_saved_weights(prefix, amount):
  """Adds `amount` to every floating value of the checkpoint at `prefix`, in place."""
  reader = tf.train.load_checkpoint(prefix)
  names = sorted(reader.get_variable_to_shape_map())
  values = [reader.get_tensor(name) for name in names]
  values = [value + amount if getattr(value, "dtype", np.dtype(object)).kind == "f" else value
            for value in values]
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=values)


def test_mnli_matched_and_mismatched(small_data, tmp_path):
  header = ["index", "promptID", "pairID", "genre", "a", "b", "c", "d", "sentence1", "sentence2",
            "label1", "gold_label"]
  for name, label in (("train", "neutral"), ("dev_matched", "entailment"),
                      ("dev_mismatched", "contradiction")):
    rows = [header, ["0", "1", "2", "g", "", "", "", "", "A class.", "A type.", label, label]]
    (tmp_path / f"{name}.tsv").write_text("\n".join("\t".join(r) for r in rows) + "\n")
  tokenizer = XLNetTokenizer(small_data["sp_path"])
  labels = ["contradiction", "entailment", "neutral"]
  for mismatched, expected in ((False, "entailment"), (True, "contradiction")):
    task = finetuning.load_task(finetuning.TaskDataOptions(
        "mnli", data_dir=str(tmp_path), mnli_mismatched=mismatched, max_seq_length=16),
        tokenizer)
    assert task.splits["dev"]["label"].tolist() == [labels.index(expected)]
    assert task.splits["train"]["label"].tolist() == [labels.index("neutral")]


class FakeTerminal(io.StringIO):
  def isatty(self):
    return True


def test_finetune_runs_exactly_train_steps_shows_progress_and_writes_scalars(tmp_path):
  """7 steps with eval_every=3: evaluations at 3, 6 and 7 (the last period is shorter); on a
  terminal the bar reaches 7/7 and there is one dev line per evaluation; TensorBoard gets each
  step's loss, gradient norm, learning rate and examples/s and each evaluation's scores, in
  place of what an earlier run left."""
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  count, length = 24, 8
  features = {"input_ids": rng.integers(5, 50, (count, length)).astype(np.int32),
              "segment_ids": np.zeros((count, length), np.int32),
              "input_mask": np.ones((count, length), np.float32),
              "label": rng.integers(0, 2, count).astype(np.int32)}
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", n_token=50)), 2)
  accuracies = iter([0.5, 0.75, 0.625])
  train = feature_dataset(features, 4, label_key="label", shuffle=True, repeat=True)
  terminal = FakeTerminal()
  summary_dir = tmp_path / "train"
  summary_dir.mkdir()
  (summary_dir / "events.out.tfevents.1.earlier_run").write_bytes(b"not an event file")
  options = FinetuningOptions(train_steps=7, batch_size=4, learning_rate=1e-3, eval_every=3,
                              jit_compile=False, progress="auto", summary_dir=str(summary_dir))
  result = finetune(model, train, options, evaluate=lambda: {"accuracy": next(accuracies)},
                    metric="accuracy", best_dir=str(tmp_path / "best"),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    progress_stream=terminal)
  # (the steps are the optimizer's iterations at each evaluation)
  assert [h["step"] for h in result["history"]] == [3, 6, 7]
  assert result["best"]["step"] == 6
  text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())  # rich's colours, cursor
  assert re.search(r"\rstep 7/7 ━{20} loss \d\.\d{4}  \d+\.\d\d s/step", text), text
  assert re.findall(r"step (\d)/7: dev accuracy", text) == ["3", "6", "7"]
  assert "(best accuracy 0.75 at step 6)" in text
  scalars = scalar_series(str(summary_dir))
  assert sorted(scalars) == ["dev/accuracy", "examples_per_sec", "grad_norm", "learning_rate",
                             "loss"]
  for tag in ("loss", "grad_norm", "learning_rate"):
    assert [step for step, _ in scalars[tag]] == list(range(1, 8)), tag
  assert [step for step, _ in scalars["examples_per_sec"]] == list(range(2, 8))  # 1 compiles
  assert all(np.isfinite(value) for series in scalars.values() for _, value in series)
  assert scalars["examples_per_sec"][-1][1] > 0
  rates = [value for _, value in scalars["learning_rate"]]
  assert rates[0] > 0 and rates == sorted(rates, reverse=True)  # linear decay
  assert scalars["dev/accuracy"] == [(3, 0.5), (6, 0.75), (7, 0.625)]
