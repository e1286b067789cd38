"""Bad inputs and faults of the data stage, SentencePiece training and the record reader: each
a one-line error naming the file (or a line saying what was done), nothing partial left.

Library-level cases first (fast), then a few runs of the command-line tools in a subprocess.
"""

import glob
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.cli_output import run_tool
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json, write_json
from xlnet_tf.pretraining.data import stage
from xlnet_tf.pretraining.data.examples import ExampleBuilder
from xlnet_tf.pretraining.data.records import RECORD_INFO_FILE, explain_data_loss, load_record_info
from xlnet_tf.pretraining.data.rows import stream_rows
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.pretraining.data.token_files import TokenStream, write_part
from xlnet_tf.text.sentencepiece_training import MAX_SENTENCE_BYTES, train_sentencepiece
from xlnet_tf.text.tokenizer import XLNetTokenizer

SMALL = dict(seq_len=32, reuse_len=16, num_predict=6, bsz_per_host=4, bi_data=True)


def leftovers(directory):
  """What a failed run must not leave: record files, a record info, temporary folders."""
  if not os.path.isdir(directory):
    return []
  return sorted(name for name in os.listdir(directory)
                if name.endswith(".tfrecords") or name == RECORD_INFO_FILE
                or name.startswith((stage.WORK_FOLDER_PREFIX, ".sentencepiece-")))


# ---- the stage is linear in line length --------------------------------------------------

def tokens_read_per_example(tmp_path, length):
  """Builds a few batches of one line of `length` tokens (no sentence boundary anywhere: the
  case that scanned the whole row for one) and counts the tokens the rows read from disk."""
  ids = np.random.default_rng(0).integers(10, 100, length)
  part = write_part(str(tmp_path / f"line-{length}"), ids, np.ones(length, bool), lines=1)
  settings = PretrainingDataConfig(**SMALL)
  builder = ExampleBuilder(settings, np.ones(100, bool), sep_id=4, cls_id=3, rng=None)
  read_tokens = 0
  with TokenStream([part]) as stream:
    def counting_read(begin, end):
      nonlocal read_tokens
      read_tokens += end - begin
      return stream.read(begin, end)
    rows, _ = stream_rows(counting_read, len(stream), settings, boundaries=stream)
    examples = sum(len(batch) for batch in builder.batches(rows, 100, 110, seed=(0,)))
  assert examples == 10 * settings.bsz_per_host
  return read_tokens / examples


def test_finding_a_sentence_boundary_reads_no_more_of_a_longer_line(tmp_path):
  """The nearest boundary of a position comes from the sorted boundary index, not from reading
  the tokens up to it: the work per example does not grow with the line (it grew with the row
  length, which made the stage quadratic: a 1 MB line took 28 s, now 2 s)."""
  short, long = (tokens_read_per_example(tmp_path, n) for n in (20_000, 400_000))
  assert long <= 1.2 * short
  assert long < 2_000, "a window around each position, not the row (100,000 tokens)"


# ---- temporary folders and interrupted runs ----------------------------------------------

@pytest.fixture(scope="module")
def text_file(corpus_files):
  return corpus_files[0]


def test_stale_folders_of_dead_runs_are_removed_with_a_line(text_file, sp_model, tmp_path,
                                                             caplog):
  save_dir = tmp_path / "out"
  dead = save_dir / f"{stage.WORK_FOLDER_PREFIX}999999999@{socket.gethostname()}-abc"
  older_version = save_dir / f"{stage.WORK_FOLDER_PREFIX}x1y2z3"  # named no owner
  for folder in (dead, older_version):
    folder.mkdir(parents=True)
    (folder / "examples-00000").write_bytes(b"partial")
  create_pretraining_data([text_file], sp_model, str(save_dir), PretrainingDataConfig(**SMALL),
                          num_workers=1)
  assert not dead.exists() and not older_version.exists()
  removed = [r.getMessage() for r in caplog.records if "Removed" in r.getMessage()]
  assert len(removed) == 2 and "interrupted run" in removed[0] and str(dead) in " ".join(removed)
  assert leftovers(save_dir) == [RECORD_INFO_FILE, "train-0-00000.tfrecords"]


def test_a_folder_of_a_running_stage_is_refused(text_file, sp_model, tmp_path):
  save_dir = tmp_path / "out"
  live = save_dir / f"{stage.WORK_FOLDER_PREFIX}{os.getpid()}@{socket.gethostname()}-abc"
  live.mkdir(parents=True)
  with pytest.raises(UserInputError, match=f"{live}: another run \\(pid {os.getpid()}\\)"):
    create_pretraining_data([text_file], sp_model, str(save_dir), PretrainingDataConfig(**SMALL))
  assert live.exists() and leftovers(save_dir) == [live.name]


def test_a_failing_stage_leaves_nothing(text_file, sp_model, tmp_path, monkeypatch):
  def fail_after_writing(*args):
    stage_write_examples(*args)
    raise RuntimeError("stopped after the record files were written")
  stage_write_examples = stage._write_examples
  monkeypatch.setattr(stage, "_write_examples", fail_after_writing)
  save_dir = tmp_path / "new" / "out"
  with pytest.raises(RuntimeError, match="stopped"):
    create_pretraining_data([text_file], sp_model, str(save_dir), PretrainingDataConfig(**SMALL),
                            num_workers=1)
  assert not save_dir.exists(), "the directory made for the outputs is removed again"


_SLOW_STAGE = """
import sys, time
from xlnet_tf.pretraining.data import stage
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
build = stage._build_block
def slow_build(job):
  written = build(job)
  print("block written", flush=True)
  time.sleep(60)
  return written
stage._build_block = slow_build
stage.create_pretraining_data([sys.argv[1]], sys.argv[2], sys.argv[3],
                              PretrainingDataConfig(**{SETTINGS}), num_workers=1)
"""


def test_a_killed_stage_leaves_no_output_and_a_rerun_cleans_up(text_file, sp_model, tmp_path,
                                                               caplog):
  """kill -9 while the record files are being written: nothing under the output names; the
  rerun removes the dead run's folder (a line says so) and writes the data."""
  save_dir = tmp_path / "out"
  save_dir.mkdir()
  (save_dir / RECORD_INFO_FILE).write_text("{}")  # an earlier run's outputs stay as they were
  process = subprocess.Popen(
      [sys.executable, "-c", _SLOW_STAGE.replace("{SETTINGS}", repr(SMALL)), text_file,
       sp_model, str(save_dir)], stdout=subprocess.PIPE, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  try:
    assert process.stdout.readline().strip() == "block written"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
  finally:
    process.kill()
  work_folders = [n for n in leftovers(save_dir) if n.startswith(stage.WORK_FOLDER_PREFIX)]
  assert len(work_folders) == 1 and leftovers(save_dir) == sorted([RECORD_INFO_FILE] + work_folders)
  assert (save_dir / RECORD_INFO_FILE).read_text() == "{}"
  create_pretraining_data([text_file], sp_model, str(save_dir), PretrainingDataConfig(**SMALL),
                          num_workers=1)
  assert any(f"Removed {save_dir / work_folders[0]}" in r.getMessage() for r in caplog.records)
  assert leftovers(save_dir) == [RECORD_INFO_FILE, "train-0-00000.tfrecords"]
  load_record_info(str(save_dir))


# ---- record info against the files -------------------------------------------------------

def record_ends(path):
  """Byte offsets where each TFRecord of the file ends."""
  ends, offset, size = [], 0, os.path.getsize(path)
  with open(path, "rb") as handle:
    while offset < size:
      handle.seek(offset)
      (length,) = struct.unpack("<Q", handle.read(8))
      offset += 8 + 4 + length + 4
      ends.append(offset)
  return ends


def cut_at_a_record_boundary(path):
  ends = record_ends(path)
  with open(path, "r+b") as handle:
    handle.truncate(ends[len(ends) // 2 - 1])


def cut_inside_a_record(path):
  with open(path, "r+b") as handle:
    handle.truncate(record_ends(path)[2] - 7)


def edit_info(**changes):
  def edit(directory):
    path = os.path.join(directory, RECORD_INFO_FILE)
    info = read_json(path)
    for key, value in changes.items():
      section, _, field = key.partition(".")
      if field:
        info[section][field] = value
      elif value is None:
        del info[section]
      else:
        info[section] = value
    write_json(path, info)
  return edit


def first_file(directory):
  return os.path.join(directory, read_json(os.path.join(directory, RECORD_INFO_FILE))
                      ["files"][0]["name"])


# (case, how to break a copy of the data, the file the error names, what else it says)
RECORD_CASES = [
    ("file cut at a record boundary", lambda d: cut_at_a_record_boundary(first_file(d)),
     "first", "bytes, but record_info.json says"),
    ("file cut inside a record", lambda d: cut_inside_a_record(first_file(d)), "first",
     "cut short or replaced"),
    ("seq_len that disagrees with the records", edit_info(**{"settings.seq_len": 64}), "first",
     "the first record's input_ids holds 64 bytes, not the 128"),
    ("ids dtype that disagrees", edit_info(**{"tokenizer.ids_dtype": "int32"}), "first",
     "holds 64 bytes, not the 128"),
    ("malformed JSON", lambda d: open(os.path.join(d, RECORD_INFO_FILE), "a").write("}"),
     "info", "not a valid record info JSON file"),
    ("no files field", edit_info(files=None), "info", "field 'files' is missing"),
    ("num_batch not the files' sum", edit_info(num_batch=10 ** 6), "info",
     "not the sum of the files' num_batch"),
    ("settings that cannot be", edit_info(**{"settings.reuse_len": 40}), "info",
     "settings: PretrainingDataConfig.reuse_len must be in"),
    ("max_word_pieces below 0", edit_info(**{"settings.max_word_pieces": -1}), "info",
     "settings: PretrainingDataConfig.max_word_pieces must be an integer >= 0 (0: no limit); "
     "got -1"),
    ("data file missing", lambda d: os.remove(first_file(d)), "first",
     "listed in record_info.json but missing"),
    ("a file named outside the directory", lambda d: rename_first_file(d, "../elsewhere.tfrecord"),
     "info", "files: names '../elsewhere.tfrecord', a path outside"),
    ("a file named by an absolute path", lambda d: rename_first_file(d, "/etc/passwd"),
     "info", "files: names '/etc/passwd', a path outside"),
]


def rename_first_file(directory, name):
  path = os.path.join(directory, RECORD_INFO_FILE)
  info = read_json(path)
  info["files"][0]["name"] = name
  write_json(path, info)


@pytest.fixture
def data_copy(small_data, tmp_path):
  directory = str(tmp_path / "data")
  shutil.copytree(small_data["bi"], directory)
  return directory


def named_file(directory, which):
  return first_file(directory) if which == "first" else os.path.join(directory, RECORD_INFO_FILE)


@pytest.mark.parametrize("case, breakage, which, message", RECORD_CASES,
                         ids=[case[0] for case in RECORD_CASES])
def test_record_info_is_checked_against_the_files(data_copy, case, breakage, which, message):
  named = named_file(data_copy, which)
  load_record_info(data_copy)  # intact
  breakage(data_copy)
  with pytest.raises((UserInputError, FileNotFoundError)) as raised:
    load_record_info(data_copy)
  assert str(raised.value).startswith(f"{named}: ") and message in str(raised.value)
  assert "\n" not in str(raised.value)


def test_a_corrupt_record_is_named_by_file(data_copy):
  """A flipped byte fails the record's checksum while training; TensorFlow's message names no
  file, explain_data_loss finds it."""
  path = os.path.join(data_copy, read_json(os.path.join(data_copy, RECORD_INFO_FILE))
                      ["files"][1]["name"])
  ends = record_ends(path)
  with open(path, "r+b") as handle:
    handle.seek(ends[3] + 40)
    byte = handle.read(1)
    handle.seek(-1, 1)
    handle.write(bytes([byte[0] ^ 0xFF]))
  load_record_info(data_copy)  # the size is right: found only when read
  with pytest.raises(tf.errors.DataLossError) as raised:
    for _ in tf.data.TFRecordDataset([first_file(data_copy), path]):
      pass
  error = explain_data_loss(data_copy, raised.value)
  assert str(error).startswith(f"{path}: a corrupt record (corrupted record at ")
  assert "{{" not in str(error) and "[Op:" not in str(error)


# ---- SentencePiece training --------------------------------------------------------------

def test_one_very_long_line_trains(corpus_files, tmp_path):
  """SentencePiece drops lines over MAX_SENTENCE_BYTES (and failed when that was all of them):
  long lines are cut at spaces first."""
  text = " ".join(open(corpus_files[0], encoding="utf-8").read().split())[:200_000]
  assert len(text) > 20 * MAX_SENTENCE_BYTES
  (tmp_path / "one_line.txt").write_text(text + "\n", encoding="utf-8")
  path = train_sentencepiece([str(tmp_path / "one_line.txt")], str(tmp_path / "sp" / "spiece"),
                             vocab_size=300)
  assert XLNetTokenizer(path).vocab_size == 300
  assert sorted(os.listdir(tmp_path / "sp")) == ["spiece.model", "spiece.vocab"]


def test_fewer_pieces_than_asked_are_reported(corpus_files, tmp_path):
  lines = []
  path = train_sentencepiece(corpus_files[:1], str(tmp_path / "spiece"), vocab_size=32000,
                             report=lines.append)
  pieces = XLNetTokenizer(path).vocab_size
  assert pieces < 32000
  assert lines == [f"{path}: {pieces:,} pieces, fewer than the 32,000 asked (vocab_size): the "
                   "text supports no more; train on more text for a larger vocabulary"]


def test_lines_not_utf8_are_skipped_and_counted(corpus_files, tmp_path):
  source = tmp_path / "mixed.txt"
  source.write_bytes(open(corpus_files[0], "rb").read() + b"caf\xe9 latin-1\n")
  lines = []
  train_sentencepiece([str(source)], str(tmp_path / "spiece"), vocab_size=500,
                      report=lines.append)
  number = source.read_bytes().count(b"\n")
  assert lines == [f"Skipped 1 lines that are not valid UTF-8, e.g. {source}:{number}"]


# ---- the command-line tools --------------------------------------------------------------

def one_error_line(result):
  assert result.returncode == 1, result.stderr[-2000:]
  errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
  return errors[0]


CLI_RECORD_CASES = [case for case in RECORD_CASES if case[0] in (
    "file cut at a record boundary", "seq_len that disagrees with the records", "malformed JSON")]


@pytest.mark.parametrize("case, breakage, which, message", CLI_RECORD_CASES,
                         ids=[case[0] for case in CLI_RECORD_CASES])
def test_pretrain_cli_refuses_broken_data(data_copy, tmp_path, case, breakage, which, message):
  breakage(data_copy)
  model_dir = tmp_path / "model"
  line = one_error_line(run_tool("run/pretrain.py", f"--train_data={data_copy}",
                                 f"--model_dir={model_dir}", "--train_steps=2"))
  assert line.startswith(f"error: {named_file(data_copy, which)}: ") and message in line
  assert not model_dir.exists()


def test_pretrain_cli_names_the_file_of_a_corrupt_record(data_copy, tmp_path):
  """A checksum failure is found only when the record is read, mid-training: the one line
  still names the file (the loop asks explain_data_loss), and no checkpoint is written."""
  path = first_file(data_copy)
  with open(path, "r+b") as handle:
    handle.seek(40)  # inside the first record's data
    byte = handle.read(1)
    handle.seek(-1, 1)
    handle.write(bytes([byte[0] ^ 0xFF]))
  model_dir = tmp_path / "model"
  line = one_error_line(run_tool("run/pretrain.py", f"--train_data={data_copy}",
                                 f"--model_dir={model_dir}", "--train_steps=2"))
  assert line.startswith(f"error: {path}: a corrupt record ("), line
  assert not glob.glob(str(model_dir / "ckpt-*"))


def _binary_file(tmp_path):
  path = tmp_path / "archive.gz"
  path.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 20)
  return path, f"error: {path}:1: a NUL byte: not a text file"


def _too_few_pieces_for_the_characters(tmp_path):
  path = tmp_path / "text.txt"
  path.write_text("".join(chr(0x4E00 + i) for i in range(400)) + "\n", encoding="utf-8")
  return path, f"error: SentencePiece cannot train on ['{path}'] with vocab_size=100: Vocabulary"


def _empty_file(tmp_path):
  path = tmp_path / "empty.txt"
  path.write_bytes(b"")
  return path, f"error: train_sentencepiece: the input files ['{path}'] hold no text"


@pytest.mark.parametrize("make_input", [_binary_file, _too_few_pieces_for_the_characters,
                                        _empty_file])
def test_train_sentencepiece_cli_bad_input(tmp_path, make_input):
  source, expected = make_input(tmp_path)
  line = one_error_line(run_tool("data/train_sentencepiece.py", f"--input_glob={source}",
                                 f"--model_prefix={tmp_path / 'sp' / 'spiece'}",
                                 "--vocab_size=100"))
  assert line.startswith(expected)
  assert not (tmp_path / "sp").exists()


def test_create_pretraining_data_cli_refuses_a_running_stage_folder(text_file, sp_model,
                                                                    tmp_path):
  sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  try:
    live = tmp_path / "out" / f"{stage.WORK_FOLDER_PREFIX}{sleeper.pid}@{socket.gethostname()}-q"
    live.mkdir(parents=True)
    line = one_error_line(run_tool("data/create_pretraining_data.py", f"--input_glob={text_file}",
                                   f"--sp_path={sp_model}", f"--save_dir={tmp_path / 'out'}",
                                   "--seq_len=32", "--reuse_len=16", "--num_predict=6",
                                   "--bsz_per_host=4"))
  finally:
    sleeper.kill()
    sleeper.wait()
  assert line == (f"error: {live}: another run (pid {sleeper.pid}) is writing into "
                  f"{tmp_path / 'out'}; wait for it to end, or write elsewhere")
  assert leftovers(tmp_path / "out") == [live.name], "the live run's folder is not touched"


def test_create_pretraining_data_cli_refuses_bad_settings_before_any_work(text_file, tmp_path):
  """clm data need reuse_len 0 (its default): a reuse_len given is refused before a
  SentencePiece model or a folder is made."""
  line = one_error_line(run_tool("data/create_pretraining_data.py", f"--input_glob={text_file}",
                                 f"--save_dir={tmp_path / 'out'}", "--objective=clm",
                                 "--seq_len=32", "--reuse_len=16", "--bsz_per_host=4",
                                 "--vocab_size=100"))
  assert line == ("error: PretrainingDataConfig.reuse_len must be 0 for objective clm (it reads "
                  "consecutive segments: the whole segment becomes memory); got 16")
  assert not (tmp_path / "out").exists()


# (flags, the line they give; {tmp}: the test's folder, holding an empty empty.txt; {sp}: a
# SentencePiece model): refused before a SentencePiece model or a folder is made.
STAGE_FLAG_CASES = [
    ("--max_word_pieces=-1", "error: PretrainingDataConfig.max_word_pieces must be an integer >= 0 "
     "(0: no limit); got -1"),
    ("--max_word_pieces=-3", "error: PretrainingDataConfig.max_word_pieces must be an integer >= 0 "
     "(0: no limit); got -3"),
    # An empty corpus: no SentencePiece model trained on it, or no example made with one given.
    ("--input_glob={tmp}/empty.txt", "error: train_sentencepiece: the input files "
     "['{tmp}/empty.txt'] hold no text"),
    ("--input_glob={tmp}/empty.txt --sp_path={sp}", "error: {tmp}/empty.txt: no example could be "
     "written (empty file: 1); 1 files, 0 tokens; bsz_per_host=4 rows of seq_len=32 need more "
     "text"),
    # A file of the wrong kind as the SentencePiece model.
    ("--sp_path={tmp}/empty.txt", "error: {tmp}/empty.txt: not a readable SentencePiece model"),
]


@pytest.mark.parametrize("flag, expected", STAGE_FLAG_CASES, ids=[c[0] for c in STAGE_FLAG_CASES])
def test_create_pretraining_data_cli_bad_flags(text_file, sp_model, tmp_path, flag, expected):
  (tmp_path / "empty.txt").write_bytes(b"")
  flags = flag.format(tmp=tmp_path, sp=sp_model).split(" ")
  line = one_error_line(run_tool("data/create_pretraining_data.py", f"--input_glob={text_file}",
                                 f"--save_dir={tmp_path / 'out'}", "--seq_len=32",
                                 "--reuse_len=16", "--num_predict=6", "--bsz_per_host=4",
                                 "--vocab_size=100", *flags))
  assert line.startswith(expected.format(tmp=tmp_path))
  assert not (tmp_path / "out").exists()
