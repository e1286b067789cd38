"""The sequence-classification readers: GLUE columns, IMDB folders, generic CSV/TSV/JSONL files
(text columns by header name, text_columns) and their errors with file:line."""

import json

import pytest

from xlnet_tf.tasks.classification.readers import read_generic, read_glue, read_imdb
from xlnet_tf.text.read_report import ReadReport


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


def test_imdb_folders(tmp_path):
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
