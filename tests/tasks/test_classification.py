import json

import numpy as np
import pytest

from xlnet_tf.tasks.classification import (TextExample, encode_examples, label_ids, read_generic,
                                          read_glue)
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
  bad.write_text("sentence\tlabel\nx\t1\n")
  with pytest.raises(ValueError, match=r"bad.tsv:1: the header must name a 'text' column"):
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
