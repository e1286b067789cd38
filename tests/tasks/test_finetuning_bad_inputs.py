"""Bad input to fine-tuning and export: a counted skip with file:line, or one `error: ` line
naming the file, line or flag, exit status 1 and nothing left behind; never a made-up label,
a NaN or a default. The model flags of every other tool: tests/cli/test_model_flags.py."""

import csv
import dataclasses
import json
import os
import re
import shutil

import keras
import numpy as np
import pytest

from cli_output import run_tool
from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.checkpoints.huggingface_writer import save_huggingface_checkpoint
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.serving.saved_model import load_exportable_model
from xlnet_tf.utils.json_files import read_json, write_json
from xlnet_tf.tasks import classification
from xlnet_tf.tasks.classification.labels import label_ids
from xlnet_tf.tasks.classification.readers import read_generic
from xlnet_tf.tasks.finetuning import (FinetuningOptions, NonFiniteTrainingError,
                                       check_sequence_length, feature_dataset, finetune)
from xlnet_tf.tasks.race import read_race
from xlnet_tf.tasks.squad.features import read_squad
from xlnet_tf.text.packing import pack_texts
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.text.tokenizer import XLNetTokenizer, check_vocabulary

GOOD_ROWS = "text,label\nclass value,1\nlist name,0\nmodule type,1\n"


def read(path):
  report = ReadReport()
  return read_generic(str(path), report), report


# ---- readers: rows without a label never get one ----------------------------------------

def test_a_short_csv_row_is_a_counted_skip_with_its_line(tmp_path):
  path = tmp_path / "train.csv"
  path.write_text("text,text_b,label\nclass value,list,1\nshort row,0\n\nmodule,type,0\n")
  examples, report = read(path)
  assert [(e.text_a, e.label, e.where) for e in examples] == [
      ("class value", "1", f"{path}:2"), ("module", "0", f"{path}:5")]
  assert report.skipped == {"fields not as in the header": [f"{path}:3"]}


def test_a_quote_left_open_is_an_error_naming_the_row_where_it_opens(tmp_path):
  path = tmp_path / "train.csv"
  path.write_text(GOOD_ROWS + '"swallowing,1\n' + "more,0\n" * 31)
  with pytest.raises(UserInputError, match=rf"^{path}:5: a quote opened in this row is never "
                     "closed"):
    read(path)
  text_after_quote = tmp_path / "after.csv"
  text_after_quote.write_text(GOOD_ROWS + '"quoted" then text,1\n')
  with pytest.raises(UserInputError, match=rf"^{text_after_quote}:5: malformed quoting"):
    read(text_after_quote)


def test_a_quoted_field_over_many_lines_that_breaks_a_row_names_the_lines(tmp_path):
  path = tmp_path / "train.csv"
  path.write_text(GOOD_ROWS + '"a,1\nb,0\nc",1,extra\nlast,0\n')
  examples, report = read(path)
  assert [e.text_a for e in examples] == ["class value", "list name", "module type", "last"]
  assert report.skipped == {
      "fields not as in the header; one quoted field runs over lines 5-7": [f"{path}:5"]}


def test_jsonl_records_without_a_label_or_with_an_empty_one_have_none(tmp_path):
  path = tmp_path / "train.jsonl"
  path.write_text('{"text": "a", "label": "pos"}\n{"text": "b"}\n{"text": "c", "label": ""}\n'
                  '{"text": "d", "label": null}\n{"text": "e", "label": " neg "}\n')
  examples, _ = read(path)
  assert [e.label for e in examples] == ["pos", None, None, None, "neg"]
  report = ReadReport()
  kept, values = label_ids(examples, ["neg", "pos"], report, labels_required=True)
  assert [e.text_a for e in kept] == ["a", "e"] and values.tolist() == [1, 0]
  assert report.skipped == {"no label": [f"{path}:2", f"{path}:3", f"{path}:4"]}


def test_an_empty_csv_label_is_no_label_not_a_class(tmp_path, sp_model):
  path = tmp_path / "train.csv"
  path.write_text(GOOD_ROWS + "empty label,\nblank label, \n")
  task = classification.load_task(
      classification.TaskDataOptions("generic", files={"train": str(path)}, max_seq_length=16),
      XLNetTokenizer(sp_model), splits=["train"])
  assert task.labels == ["0", "1"]
  assert task.splits["train"]["label"].tolist() == [1, 0, 1]
  assert task.reports["train"].summary() == (f"3 examples; skipped 2 (no label, e.g. "
                                             f"{path}:5, {path}:6)")


def test_dev_data_without_labels_is_an_error_for_evaluation_and_fine_for_prediction(
    tmp_path, sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  (tmp_path / "train.csv").write_text(GOOD_ROWS)
  unlabeled = tmp_path / "unlabeled.csv"
  unlabeled.write_text("text\nclass value\nlist name\n")
  files = {"train": str(tmp_path / "train.csv"), "dev": str(unlabeled), "test": str(unlabeled)}
  options = classification.TaskDataOptions("generic", files=files, max_seq_length=16)
  with pytest.raises(UserInputError, match=rf"^{unlabeled}: no row has a label; evaluation "):
    classification.load_task(options, tokenizer, splits=["train", "dev"])
  task = classification.load_task(options, tokenizer, splits=["train", "test"])
  assert len(task.splits["test"]["input_ids"]) == 2
  # One dev row short of its label: skipped, not scored as a wrong prediction.
  dev = tmp_path / "dev.tsv"
  dev.write_text("text\tlabel\nclass value\t1\nlist name\n")
  task = classification.load_task(dataclasses.replace(options, files=dict(files, dev=str(dev))),
                                  tokenizer, splits=["train", "dev"])
  assert task.splits["dev"]["label"].tolist() == [1]
  assert task.reports["dev"].skipped == {"fields not as in the header": [f"{dev}:3"]}


def test_glue_rows_with_an_empty_label_are_skipped(tmp_path, sp_model):
  (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood one\t1\nbad one\t0\nno label\t\n")
  task = classification.load_task(
      classification.TaskDataOptions("sst-2", data_dir=str(tmp_path), max_seq_length=16),
      XLNetTokenizer(sp_model), splits=["train"])
  assert task.splits["train"]["label"].tolist() == [1, 0]
  assert task.reports["train"].skipped == {"no label": [f"{tmp_path}/train.tsv:4"]}


def test_race_questions_without_an_answer_are_skipped_outside_the_test_split(tmp_path):
  for split in ("train", "test"):
    for level in ("middle", "high"):
      os.makedirs(tmp_path / split / level)
      (tmp_path / split / level / "1.txt").write_text(
          '{"article": "A text.", "questions": ["Q1?", "Q2?", "Q3?"], "options": '
          '[["a", "b", "c", "d"], ["a", "b", "c", "d"], ["a", "b", "c", "d"]], '
          '"answers": ["B", ""]}')
  report = ReadReport()
  assert [q.answer for q in read_race(str(tmp_path), "train", report)] == [1, 1]
  assert len(report.skipped["no answer (one of A, B, C, D)"]) == 4
  assert [q.answer for q in read_race(str(tmp_path), "test", ReadReport())] == [1, -1, -1] * 2


def test_the_report_says_what_was_truncated_and_what_was_skipped(sp_model):
  report = ReadReport(read=2)
  pack_texts(XLNetTokenizer(sp_model), ["class " * 40, "value"], None, 8, report=report,
             where=["f:2", "f:3"])
  report.skip("no label", "f:4")
  assert report.summary() == ("2 examples; 1 truncated to max_seq_length=8 (the longer text "
                              "cut from its end) (e.g. f:2); skipped 1 (no label, e.g. f:4)")


def test_non_finite_regression_labels_are_counted_skips(tmp_path):
  """A label of nan or inf would make the loss NaN: skipped with its file:line, as a label that
  is no number is."""
  path = tmp_path / "train.csv"
  path.write_text("text,label\na,1.5\nb,nan\nc,inf\nd,-Infinity\ne,x\nf,0.5\n")
  examples, report = read(path)
  kept, values = label_ids(examples, None, report, labels_required=True)
  assert [e.text_a for e in kept] == ["a", "f"] and values.tolist() == [1.5, 0.5]
  assert report.skipped == {"label 'nan' is not a finite number": [f"{path}:3"],
                            "label 'inf' is not a finite number": [f"{path}:4"],
                            "label '-Infinity' is not a finite number": [f"{path}:5"],
                            "label 'x' is not a number": [f"{path}:6"]}


def test_a_field_past_the_csv_modules_limit_is_read_and_truncated_when_tokenized(
    tmp_path, sp_model):
  """A document longer than the csv module's default field limit (131,072 characters) is data:
  read whole (CSV, TSV, GLUE's TSV), then cut to max_seq_length and reported as truncated."""
  document = "class value " * 12000  # 144,000 characters
  tokenizer = XLNetTokenizer(sp_model)
  (tmp_path / "glue").mkdir()
  limit = csv.field_size_limit()
  try:
    for path, text in ((tmp_path / "train.csv", f'text,label\n"{document}",1\nlist name,0\n'),
                       (tmp_path / "train.tsv", f"text\tlabel\n{document}\t1\nlist name\t0\n"),
                       (tmp_path / "glue" / "train.tsv",
                        f"sentence\tlabel\n{document}\t1\nlist name\t0\n")):
      path.write_text(text)
      csv.field_size_limit(131072)  # the default, as in a fresh process
      glue = path.parent.name == "glue"
      options = classification.TaskDataOptions(
          "sst-2" if glue else "generic", data_dir=str(path.parent) if glue else None,
          files={} if glue else {"train": str(path)}, max_seq_length=16)
      task = classification.load_task(options, tokenizer, splits=["train"])
      assert task.splits["train"]["label"].tolist() == [1, 0], path
      assert task.reports["train"].summary().startswith(
          "2 examples; 1 truncated to max_seq_length=16"), path
  finally:
    csv.field_size_limit(limit)


@pytest.mark.parametrize("data, error", [
    ([{"paragraphs": [{"qas": []}]}], "KeyError: 'context'"),
    ([{"paragraphs": [{"context": "abc", "qas": 3}]}], "TypeError: 'int' object is not iterable"),
    ([3], "AttributeError: 'int' object has no attribute 'get'")])
def test_a_squad_file_of_another_layout_names_the_article(tmp_path, data, error):
  path = tmp_path / "train.json"
  path.write_text(json.dumps({"data": [{"paragraphs": []}] + data}))
  with pytest.raises(UserInputError, match=rf"^{path}: data\[1\]: not a SQuAD article "
                     rf"\({re.escape(error)}\); expected "):
    read_squad(str(path), ReadReport())


def test_non_utf8_names_file_and_line(tmp_path):
  path = tmp_path / "train.csv"
  path.write_bytes(b"text,label\nclass value,1\nlist \xff name,0\n")
  with pytest.raises(UserInputError, match=rf"^{path}:3: not valid UTF-8 \(byte 0xff"):
    read(path)


# ---- options, vocabulary, non-finite training -------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("train_steps", 0, "--train_steps=0: must be at least 1"),
    ("batch_size", 0, "--train_batch_size=0: must be at least 1"),
    ("learning_rate", -1e-5, "--learning_rate=-1e-05: must be a positive number"),
    ("learning_rate", 0.0, "--learning_rate=0.0: must be a positive number"),
    ("learning_rate", float("nan"), "--learning_rate=nan: must be a positive number"),
    ("warmup_steps", -1, "--warmup_steps=-1: must be at least 0"),
    ("eval_every", -5, "--eval_every=-5: must be at least 1")])
def test_options_no_run_can_use_are_refused(field, value, message):
  options = dict(train_steps=10, batch_size=4, learning_rate=1e-3)
  with pytest.raises(UserInputError, match=f"^{message}$"):
    FinetuningOptions(**dict(options, **{field: value}))


def test_a_sequence_length_whose_attention_overflows_is_refused():
  config = XLNetConfig.preset("tiny", n_token=50)
  check_sequence_length(config, 4096, 4)
  with pytest.raises(UserInputError, match=r"^--max_seq_length=100000: the attention scores"):
    check_sequence_length(config, 100000, 4)


def test_a_vocabulary_larger_than_n_token_is_refused(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)
  assert check_vocabulary(sp_model, config) == tokenizer.vocab_size
  small = XLNetConfig.preset("tiny", n_token=100)
  with pytest.raises(UserInputError, match=rf"^{sp_model}: {tokenizer.vocab_size} SentencePiece "
                     r"pieces, but the model's n_token is 100 \(cfg.json\)"):
    check_vocabulary(tokenizer, small, "cfg.json")


def test_a_non_finite_loss_stops_the_run_and_keeps_no_weights(tmp_path):
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  features = {"input_ids": rng.integers(5, 50, (8, 6)).astype(np.int32),
              "segment_ids": np.zeros((8, 6), np.int32),
              "input_mask": np.ones((8, 6), np.float32),
              "label": np.zeros(8, np.float32)}
  features["label"][3] = np.nan  # a regression target that is not a number
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", n_token=50)), 1)
  best = tmp_path / "best"
  options = FinetuningOptions(train_steps=6, batch_size=4, learning_rate=1e-3, eval_every=2,
                              jit_compile=False, progress="none")
  with pytest.raises(NonFiniteTrainingError, match=r"^fine-tuning stopped at step 1: the "
                     "training loss is nan; no weights of this run are kept"):
    finetune(model, feature_dataset(features, 4, label_key="label", repeat=True), options,
             evaluate=lambda: {"pearson": 0.0}, metric="pearson", best_dir=str(best),
             loss=keras.losses.MeanSquaredError())
  assert not best.exists()


# ---- export reads head.json ---------------------------------------------------------------

@pytest.fixture(scope="module")
def three_class_dir(tmp_path_factory, sp_model):
  """A 3-class classifier with mean pooling saved as a fine-tuning run saves it, without
  labels.json."""
  directory = str(tmp_path_factory.mktemp("three") / "best")
  config = XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size)
  checkpoints.save_pretrained(XLNetClassifier(XLNetModel(config), 3, "mean"), directory)
  return directory


def test_export_builds_the_head_that_head_json_describes(three_class_dir, sp_model):
  model, labels = load_exportable_model(three_class_dir, "classifier", sp_path=sp_model)
  assert (model.num_classes, model.summary_type, labels) == (3, "mean", None)


@pytest.mark.parametrize("arguments, message", [
    (dict(head="regression"), "num_classes 3 makes a classifier head, not --head=regression"),
    (dict(head="token_classifier"), "the head is XLNetClassifier, not the XLNetTokenClassifier"),
    (dict(num_classes=2), r"num_classes is 3, not 2 as given \(--num_classes\)"),
    (dict(summary_type="last"), r"summary_type is 'mean', not 'last' as given")])
def test_export_refuses_what_contradicts_head_json(three_class_dir, arguments, message):
  with pytest.raises(UserInputError, match=rf"^{three_class_dir}/head.json: {message}"):
    load_exportable_model(three_class_dir, **arguments)


@pytest.mark.parametrize("head_json, config_changes, message", [
    (dict(max_segments=3), dict(mem_len=0), "max_segments is 3, but {dir}/xlnet_config.json has "
     "mem_len 0: the segments are read with memory"),
    (dict(max_segments=0), {}, "max_segments must be an integer >= 1; got 0"),
    (dict(max_segments="3"), {}, "max_segments must be an integer >= 1; got '3'"),
])
def test_export_refuses_long_document_settings_that_cannot_be(tmp_path, head_json,
                                                              config_changes, message):
  directory = str(tmp_path / "best")
  model = XLNetClassifier(XLNetModel(XLNetConfig.preset("tiny", mem_len=8)), 2, max_segments=3)
  checkpoints.save_pretrained(model, directory)
  for name, changes in ((checkpoints.own.HEAD_FILE, head_json),
                        (checkpoints.own.CONFIG_FILE, config_changes)):
    path = os.path.join(directory, name)
    write_json(path, {**read_json(path), **changes})
  with pytest.raises(UserInputError, match=rf"^{directory}/head.json: "
                     + re.escape(message.format(dir=directory))):
    load_exportable_model(directory)


# ---- the CLIs: one line, exit status 1, nothing written ------------------------------------

@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, sp_model):
  root = tmp_path_factory.mktemp("bad_inputs")
  vocabulary = XLNetTokenizer(sp_model).vocab_size
  XLNetConfig.preset("tiny", n_token=vocabulary).to_json_file(str(root / "config.json"))
  XLNetConfig.preset("tiny", n_token=100).to_json_file(str(root / "small.json"))
  (root / "train.csv").write_text(GOOD_ROWS)
  (root / "quote.csv").write_text(GOOD_ROWS + '"swallowing,1\n' + "more,0\n" * 31)
  (root / "latin1.csv").write_bytes(b"text,label\nclass value,1\nlist \xff name,0\n")
  (root / "unlabeled.csv").write_text("text\nclass value\n")
  (root / "unknown_set.csv").write_text("text,label\nclass value,1|0\nlist name,0|7\n")
  corrupt = root / "corrupt"
  corrupt.mkdir()
  (corrupt / "xlnet_config.json").write_text((root / "config.json").read_text())
  (corrupt / "model.weights.h5").write_bytes(os.urandom(2000))
  XLNetConfig.preset("tiny", n_token=vocabulary, n_layer=3).to_json_file(str(root / "deeper.json"))
  # Hugging Face directories of a tiny backbone: with a cased tokenizer, and without one.
  backbone = XLNetModel(XLNetConfig.preset("tiny", n_token=vocabulary))
  for name in ("huggingface", "no_tokenizer"):
    save_huggingface_checkpoint(backbone, str(root / name))
  shutil.copy(sp_model, root / "huggingface" / "spiece.model")
  save_huggingface_checkpoint(XLNetClassifier(backbone, num_classes=2),
                              str(root / "huggingface_classifier"))
  write_json(str(root / "huggingface" / "tokenizer_config.json"),
             {"do_lower_case": False, "keep_accents": False})
  # Directories refused before any weight is read: of no known layout (a BERT model's files),
  # and an own one whose n_token is smaller than the SentencePiece model.
  (root / "bert").mkdir()
  write_json(str(root / "bert" / "bert_config.json"), {"hidden_size": 32})
  (root / "bert" / "vocab.txt").write_text("[PAD]\n[UNK]\n")
  (root / "small_own").mkdir()
  shutil.copy(root / "small.json", root / "small_own" / "xlnet_config.json")
  (root / "small_own" / "model.weights.h5").write_bytes(b"")
  # Configs with values no model can have (NaN and Infinity as Python's json writes them).
  config_text = (root / "config.json").read_text()
  for name, key, value in (("nan", "d_model", "NaN"), ("zero", "n_layer", "0"),
                           ("negative", "d_head", "-8"), ("huge", "d_model", "1000000000000"),
                           ("wide", "d_inner", "2000000000"), ("inf_std", "init_std", "Infinity")):
    written = re.sub(rf'"{key}": [^,\n]+', f'"{key}": {value}', config_text)
    assert written != config_text
    (root / f"{name}.json").write_text(written)
  (root / "zero_heads").mkdir()  # a Hugging Face config.json of n_head 0 (d_head = d_model / 0)
  write_json(str(root / "zero_heads" / "config.json"),
             {**read_json(str(root / "huggingface" / "config.json")), "n_head": 0})
  (root / "zero_heads" / "model.safetensors").write_bytes(b"")
  # JSONL lines that are no JSON object, empty files, a binary file.
  for name, second_line in (("list", "[1, 2]"), ("number", "42"), ("broken", '{"text": "b",')):
    (root / f"{name}.jsonl").write_text('{"text": "a", "label": "1"}\n' + second_line + "\n")
  (root / "empty.csv").write_bytes(b"")
  (root / "header_only.csv").write_text("text,label\n")
  (root / "blank.jsonl").write_text("\n  \n")
  (root / "zeros.csv").write_bytes(bytes(3000))
  # An export base that holds version 1 of the model "xlnet" already.
  (root / "exported" / "xlnet" / "1").mkdir(parents=True)
  return root


CLASSIFIER_CASES = [  # (extra flags, the error line after "error: "), {root} = the files
    (["--train_file={root}/quote.csv"],
     "{root}/quote.csv:5: a quote opened in this row is never closed"),
    (["--train_file={root}/latin1.csv"], "{root}/latin1.csv:3: not valid UTF-8 (byte 0xff"),
    (["--dev_file={root}/unlabeled.csv", "--do_eval"],
     "{root}/unlabeled.csv: no row has a label; evaluation"),
    (["--train_steps=0"], "--train_steps=0: must be at least 1"),  # the others: see above
    (["--num_train_epochs=1"], "--train_steps=2 and --num_train_epochs=1 both set the training "
     "length; give one"),
    (["--num_train_epochs=0"], "--num_train_epochs=0: must be a positive number"),
    (["--max_seq_length=100000"], "--max_seq_length=100000: the attention scores"),
    (["--model_config={root}/small.json"], "{sp}: {pieces} SentencePiece pieces, but the "
     "model's n_token is 100 ({root}/small.json)"),
    (["--model_config=", "--init_checkpoint={root}/corrupt"],
     "{root}/corrupt/model.weights.h5: not a readable HDF5 file"),
    (["--nodo_train"], "nothing to do: pass --do_train, --do_eval and/or --do_predict"),
    (["--freeze_layers=3"], "--freeze_layers must be an integer from 0 to the model's n_layer "
     "(2); got 3"),
    (["--freeze_layers=-1"], "--freeze_layers must be an integer from 0 to the model's n_layer "
     "(2); got -1"),
    (["--multi_label", "--dev_file={root}/unknown_set.csv"],
     "{root}/unknown_set.csv:3: label '7' does not occur in the training file "
     "{root}/train.csv (labels: ['0', '1'])"),
    (["--multi_label", "--regression"], "--multi_label and --regression exclude each other"),
    # --init_checkpoint=DIR gives the config, the format and the tokenizer; the flags that
    # override them may not contradict it ("--flag=" clears the flags every case passes).
    (["--model_config=", "--sp_path=", "--init_checkpoint={root}/huggingface",
      "--init_checkpoint_format=original"], "--init_checkpoint_format=original contradicts "
     "--init_checkpoint={root}/huggingface: it holds huggingface files"),
    (["--model_config=", "--sp_path=", "--init_checkpoint={root}/huggingface", "--uncased"],
     "--uncased contradicts {root}/huggingface/tokenizer_config.json (of "
     "--init_checkpoint={root}/huggingface): do_lower_case is false"),
    (["--model_config={root}/deeper.json", "--sp_path=", "--init_checkpoint={root}/huggingface"],
     "--model_config={root}/deeper.json contradicts --init_checkpoint={root}/huggingface's "
     "architecture: n_layer 3 against 2"),
    (["--model_config=", "--sp_path=", "--init_checkpoint={root}/no_tokenizer"],
     "--sp_path is required: --init_checkpoint={root}/no_tokenizer holds no spiece.model"),
    (["--model_config=", "--init_checkpoint={root}/none"], "{root}/none: no such directory"),
    (["--model_config=", "--init_checkpoint={root}/bert"],
     "{root}/bert: not a pretrained XLNet directory; expected"),
    (["--model_config="], "--model_config is required without an --init_checkpoint directory"),
    (["--label_delimiter=,"], "--label_delimiter needs --multi_label"),
    (["--multi_label", "--label_delimiter="], "--label_delimiter='': must be the separator"),
    (["--max_segments=0"], "--max_segments must be at least 1 (segments of --max_seq_length"),
    (["--max_segments=3"], "--mem_len must be at least 1 with --max_segments=3"),
    (["--mem_len=16"], "--mem_len must be 0 with --max_segments=1"),
    (["--max_segments=2", "--mem_len=100000000"], "--mem_len=100000000: the attention scores"),
    (["--gradient_accumulation_steps=0"],
     "--gradient_accumulation_steps must be at least 1; got 0"),
    (["--gradient_accumulation_steps=3"], "--gradient_accumulation_steps=3 must divide "
     "--train_batch_size=2: each step's batch is split into that many equal micro-batches"),
    (["--strategy=mirrored", "--cpu_replicas=2", "--train_batch_size=3"],
     "--train_batch_size=3 must be divisible by the 2 replicas"),
    (["--strategy=mirrored", "--cpu_replicas=2", "--train_batch_size=4",
      "--gradient_accumulation_steps=4"], "--gradient_accumulation_steps=4 must divide the 2 "
     "rows of --train_batch_size=4 for each of 2 replicas"),
    # Values no model can have, in a config file (xlnet_config.json or Hugging Face's).
    (["--model_config={root}/nan.json"],
     "{root}/nan.json: XLNetConfig.d_model must be a positive integer up to 2^31 - 1; got nan"),
    (["--model_config={root}/zero.json"],
     "{root}/zero.json: XLNetConfig.n_layer must be a positive integer up to 2^31 - 1; got 0"),
    (["--model_config={root}/negative.json"],
     "{root}/negative.json: XLNetConfig.d_head must be a positive integer up to 2^31 - 1; got -8"),
    (["--model_config={root}/huge.json"], "{root}/huge.json: XLNetConfig.d_model must be a "
     "positive integer up to 2^31 - 1; got 1000000000000"),
    (["--model_config={root}/wide.json"], "{root}/wide.json: XLNetConfig.d_inner: each "
     "feed-forward kernel (d_model 32 x d_inner 2000000000 = 6.4e+10 values) exceeds 2^31 - 1 "
     "values, more than one tensor holds; check the sizes"),
    (["--model_config={root}/inf_std.json"], "{root}/inf_std.json: XLNetConfig.init_std must be "
     "a positive finite float; got inf"),
    (["--model_config=", "--init_checkpoint={root}/zero_heads"], "{root}/zero_heads/config.json: "
     "XLNetConfig.n_head must be a positive integer up to 2^31 - 1; got 0"),
    # JSONL lines that are not JSON objects; files without a data row.
    (["--train_file={root}/list.jsonl"], "{root}/list.jsonl:2: a JSON array, not an object (one "
     "JSON object a line is expected"),
    (["--train_file={root}/number.jsonl"], "{root}/number.jsonl:2: a JSON number, not an object"),
    (["--train_file={root}/broken.jsonl"], "{root}/broken.jsonl:2: not valid JSON (Expecting "
     "property name enclosed in double quotes at column 15)"),
    (["--train_file={root}/empty.csv"], "{root}/empty.csv: empty file (a header line naming the "
     "columns is expected)"),
    (["--train_file={root}/header_only.csv"], "{root}/header_only.csv: no rows after the header "
     "line"),
    (["--train_file={root}/blank.jsonl"], "{root}/blank.jsonl: empty file (one JSON object a "
     "line is expected)"),
    # A file of the wrong kind given to a flag.
    (["--model_config={sp}"], "{sp}: not a JSON file: byte 0x"),
    (["--model_config=", "--init_checkpoint={sp}"], "{sp}: a file; expected a directory holding "
     "xlnet_tf's own files"),
    (["--sp_path={root}/corrupt/model.weights.h5"], "{root}/corrupt/model.weights.h5: not a "
     "readable SentencePiece model"),
    (["--train_file={root}/config.json"], "{root}/config.json: a .json file; a generic task "
     "reads CSV (.csv), TSV (.tsv) or JSON lines (.jsonl: one JSON object a line)"),
    (["--train_file={sp}"], "{sp}:"),  # not UTF-8, or a NUL byte: whichever comes first
    (["--train_file={root}/zeros.csv"], "{root}/zeros.csv:1: a NUL byte (column 1): not a text "
     "file; give a UTF-8 text file"),
]


@pytest.mark.parametrize("flags, expected", CLASSIFIER_CASES)
def test_classifier_bad_input_is_one_line(cli_files, sp_model, flags, expected, tmp_path):
  values = dict(root=cli_files, sp=sp_model, pieces=XLNetTokenizer(sp_model).vocab_size)
  output_dir = tmp_path / "out"
  result = run_tool("run/classifier.py", "--task_name=generic", f"--sp_path={sp_model}",
                    f"--model_config={cli_files}/config.json",
                    f"--train_file={cli_files}/train.csv", "--max_seq_length=16",
                    "--train_batch_size=2", "--train_steps=2", "--do_train",
                    f"--output_dir={output_dir}", *[flag.format(**values) for flag in flags])
  assert result.returncode == 1, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: " + expected.format(**values)), lines
  assert not output_dir.exists()


def test_classifier_fine_tunes_from_a_huggingface_directory_alone(cli_files, tmp_path):
  """--init_checkpoint=DIR with no --sp_path, --model_config or --init_checkpoint_format: the
  config, format and tokenizer are the directory's. The data and the output are in folders
  whose names hold spaces and non-ASCII letters, and one text is longer than the csv module's
  default field limit: it is read, and cut at tokenization."""
  data = tmp_path / "données d'entrée ü"
  data.mkdir()
  (data / "train set.csv").write_text(GOOD_ROWS + '"' + "class value " * 12000 + '",0\n')
  output_dir = tmp_path / "sortie 輸出 1"
  result = run_tool("run/classifier.py", f"--init_checkpoint={cli_files}/huggingface",
                    "--task_name=generic", f"--train_file={data}/train set.csv", "--do_train",
                    "--max_seq_length=16", "--train_batch_size=2", "--train_steps=2",
                    f"--output_dir={output_dir}", "--verbose")  # the loader's INFO line
  assert result.returncode == 0, result.stderr[-2000:]
  assert f"Backbone from {cli_files}/huggingface" in result.stderr
  assert (f"generic train: 4 examples; 1 truncated to max_seq_length=16 (the longer text cut "
          f"from its end) (e.g. {data}/train set.csv:5)") in result.stderr + result.stdout
  assert (output_dir / "train_history.json").exists()


# --train_file alone (with --init_checkpoint and --output_dir): the generic task and --do_train,
# --do_eval with --dev_file and --do_predict with --test_file; without --train_steps the steps
# are --num_train_epochs' over the training rows, said in one line (the default length:
# tests/tasks/test_task_runs.py). absl's INFO lines (the loader's summary) show with --verbose
# only.
TRAINING_CASES = {
    # case: (flags, the line saying the steps or None, files the run writes in --output_dir)
    "epochs, dev and test files": (
        ["--num_train_epochs=0.5", "--dev_file={root}/train.csv", "--test_file={root}/train.csv"],
        "Training 1 step: 0.5 epochs of 3 examples at --train_batch_size=2",
        ["train_history.json", "dev_metrics.json", "generic_test_predictions.tsv",
         "run_config.json"]),
    "steps, verbose": (["--train_steps=1", "--verbose"], None,
                       ["train_history.json", "run_config.json"]),
}
_ABSL_INFO_LINE = re.compile(r"^(I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.]+:\d+\]|INFO:)")


@pytest.mark.parametrize("case", sorted(TRAINING_CASES))
def test_classifier_trains_from_a_training_file_alone(cli_files, case, tmp_path):
  flags, steps_line, written = TRAINING_CASES[case]
  output_dir = tmp_path / "out"
  result = run_tool("run/classifier.py", f"--init_checkpoint={cli_files}/huggingface",
                    f"--train_file={cli_files}/train.csv", f"--output_dir={output_dir}",
                    "--max_seq_length=16", "--train_batch_size=2", "--nojit_compile",
                    *[flag.format(root=cli_files) for flag in flags])
  assert result.returncode == 0, result.stderr[-2000:]
  said = [line for line in result.stdout.splitlines() if line.startswith("Training ")]
  assert said == ([steps_line] if steps_line else []), said
  assert sorted(name for name in os.listdir(output_dir) if "." in name) == sorted(written)
  info = [line for line in result.stderr.splitlines() if _ABSL_INFO_LINE.match(line)]
  if "--verbose" in flags:
    assert any(f"Backbone from {cli_files}/huggingface" in line for line in info), info
  else:
    assert not info, info


# The other fine-tuning CLIs share the optimisation flags (xlnet_tf/cli/common_flags.py): the
# accumulation steps are refused before any data file is read.
OTHER_FINETUNING_CLIS = {
    "run/squad.py": ["--train_file={root}/none.json"],
    "run/race.py": ["--data_dir={root}/none"],
    "run/tagger.py": ["--train_file={root}/none.conll"]}


@pytest.mark.parametrize("script", sorted(OTHER_FINETUNING_CLIS))
def test_other_finetuning_clis_refuse_accumulation_steps_not_dividing_the_batch(
    cli_files, sp_model, script, tmp_path):
  output_dir = tmp_path / "out"
  task_flags = [flag.format(root=cli_files) for flag in OTHER_FINETUNING_CLIS[script]]
  result = run_tool(script, f"--sp_path={sp_model}", f"--model_config={cli_files}/config.json",
                    "--max_seq_length=16", "--train_batch_size=8",
                    "--gradient_accumulation_steps=3", "--do_train",
                    f"--output_dir={output_dir}", *task_flags)
  assert result.returncode == 1, result.stderr[-2000:]
  assert result.stderr.splitlines() == [
      "error: --gradient_accumulation_steps=3 must divide --train_batch_size=8: each step's "
      "batch is split into that many equal micro-batches"]
  assert not output_dir.exists()


@pytest.mark.parametrize("script", sorted(OTHER_FINETUNING_CLIS))
def test_other_finetuning_clis_take_steps_or_epochs_not_both(cli_files, sp_model, script,
                                                              tmp_path):
  task_flags = [flag.format(root=cli_files) for flag in OTHER_FINETUNING_CLIS[script]]
  result = run_tool(script, f"--sp_path={sp_model}", f"--model_config={cli_files}/config.json",
                    "--train_steps=4", "--num_train_epochs=2", "--do_train",
                    f"--output_dir={tmp_path}/out", *task_flags)
  assert result.returncode == 1, result.stderr[-2000:]
  assert result.stderr.splitlines() == [
      "error: --train_steps=4 and --num_train_epochs=2 both set the training length; give one"]


EXPORT_CASES = [  # (flags, the error line after "error: "), {root} = the files
    (["--model_dir={root}/small_own", "--sp_path={sp}"], "{sp}: {pieces} SentencePiece pieces, "
     "but the model's n_token is 100 ({root}/small_own/xlnet_config.json)"),
    # --model_dir takes any layout or a hub id, its tokenizer with it (xlnet_tf/cli/
    # pretrained_flags.py); --sp_path and --uncased override it, and may not contradict it.
    (["--model_dir={root}/none"], "{root}/none: no such directory; expected a directory holding"),
    (["--model_dir={root}/bert"], "{root}/bert: not a pretrained XLNet directory; expected"),
    (["--model_dir={root}/huggingface", "--uncased"], "--uncased contradicts "
     "{root}/huggingface/tokenizer_config.json (of --model_dir={root}/huggingface): "
     "do_lower_case is false"),
    (["--model_dir={root}/no_tokenizer"],
     "--sp_path is required: --model_dir={root}/no_tokenizer holds no spiece.model"),
    (["--model_dir={root}/huggingface"],
     "--model_dir={root}/huggingface holds a backbone only, not an XLNetClassifier"),
    (["--model_dir={root}/huggingface_classifier", "--sp_path={sp}", "--head=regression"],
     "--model_dir={root}/huggingface_classifier: 2 classes make a classifier head, not "
     "--head=regression"),
    # A version is never removed in place: refused before the model is read (--overwrite
    # swaps a complete new one in: tests/serving/test_saved_model.py).
    (["--model_dir={root}/huggingface", "--head=backbone", "--export_base={root}/exported"],
     "{root}/exported/xlnet/1: version 1 exists; export under another --version (TF Serving "
     "serves the highest), or pass --overwrite to replace it"),
    (["--model_dir={root}/huggingface", "--head=backbone", "--export_base={root}/exported",
      "--format=onnx"], "{root}/exported/xlnet/1: version 1 exists; export under another "
     "--version"),
    (["--model_dir={root}/huggingface", "--head=backbone", "--version=-1"],
     "--version must be a version number >= 0; got -1"),
    (["--model_dir={root}/huggingface", "--head=backbone", "--format=onnx", "--check"],
     "--check must be used with --format=savedmodel (an ONNX or LiteRT file is checked against "
     "the Keras model as it is written); got --format=onnx"),
    # A file of the wrong kind given to a flag; a config no model can have.
    (["--model_dir={sp}"], "{sp}: a file; expected a directory holding xlnet_tf's own files"),
    (["--model_dir={root}/huggingface", "--head=backbone", "--sp_path={root}/config.json"],
     "{root}/config.json: not a readable SentencePiece model"),
    (["--model_dir={root}/zero_heads", "--head=backbone", "--sp_path={sp}"],
     "{root}/zero_heads/config.json: XLNetConfig.n_head must be a positive integer"),
]


@pytest.mark.parametrize("flags, expected", EXPORT_CASES)
def test_export_cli_bad_input_is_one_line(cli_files, sp_model, flags, expected, tmp_path):
  values = dict(root=cli_files, sp=sp_model, pieces=XLNetTokenizer(sp_model).vocab_size)
  result = run_tool("run/export.py", f"--export_base={tmp_path}/serving",
                    *[flag.format(**values) for flag in flags])
  assert result.returncode == 1, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: " + expected.format(**values)), lines
  assert not (tmp_path / "serving").exists()
