"""The tools meeting a fault of the disk they write to: a full disk (a tmpfs filled up to a few
kilobytes), a read-only mount, a path through a regular file (ENOTDIR). Each ends with exit
status 1 and one line, `error: <the output, or a path under it>: ...` saying the fault in
words, without a traceback, and leaves nothing on that file system but what was there before:
no model directory without its weights, no work folder of a write that did not finish.

The inputs live in the test's folders on the normal disk; only the output goes to the faulty
place, so that the write meets the fault, not a read. (No case of a directory without write
permission: the suite runs as root, whom permissions do not stop; the read-only mount stands
for it.) Mounting needs root; elsewhere tests/mounts.py skips, saying why.
"""

import contextlib
import dataclasses
import os
import re
from typing import Dict, Tuple

import pytest

from cli_output import run_tool
from mounts import fill, small_tmpfs
from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.checkpoints.labels import save_labels
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.text.tokenizer import XLNetTokenizer

FULL_DISK, READ_ONLY, THROUGH_A_FILE = "full disk", "read-only mount", "path through a file"

# How the one line says each fault: errors.file_system_fault's words, or, inside a failed
# checkpoint's line (training/resume.py), the system's own ("No space left on device").
FAULT_WORDS = {
    FULL_DISK: re.compile(r"no space left on (the )?device", re.IGNORECASE),
    READ_ONLY: re.compile(r"read-only file system", re.IGNORECASE),
    THROUGH_A_FILE: re.compile(r"a file stands where a directory is needed"),
}

# A full disk: a tmpfs far smaller than the inputs (a model's weights alone are ~300 KB),
# filled so that a tool's first small files may fit and its model or data do not.
DISK_KB = 1024
READ_ONLY_KB = 64
BLOCKING_FILE_TEXT = "a regular file where the output's parent directory should be\n"
# TensorBoard's event files: the scalars of the steps a run did before the disk filled, a
# record of it rather than a partial output (a rerun appends a new file beside them).
EVENT_FILE = re.compile(r"(^|/)train/events\.out\.tfevents\.[^/]+$")

@dataclasses.dataclass(frozen=True)
class Case:
  """A tool, its arguments and the fault its output meets.

  `arguments` are format strings: {out} is the output's path in the faulty place, {inputs}
  the module's input folder, {sp} a SentencePiece model, {records} tiny pretraining records.
  `free_bytes`: what a full disk leaves free."""
  tool: str
  fault: str
  arguments: Tuple[str, ...]
  free_bytes: int = 16 * 1024


CLASSIFIER = ("--task_name=generic", "--sp_path={sp}", "--model_config={inputs}/config.json",
              "--train_file={inputs}/train.csv", "--max_seq_length=16", "--train_batch_size=2",
              "--train_steps=1", "--do_train", "--nojit_compile", "--output_dir={out}")
EXPORT = ("--model_dir={inputs}/classifier", "--sp_path={sp}", "--max_seq_length=16",
          "--export_base={out}")
PRETRAIN = ("--train_data={records}", "--model_size=tiny", "--train_steps=2", "--nojit_compile")
STAGE = ("--input_glob={inputs}/text.txt", "--sp_path={sp}", "--save_dir={out}", "--seq_len=32",
         "--reuse_len=16", "--num_predict=6", "--bsz_per_host=4", "--num_workers=1")
SENTENCEPIECE = ("--input_glob={inputs}/text.txt", "--model_prefix={out}/spiece",
                 "--vocab_size=200")

CASES: Dict[str, Case] = {
    # best/ (~300 KB of weights) after one step: its TensorBoard events fit in what is left.
    "classifier's best/ on a full disk": Case("run/classifier.py", FULL_DISK, CLASSIFIER),
    # The SavedModel's variables: TensorFlow's ResourceExhaustedError.
    "export on a full disk": Case("run/export.py", FULL_DISK, EXPORT),
    "export onto a read-only mount": Case("run/export.py", READ_ONLY, EXPORT),
    "convert_checkpoint onto a read-only mount": Case(
        "run/convert_checkpoint.py", READ_ONLY,
        ("--input={inputs}/backbone", "--input_format=own", "--output={out}",
         "--output_format=huggingface")),
    "convert_checkpoint into a file's path": Case(
        "run/convert_checkpoint.py", THROUGH_A_FILE,
        ("--input={inputs}/backbone", "--input_format=own", "--output={out}")),
    "pretrain's --output_dir on a read-only mount": Case(
        "run/pretrain.py", READ_ONLY, (*PRETRAIN, "--output_dir={out}")),
    "pretrain's --model_dir through a file": Case(
        "run/pretrain.py", THROUGH_A_FILE, (*PRETRAIN, "--model_dir={out}")),
    # The first checkpoint (its memory file first): one line naming the directory and the
    # file, and that no checkpoint is complete.
    "pretrain's checkpoint on a full disk": Case(
        "run/pretrain.py", FULL_DISK, (*PRETRAIN, "--model_dir={out}", "--save_steps=1")),
    "create_pretraining_data through a file": Case(
        "data/create_pretraining_data.py", THROUGH_A_FILE, STAGE),
    # The token parts (~200 KB) fit; the records (TensorFlow's writer: ~1 MB) do not.
    "create_pretraining_data's records on a full disk": Case(
        "data/create_pretraining_data.py", FULL_DISK, STAGE, free_bytes=400 * 1024),
    # The training text (~190 KB) does not fit.
    "train_sentencepiece's text on a full disk": Case(
        "data/train_sentencepiece.py", FULL_DISK, SENTENCEPIECE),
    # The text fits, the model (~250 KB, most of it the normalization table) does not:
    # SentencePiece's own writer used to cut it short unnoticed.
    "train_sentencepiece's model on a full disk": Case(
        "data/train_sentencepiece.py", FULL_DISK, SENTENCEPIECE, free_bytes=300 * 1024),
    "train_sentencepiece onto a read-only mount": Case(
        "data/train_sentencepiece.py", READ_ONLY, SENTENCEPIECE),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, sp_model):
  """On the normal disk: a tiny config, a training csv, own-format backbone and classifier
  directories, and text.txt (~190 KB of the Python documentation)."""
  root = tmp_path_factory.mktemp("write_fault_inputs")
  config = XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size)
  config.to_json_file(str(root / "config.json"))
  (root / "train.csv").write_text("text,label\nclass value,1\nlist name,0\nmodule type,1\n")
  backbone = XLNetModel(config)
  checkpoints.save_pretrained(backbone, str(root / "backbone"))
  checkpoints.save_pretrained(XLNetClassifier(backbone, num_classes=2), str(root / "classifier"))
  save_labels(str(root / "classifier"), ["no", "yes"])
  text_file, = corpus.write_corpus_files(corpus.python_docs_documents()[:40],
                                         str(root / "text"), num_files=1)
  os.rename(text_file, root / "text.txt")
  return root


def leftovers(top: str, before) -> list:
  """The paths under `top` (relative) that were not there `before`, but TensorBoard's event
  files (and the folders holding them); an empty folder is listed too."""
  left = []
  for directory, folders, names in os.walk(top):
    for name in names:
      path = os.path.relpath(os.path.join(directory, name), top)
      if path not in before and not EVENT_FILE.search(path):
        left.append(path)
    if directory != top and not folders and not names:
      left.append(os.path.relpath(directory, top) + "/")
  return sorted(left)


@contextlib.contextmanager
def faulty_place(fault: str, folder, free_bytes: int):
  """The directory to put the output in, where writes meet `fault`; on leaving, asserts that
  the tool left nothing there."""
  if fault == THROUGH_A_FILE:
    blocking_file = folder / "blocking_file"
    blocking_file.write_text(BLOCKING_FILE_TEXT)
    yield str(blocking_file)
    assert os.listdir(folder) == ["blocking_file"]
    assert blocking_file.read_text() == BLOCKING_FILE_TEXT
    return
  size_kb = DISK_KB if fault == FULL_DISK else READ_ONLY_KB
  with small_tmpfs(folder / "mount", size_kb, read_only=fault == READ_ONLY) as mount:
    if fault == FULL_DISK:
      fill(mount, leave_bytes=free_bytes)
    before = set(os.listdir(mount))  # the filler
    yield mount
    assert leftovers(mount, before) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_write_fault_ends_the_tool_in_one_line_naming_the_path(name, inputs, sp_model,
                                                                 small_data, tmp_path):
  case = CASES[name]
  with faulty_place(case.fault, tmp_path, case.free_bytes) as parent:
    output = os.path.join(parent, "output")
    arguments = [argument.format(out=output, inputs=inputs, sp=sp_model,
                                 records=small_data["bi"]) for argument in case.arguments]
    result = run_tool(case.tool, *arguments)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    # Nothing filtered: the tools' progress goes to stdout, TensorFlow's logs are silenced.
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-3000:]
    line = lines[0]
    assert re.match(rf"error: {re.escape(output)}(/[^:]+)?: ", line), line
    assert FAULT_WORDS[case.fault].search(line), line
