"""Bad input to fine-tuning and export: a counted skip with file:line, or one `error: ` line
naming the file, line or flag, exit status 1 and nothing left behind; never a made-up label,
a NaN or a default. The model flags of every other tool: tests/cli/test_model_flags.py."""

import dataclasses
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
  return root


CLASSIFIER_CASES = [  # (extra flags, the error line after "error: "), {root} = the files
    (["--train_file={root}/quote.csv"],
     "{root}/quote.csv:5: a quote opened in this row is never closed"),
    (["--train_file={root}/latin1.csv"], "{root}/latin1.csv:3: not valid UTF-8 (byte 0xff"),
    (["--dev_file={root}/unlabeled.csv", "--do_eval"],
     "{root}/unlabeled.csv: no row has a label; evaluation"),
    (["--train_steps=0"], "--train_steps=0: must be at least 1"),  # the others: see above
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
  config, format and tokenizer are the directory's."""
  output_dir = tmp_path / "out"
  result = run_tool("run/classifier.py", f"--init_checkpoint={cli_files}/huggingface",
                    "--task_name=generic", f"--train_file={cli_files}/train.csv", "--do_train",
                    "--max_seq_length=16", "--train_batch_size=2", "--train_steps=2",
                    f"--output_dir={output_dir}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert f"Backbone from {cli_files}/huggingface" in result.stderr
  assert (output_dir / "train_history.json").exists()


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
