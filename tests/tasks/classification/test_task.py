"""Sequence-classification encoding (the original layout) and the task: labels inferred,
saved beside the model and read back; regression."""

import pytest

from xlnet_tf.checkpoints.labels import save_labels
from xlnet_tf.tasks.classification import TaskDataOptions, encode_examples, load_task
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.text.packing import truncate_pair
from xlnet_tf.text.tokenizer import XLNetTokenizer


def test_truncation_is_longest_first():
  a, b = list(range(10)), list(range(4))
  truncate_pair(a, b, 8)
  assert (len(a), len(b)) == (4, 4)


def test_layout_is_the_originals(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  sep, cls, pad = (tokenizer.special_ids.sep, tokenizer.special_ids.cls,
                   tokenizer.special_ids.pad)
  examples = [TextExample("The class statement", "defines a class", "1", "x:1"),
              TextExample("A single sentence that is long enough to be cut " * 3, None, "0",
                          "x:2")]
  out = encode_examples(tokenizer, examples, 16)
  a = tokenizer.encode("The class statement")
  b = tokenizer.encode("defines a class")
  expected = a + [sep] + b + [sep, cls]
  row = out["input_ids"][0]
  pad_count = 16 - len(expected)
  assert row[:pad_count].tolist() == [pad] * pad_count and row[pad_count:].tolist() == expected
  assert out["segment_ids"][0].tolist() == [4] * pad_count + [0] * (len(a) + 1) + [1] * (
      len(b) + 1) + [2]
  assert out["input_mask"][0].tolist() == [0] * pad_count + [1] * len(expected)
  single = out["input_ids"][1]
  assert single[-2:].tolist() == [sep, cls] and out["input_mask"][1].all()


def write_rows(path, rows, header="sentence,label"):
  path.write_text(header + "\n" + "\n".join(rows) + "\n")
  return str(path)


def test_inferred_labels_are_saved_and_read_back_without_a_training_file(sp_model, tmp_path):
  tokenizer = XLNetTokenizer(sp_model)
  files = {"train": write_rows(tmp_path / "train.csv", ["a class,pos", "a value,neg",
                                                       "a type,neutral", "a list,neg"]),
           "dev": write_rows(tmp_path / "dev.csv", ["a name,neutral", "a module,pos"]),
           "test": write_rows(tmp_path / "test.csv", ["a string", "an object"],
                              header="sentence")}
  task = load_task(TaskDataOptions("generic", files=files, max_seq_length=16), tokenizer)
  assert task.labels == ["neg", "neutral", "pos"]
  assert task.label_origin == f"the training file {files['train']}"
  assert task.splits["train"]["label"].tolist() == [2, 0, 1, 0]
  assert task.splits["dev"]["label"].tolist() == [1, 2]
  # A training run saves the order beside the best weights; a run without training reads it.
  model_dir = str(tmp_path / "best")
  save_labels(model_dir, task.labels)
  again = load_task(TaskDataOptions("generic", files=files, model_dir=model_dir,
                                    max_seq_length=16), tokenizer, splits=("dev", "test"))
  assert again.labels == task.labels and again.splits["dev"]["label"].tolist() == [1, 2]
  with pytest.raises(ValueError, match=r"no --labels and no labels.json in .*empty"):
    load_task(TaskDataOptions("generic", files=files, model_dir=str(tmp_path / "empty"),
                              max_seq_length=16), tokenizer, splits=("test",))
  # Given labels keep their order and skip (count) the others.
  given = load_task(TaskDataOptions("generic", files=files, labels=["pos", "neg"],
                                    max_seq_length=16), tokenizer, splits=("train",))
  assert given.splits["train"]["label"].tolist() == [0, 1, 1]
  assert list(given.reports["train"].skipped.values()) == [[f"{files['train']}:4"]]


def test_a_dev_label_unseen_in_training_is_refused_with_file_and_line(sp_model, tmp_path):
  tokenizer = XLNetTokenizer(sp_model)
  files = {"train": write_rows(tmp_path / "train.csv", ["a class,pos", "a value,neg"]),
           "dev": write_rows(tmp_path / "dev.csv", ["a name,neg", "a module,maybe"])}
  with pytest.raises(ValueError, match=r"dev.csv:3: label 'maybe' does not occur in the "
                     r"training file .*train.csv \(labels: \['neg', 'pos'\]\)"):
    load_task(TaskDataOptions("generic", files=files, max_seq_length=16), tokenizer)
  model_dir = str(tmp_path / "best")
  save_labels(model_dir, ["neg", "pos"])
  with pytest.raises(ValueError, match=r"dev.csv:3: label 'maybe' does not occur in "
                     r".*best/labels.json"):
    load_task(TaskDataOptions("generic", files=files, model_dir=model_dir, max_seq_length=16),
              tokenizer, splits=("dev",))


def test_regression_tasks_are_unaffected(sp_model, tmp_path):
  tokenizer = XLNetTokenizer(sp_model)
  files = {"train": write_rows(tmp_path / "train.csv", ["a class,0.5", "a value,3.25"]),
           "dev": write_rows(tmp_path / "dev.csv", ["a name,7", "a module,x"])}
  task = load_task(TaskDataOptions("generic", files=files, regression=True, max_seq_length=16),
                   tokenizer)
  assert task.labels is None and task.label_origin is None
  assert task.splits["train"]["label"].tolist() == [0.5, 3.25]
  assert task.splits["dev"]["label"].tolist() == [7.0]
  assert list(task.reports["dev"].skipped) == ["label 'x' is not a number"]
