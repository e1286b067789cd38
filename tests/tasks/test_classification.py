import json

import numpy as np
import pytest

from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.classification import (TextExample, encode_examples, label_ids, load_task,
                                          read_generic, read_glue, training_labels)
from xlnet_tf.text.packing import truncate_pair
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.text.tokenizer import XLNetTokenizer


def write(path, rows):
  path.write_text("\n".join("\t".join(row) for row in rows) + "\n", encoding="utf-8")


def test_glue_readers_take_the_right_columns(tmp_path):
  mnli = tmp_path / "mnli"
  mnli.mkdir()
  header = ["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p", "sentence1",
            "sentence2", "label1", "gold_label"]
  write(mnli / "train.tsv", [header, ["0", "1", "2", "g", "", "", "", "", "A cat.", "An animal.",
                                      "entailment", "entailment"],
                             ["1", "1", "2", "g", "", "", "", "", "short row"]])
  report = ReadReport()
  examples = read_glue("mnli", str(mnli), "train", report)
  assert [(e.text_a, e.text_b, e.label) for e in examples] == [("A cat.", "An animal.",
                                                                  "entailment")]
  assert "needs 11" in next(iter(report.skipped)) and report.skipped[next(iter(
      report.skipped))][0].endswith("train.tsv:3")
  cola = tmp_path / "cola"
  cola.mkdir()
  write(cola / "train.tsv", [["src", "1", "", "Good sentence."], ["src", "0", "*", "Bad one."]])
  examples = read_glue("cola", str(cola), "train", ReadReport())
  assert [(e.text_a, e.label) for e in examples] == [("Good sentence.", "1"), ("Bad one.", "0")]


def test_labels_outside_the_set_are_counted_skips():
  report = ReadReport()
  examples = [TextExample("a", None, "pos", "f:2"), TextExample("b", None, "maybe", "f:3")]
  kept, values = label_ids(examples, ["neg", "pos"], report)
  assert len(kept) == 1 and values.tolist() == [1]
  assert report.skipped == {"label not in ['neg', 'pos']": ["f:3"]}
  kept, values = label_ids([TextExample("a", "b", "3.5", "f:1")], None, ReadReport())
  assert values.dtype == np.float32 and values[0] == 3.5


def test_generic_files_and_their_errors(tmp_path):
  jsonl = tmp_path / "d.jsonl"
  jsonl.write_text(json.dumps({"text": "x", "label": 1}) + "\n{broken\n")
  with pytest.raises(ValueError, match=r"d.jsonl:2: not valid JSON"):
    read_generic(str(jsonl), ReadReport())
  csv_file = tmp_path / "d.csv"
  csv_file.write_text("text,text_b,label\nhello,world,1\n")
  (example,) = read_generic(str(csv_file), ReadReport())
  assert (example.text_a, example.text_b, example.label) == ("hello", "world", "1")
  bad = tmp_path / "bad.tsv"
  bad.write_text("words\tlabel\nx\t1\n")
  with pytest.raises(ValueError, match=r"bad.tsv:1: no text column among \['words', 'label'\]"
                     r"; name one \[.*'sentence1'.*\] or pass text_columns"):
    read_generic(str(bad), ReadReport())


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


def test_imdb_folders(tmp_path):
  from xlnet_tf.tasks.classification import read_imdb
  for split in ("train", "test"):
    for label in ("pos", "neg"):
      folder = tmp_path / split / label
      folder.mkdir(parents=True)
      (folder / "0_9.txt").write_text(f"A {label} review.<br />Second line.")
  (tmp_path / "train" / "neg" / "1_2.txt").write_text("   ")
  (tmp_path / "train" / "pos" / "2_8.txt").write_bytes(b"bad \xff bytes")
  report = ReadReport()
  examples = read_imdb(str(tmp_path), "train", report)
  assert [(e.text_a, e.label) for e in examples] == [
      ("A neg review. Second line.", "neg"), ("A pos review. Second line.", "pos")]
  assert set(report.skipped) == {"empty review", "not valid UTF-8"}
  assert len(read_imdb(str(tmp_path), "dev", ReadReport())) == 2  # dev = the test folder


def texts_and_labels(examples):
  return [(e.text_a, e.text_b, e.label) for e in examples]


def test_header_aliases_name_the_text_columns(tmp_path):
  cases = {"sentence1\tsentence2\tlabel\nA cat.\tAn animal.\tyes\n": ("A cat.", "An animal."),
           "idx,question,sentence,label\n0,Who?,Me.,yes\n": ("Who?", "Me."),
           "question,passage,label\nIs it?,It is.,yes\n": ("Is it?", "It is."),
           "premise,hypothesis,label\nP.,H.,yes\n": ("P.", "H."),
           "text_a,text_b,label\nA,,yes\n": ("A", None),  # an empty second text: one text
           "sentence,label\nJust one.,yes\n": ("Just one.", None)}
  for number, (content, texts) in enumerate(cases.items()):
    path = tmp_path / ("f%d.%s" % (number, "tsv" if "\t" in content else "csv"))
    path.write_text(content)
    assert texts_and_labels(read_generic(str(path), ReadReport())) == [texts + ("yes",)], content
  jsonl = tmp_path / "d.jsonl"
  jsonl.write_text(json.dumps({"sentence1": "a", "sentence2": "b", "label": 2}) + "\n"
                   + json.dumps({"text": "c"}) + "\n" + json.dumps({"text": 1, "text_b": 2.5})
                   + "\n")
  assert texts_and_labels(read_generic(str(jsonl), ReadReport())) == [
      ("a", "b", "2"), ("c", None, None), ("1", "2.5", None)]


def test_text_columns_override_the_header_names(tmp_path):
  path = tmp_path / "d.csv"
  path.write_text("text,title,body,label\nignored,T,B,x\n")
  assert texts_and_labels(read_generic(str(path), ReadReport(), ["title", "body"])) == [
      ("T", "B", "x")]
  assert texts_and_labels(read_generic(str(path), ReadReport(), ["body"])) == [("B", None, "x")]
  with pytest.raises(ValueError, match=r"d.csv:1: no column 'summary' \(text_columns\); the "
                     r"columns are \['text', 'title', 'body', 'label'\]"):
    read_generic(str(path), ReadReport(), ["title", "summary"])
  with pytest.raises(ValueError, match="one or two columns"):
    read_generic(str(path), ReadReport(), ["text", "title", "body"])
  jsonl = tmp_path / "d.jsonl"
  jsonl.write_text(json.dumps({"title": "T", "label": "x"}) + "\n" + json.dumps({"body": "B"}))
  with pytest.raises(ValueError, match=r"d.jsonl:2: no column 'title'"):
    read_generic(str(jsonl), ReadReport(), ["title"])


def test_training_labels_are_sorted_integers_by_value():
  def examples(*labels):
    return [TextExample("t", None, label, f"f:{i}") for i, label in enumerate(labels)]
  assert training_labels(examples("pos", "neg", None, "neutral", "neg"), "f") == [
      "neg", "neutral", "pos"]
  assert training_labels(examples("10", "2", "0", "-1"), "f") == ["-1", "0", "2", "10"]
  with pytest.raises(ValueError, match=r"train.csv: a classification task needs at least 2 "
                     r"labels in its training file; got \['pos'\]"):
    training_labels(examples("pos", "pos"), "train.csv")


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
  task = load_task("generic", tokenizer, 16, files=files)
  assert task.labels == ["neg", "neutral", "pos"]
  assert task.label_origin == f"the training file {files['train']}"
  assert task.splits["train"]["label"].tolist() == [2, 0, 1, 0]
  assert task.splits["dev"]["label"].tolist() == [1, 2]
  # A training run saves the order beside the best weights; a run without training reads it.
  model_dir = str(tmp_path / "best")
  finetuning.save_labels(model_dir, task.labels)
  again = load_task("generic", tokenizer, 16, files=files, splits=("dev", "test"),
                    model_dir=model_dir)
  assert again.labels == task.labels and again.splits["dev"]["label"].tolist() == [1, 2]
  with pytest.raises(ValueError, match=r"no --labels and no labels.json in .*empty"):
    load_task("generic", tokenizer, 16, files=files, splits=("test",),
              model_dir=str(tmp_path / "empty"))
  # Given labels keep their order and skip (count) the others.
  given = load_task("generic", tokenizer, 16, files=files, labels=["pos", "neg"],
                    splits=("train",))
  assert given.splits["train"]["label"].tolist() == [0, 1, 1]
  assert list(given.reports["train"].skipped.values()) == [[f"{files['train']}:4"]]


def test_a_dev_label_unseen_in_training_is_refused_with_file_and_line(sp_model, tmp_path):
  tokenizer = XLNetTokenizer(sp_model)
  files = {"train": write_rows(tmp_path / "train.csv", ["a class,pos", "a value,neg"]),
           "dev": write_rows(tmp_path / "dev.csv", ["a name,neg", "a module,maybe"])}
  with pytest.raises(ValueError, match=r"dev.csv:3: label 'maybe' does not occur in the "
                     r"training file .*train.csv \(labels: \['neg', 'pos'\]\)"):
    load_task("generic", tokenizer, 16, files=files)
  model_dir = str(tmp_path / "best")
  finetuning.save_labels(model_dir, ["neg", "pos"])
  with pytest.raises(ValueError, match=r"dev.csv:3: label 'maybe' does not occur in "
                     r".*best/labels.json"):
    load_task("generic", tokenizer, 16, files=files, splits=("dev",), model_dir=model_dir)


def test_regression_tasks_are_unaffected(sp_model, tmp_path):
  tokenizer = XLNetTokenizer(sp_model)
  files = {"train": write_rows(tmp_path / "train.csv", ["a class,0.5", "a value,3.25"]),
           "dev": write_rows(tmp_path / "dev.csv", ["a name,7", "a module,x"])}
  task = load_task("generic", tokenizer, 16, files=files, regression=True)
  assert task.labels is None and task.label_origin is None
  assert task.splits["train"]["label"].tolist() == [0.5, 3.25]
  assert task.splits["dev"]["label"].tolist() == [7.0]
  assert list(task.reports["dev"].skipped) == ["label 'x' is not a number"]
