"""Multi-label classification: label sets read from a delimited label column, micro/macro F1
against hand-computed counts, per-label thresholds tuned on dev, a run end to end and the
export's per-label sigmoid outputs."""

import contextlib
import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.checkpoints.labels import saved_thresholds
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.serving.saved_model import export_saved_model, load_exportable_model
from xlnet_tf.tasks import FinetuningOptions, ModelSource, run_finetuning
from xlnet_tf.tasks.classification import (ClassificationOptions, ClassificationTask,
                                           TaskDataOptions, load_task, task_loss)
from xlnet_tf.tasks.classification.labels import label_sets
from xlnet_tf.tasks.classification.metrics import multi_label_metrics, tune_thresholds
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf import XLNetConfig

LABELS = ["class", "function", "module"]


def logits_of(probabilities):
  probabilities = np.asarray(probabilities, np.float64)
  return np.log(probabilities / (1 - probabilities))


def test_micro_and_macro_f1_against_hand_counted_tp_fp_fn():
  labels = np.array([[1, 0, 1],
                     [0, 1, 0],
                     [1, 1, 0],
                     [0, 0, 1],
                     [0, 1, 0]])
  predicted = np.array([[1, 0, 0],
                        [0, 1, 1],
                        [1, 0, 0],
                        [1, 0, 1],
                        [0, 1, 0]])
  # Per label (TP, FP, FN): class (2, 1, 0), function (2, 0, 1), module (1, 1, 1).
  # F1 = 2TP / (2TP + FP + FN): 4/5, 4/5, 1/2; micro: TP 5, FP 2, FN 2 -> 10/14.
  logits = np.where(predicted == 1, 2.0, -2.0)
  metrics = multi_label_metrics(labels, logits)
  assert metrics["micro_f1"] == pytest.approx(10 / 14)
  assert metrics["macro_f1"] == pytest.approx((4 / 5 + 4 / 5 + 1 / 2) / 3)
  assert metrics["exact_match"] == pytest.approx(1 / 5)  # only the last row's set is right
  # The thresholds decide: a higher one for "module" drops its false positive in row 1.
  probabilities = np.where(predicted == 1, 0.9, 0.1)
  probabilities[1, 2] = 0.7
  strict = multi_label_metrics(labels, logits_of(probabilities), thresholds=[0.5, 0.5, 0.8])
  # module becomes (1, 0, 1): F1 2/3; micro TP 5, FP 1, FN 2 -> 10/13; row 1 now right.
  assert strict["macro_f1"] == pytest.approx((4 / 5 + 4 / 5 + 2 / 3) / 3)
  assert strict["micro_f1"] == pytest.approx(10 / 13)
  assert strict["exact_match"] == pytest.approx(2 / 5)


def test_a_label_never_true_and_never_predicted_counts_zero_in_macro_f1():
  labels = np.array([[1, 0], [1, 0]])
  metrics = multi_label_metrics(labels, np.array([[3.0, -3.0], [3.0, -3.0]]))
  assert metrics["micro_f1"] == 1.0 and metrics["macro_f1"] == 0.5


def test_thresholds_tuned_per_label_on_a_hand_built_case():
  probabilities = np.array([[0.9, 0.30, 0.2],
                            [0.8, 0.25, 0.1],
                            [0.6, 0.20, 0.3],
                            [0.4, 0.10, 0.05]])
  labels = np.array([[1, 1, 0],
                     [1, 1, 0],
                     [0, 0, 0],
                     [1, 0, 0]])
  thresholds = tune_thresholds(labels, logits_of(probabilities))
  # Label 0: predicting the top 2 gives F1 4/5, the top 4 (all) 6/7: best, cut below 0.4.
  # Label 1: its positives are the two highest: cut midway between 0.25 and 0.20.
  # Label 2: no positive example: the default 0.5.
  np.testing.assert_allclose(thresholds, [0.2, 0.225, 0.5])
  tuned = multi_label_metrics(labels, logits_of(probabilities), thresholds)
  assert tuned["macro_f1"] == pytest.approx((6 / 7 + 1.0 + 0.0) / 3)


def test_label_sets_follow_the_single_label_conventions():
  rows = [TextExample("a", None, "class|module", "f:2"), TextExample("b", None, " function ",
                                                                     "f:3"),
          TextExample("c", None, None, "f:4"), TextExample("d", None, "|", "f:5"),
          TextExample("e", None, "class|method", "f:6")]
  report = ReadReport()
  kept, values = label_sets(rows, LABELS, "|", report, labels_required=True)
  assert [e.text_a for e in kept] == ["a", "b"]
  assert values.tolist() == [[1, 0, 1], [0, 1, 0]]
  assert report.skipped == {"no label": ["f:4"], "empty label set '|'": ["f:5"],
                            f"label not in {LABELS}": ["f:6"]}
  # A label set inferred from the training file: an unknown label is an error naming it.
  with pytest.raises(UserInputError, match=r"^f:6: label 'method' does not occur in the "
                     r"training file t.tsv \(labels: \['class', 'function', 'module'\]\)$"):
    label_sets(rows, LABELS, "|", ReadReport(), "the training file t.tsv")
  # Unlabeled (test) rows are kept with a row nothing reads.
  kept, values = label_sets(rows[2:3], LABELS, "|", ReadReport())
  assert len(kept) == 1 and values.tolist() == [[-1, -1, -1]]


def test_the_loss_is_binary_cross_entropy_of_each_labels_sigmoid(sp_model, tmp_path):
  task = load_task(TaskDataOptions("generic", files={
      "train": write_tsv(tmp_path / "train.tsv", TRAIN)}, multi_label=True, max_seq_length=16),
      XLNetTokenizer(sp_model), splits=("train",))
  labels = np.array([[1, 0, 1], [0, 1, 0]], np.float32)
  logits = np.array([[2.0, -1.0, 0.5], [-3.0, 1.5, 0.0]], np.float32)
  expected = np.mean(np.log1p(np.exp(-logits)) * labels +
                     np.log1p(np.exp(logits)) * (1 - labels))
  assert float(task_loss(task)(labels, logits)) == pytest.approx(expected, rel=1e-5)


# ---- a run end to end, then export -------------------------------------------------------

TRAIN = [("a class with a method", "class"), ("def of a function", "function"),
         ("import the module", "module"), ("the class of the module", "class|module"),
         ("a function in a module", "function|module"), ("the class and its function",
                                                         "class|function"),
         ("a class, a function and a module", "class|function|module"),
         ("module level function", "module|function")] * 2
DEV = [("one class", "class"), ("the module's function", "function|module"),
       ("a module", "module"), ("class function", "class|function")]
TEST = ["a class", "module function", "nothing here", "the class module"]


def write_tsv(path, rows, header="text\tlabel"):
  lines = ["\t".join(row) if isinstance(row, tuple) else row for row in rows]
  path.write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sp_model):
  """(the run's root, what it printed): a multi-label run that trains, evaluates and
  predicts."""
  root = tmp_path_factory.mktemp("multi_label")
  vocabulary = XLNetTokenizer(sp_model).vocab_size
  XLNetConfig.preset("tiny", n_token=vocabulary).to_json_file(str(root / "config.json"))
  options = ClassificationOptions(
      task_name="generic", multi_label=True,
      model=ModelSource(model_config=str(root / "config.json"), sp_path=sp_model),
      train_file=write_tsv(root / "train.tsv", TRAIN), dev_file=write_tsv(root / "dev.tsv", DEV),
      test_file=write_tsv(root / "test.tsv", TEST, header="text"), max_seq_length=16,
      finetuning=FinetuningOptions(train_steps=6, batch_size=4, eval_every=3,
                                   learning_rate=1e-3, progress="none"),
      do_eval=True, do_predict=True, output_dir=str(root / "out"))
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    run_finetuning(ClassificationTask(options))
  return root, printed.getvalue()


def test_a_run_trains_evaluates_and_predicts_label_sets(trained):
  root, printed = trained
  best = root / "out" / "best"
  assert json.loads((best / "labels.json").read_text()) == LABELS
  assert json.loads((best / "head.json").read_text())["multi_label"] is True
  thresholds = json.loads((best / "thresholds.json").read_text())
  assert sorted(thresholds) == LABELS and all(0 < v < 1 for v in thresholds.values())
  history = json.loads((root / "out" / "train_history.json").read_text())
  assert history["metric"] == "micro_f1" and len(history["history"]) == 2
  assert history["thresholds"] == thresholds
  metrics = json.loads((root / "out" / "dev_metrics.json").read_text())
  assert sorted(metrics) == ["exact_match", "macro_f1", "micro_f1"]
  lines = (root / "out" / "generic_test_predictions.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 1 + len(TEST)
  for index, line in enumerate(lines[1:]):
    position, prediction = line.split("\t") if "\t" in line else (line, "")
    assert int(position) == index
    assert set(filter(None, prediction.split("|"))) <= set(LABELS)
  assert "generic: 3 labels from the training file" in printed


def test_a_predict_only_run_reads_the_tuned_thresholds(trained, sp_model):
  root, _ = trained
  best = str(root / "out" / "best")
  model, labels = load_exportable_model(best, "classifier")
  task = load_task(TaskDataOptions("generic", files={"dev": str(root / "dev.tsv")},
                                   model_dir=best, multi_label=True, max_seq_length=16),
                   XLNetTokenizer(sp_model), splits=("dev",))
  assert task.labels == labels == LABELS
  assert saved_thresholds(best, LABELS) == pytest.approx(model.thresholds)


def test_export_serves_each_labels_sigmoid_and_the_labels_over_their_thresholds(
    trained, sp_model, tmp_path):
  root, _ = trained
  model, labels = load_exportable_model(str(root / "out" / "best"), "classifier",
                                        sp_path=sp_model)
  assert model.multi_label and labels == LABELS
  # Thresholds that split this batch's probabilities, so predicted_labels is tested both ways.
  task = load_task(TaskDataOptions("generic", files={"dev": str(root / "dev.tsv")},
                                   labels=LABELS, multi_label=True, max_seq_length=16),
                   XLNetTokenizer(sp_model), splits=("dev",))
  features = {k: v for k, v in task.splits["dev"].items() if k != "label"}
  probabilities = tf.sigmoid(model(features)).numpy()
  model.thresholds = np.median(probabilities, axis=0).tolist()
  path = export_saved_model(model, sp_model, str(tmp_path), "multi", 16, labels=labels,
                            warmup_requests=0)
  served = tf.saved_model.load(path).signatures["serve_ids"](
      input_ids=tf.constant(features["input_ids"]),
      segment_ids=tf.constant(features["segment_ids"]),
      input_mask=tf.constant(features["input_mask"], tf.float32))
  np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
  expected = (probabilities >= np.asarray(model.thresholds, np.float32)).astype(np.int32)
  assert 0 < expected.sum() < expected.size
  np.testing.assert_array_equal(served["predicted_labels"].numpy(), expected)
  # The names beside them: each label where it is predicted, "" where not.
  np.testing.assert_array_equal(served["predicted_label_names"].numpy().astype(str),
                                np.where(expected == 1, np.array(LABELS), ""))
  np.testing.assert_allclose(served["thresholds"].numpy()[0], model.thresholds, atol=1e-7)
  assert json.load(open(os.path.join(path, "assets", "labels.json"))) == LABELS


@pytest.mark.parametrize("arguments, message", [
    (dict(name="sst-2", multi_label=True), "--multi_label reads generic files"),
    (dict(multi_label=True, regression=True), "--multi_label and --regression exclude"),
    (dict(multi_label=True, label_delimiter=""), "--label_delimiter='': must be the separator"),
])
def test_multi_label_options_no_run_can_use_are_refused(sp_model, tmp_path, arguments, message):
  arguments = {"name": "generic", **arguments}
  with pytest.raises(UserInputError, match=message):
    load_task(TaskDataOptions(max_seq_length=16, data_dir=str(tmp_path),
                              files={"train": write_tsv(tmp_path / "train.tsv", TRAIN)},
                              **arguments), XLNetTokenizer(sp_model), splits=("train",))
