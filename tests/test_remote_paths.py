"""Every data, model, output, export and checkpoint path through tf.io.gfile (utils.files):
TensorFlow's in-memory ram:// file system stands for gs:// here. Pretraining, fine-tuning and
export run in one process (ram:// lives in a process) with every path remote, and leave
nothing on local disk; save_pretrained and from_pretrained round-trip a remote directory; the
conversion between checkpoint formats reads and writes remote directories (a TF1 prefix too);
the safetensors and PyTorch readers read remote files, checking them as local ones."""

import json
import os
import re
import tempfile
import uuid

import keras
import numpy as np
import pytest

from checkpoint_files import convert_checkpoint, write_pytorch_bin
from forked_tools import run_forked
from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetClassifier, XLNetModel, XLNetPreprocessor, XLNetTokenizer
from xlnet_tf.checkpoints.pytorch_bin_io import read_pytorch_bin
from xlnet_tf.checkpoints.safetensors_io import (read_safetensors, stated_value_count,
                                                 write_safetensors)
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

RUNNER = os.path.join(os.path.dirname(__file__), "remote_paths_run.py")
ROOT = "ram://remote-run"

# What each tool leaves under ROOT (regular expressions of the paths, relative to it).
EXPECTED = {
    "pretraining data": [r"pretrain/data/spiece\.model", r"pretrain/data/spiece\.vocab",
                         r"pretrain/data/corpus/train-000\.txt",
                         r"pretrain/data/train/record_info\.json",
                         r"pretrain/data/train/train-0-00000\.tfrecords",
                         r"pretrain/data/valid/record_info\.json",
                         r"pretrain/data/valid/valid-0-00000\.tfrecords"],
    "pretraining model_dir": [r"pretrain/model/checkpoint", r"pretrain/model/ckpt-2\.index",
                              r"pretrain/model/ckpt-2\.data-00000-of-00001",
                              r"pretrain/model/mems-2-worker0\.npz",
                              r"pretrain/model/checkpoint_model\.json",
                              r"pretrain/model/run_summary\.json",
                              r"pretrain/model/train/events\.out\.tfevents\..*",
                              r"pretrain/model/pretrained/xlnet_config\.json",
                              r"pretrain/model/pretrained/model\.weights\.h5",
                              r"pretrain/model/lm/head\.json"],
    "fine-tuning output_dir": [r"finetune/best/model\.weights\.h5", r"finetune/best/head\.json",
                               r"finetune/best/labels\.json", r"finetune/best/xlnet_config\.json",
                               r"finetune/train_history\.json",
                               r"finetune/generic_test_predictions\.tsv",
                               r"finetune/train/events\.out\.tfevents\..*"],
    "SavedModel": [r"serving/tiny/1/saved_model\.pb", r"serving/tiny/1/variables/variables\.index",
                   r"serving/tiny/1/assets/spiece\.model", r"serving/tiny/1/assets/labels\.json",
                   r"serving/tiny/1/assets\.extra/tf_serving_warmup_requests"],
}
# Work folders and locks that must not be left (or made) in the remote tree.
NOT_EXPECTED = re.compile(r"\.stage-|\.sentencepiece-|\.run\.lock|\.tmp")


@pytest.mark.slow
def test_pretraining_finetuning_and_export_write_remote_paths_only(tmp_path):
  """xlnet-pretrain --input_glob=ram://... --output_dir=ram://..., xlnet-classifier from its
  ram:// backbone with ram:// data and --output_dir, xlnet-export to a ram:// base: the files
  are all there, and the working directory and the temporary directory stay empty."""
  working, temporary = tmp_path / "cwd", tmp_path / "tmp"
  working.mkdir()
  temporary.mkdir()
  result = run_forked([RUNNER, ROOT, str(temporary)], cwd=str(working), timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  tree = json.loads(next(line for line in result.stdout.splitlines()
                         if line.startswith("TREE "))[len("TREE "):])
  relative = [path[len(ROOT) + 1:] for path in tree]
  for what, patterns in EXPECTED.items():
    missing = [pattern for pattern in patterns
               if not any(re.fullmatch(pattern, path) for path in relative)]
    assert not missing, f"{what}: nothing matches {missing} in {sorted(relative)}"
  assert not [path for path in relative if NOT_EXPECTED.search(path)]
  assert all(size > 0 for size in tree.values())
  for directory in ("pretrain/model", "finetune/best"):  # one line each: no lock there
    assert result.stderr.count(f"{ROOT}/{directory}: a remote directory takes no run lock") == 1
  assert "Wrote 4 predictions to " + ROOT in result.stdout
  assert os.listdir(working) == []  # no `ram:` folder, nothing else
  assert not os.path.exists(os.path.join(os.path.dirname(RUNNER), "..", "ram:"))
  # TensorFlow's autograph leaves its generated sources (its own, not the run's files).
  assert [name for name in os.listdir(temporary)
          if not name.startswith("__autograph_generated_file")] == []


@pytest.fixture(scope="module")
def remote_tokenizer(tmp_path_factory):
  """A SentencePiece model trained straight into ram:// (through a local temporary folder)."""
  folder = tmp_path_factory.mktemp("remote_spiece")
  corpus = folder / "corpus.txt"
  corpus.write_text("the cat sat on the mat.\nthe dog sat on the log.\n" * 50)
  prefix = f"ram://tokenizer-{uuid.uuid4().hex}/spiece"
  path = train_sentencepiece([str(corpus)], prefix, vocab_size=30)
  assert path == prefix + ".model" and files.isfile(path)
  assert files.listdir(os.path.dirname(prefix)) == ["spiece.model", "spiece.vocab"]
  os.remove(corpus)
  assert os.listdir(folder) == []
  return XLNetTokenizer(path, lower=True)


def assert_same(outputs, expected):
  for ours, theirs in zip(keras.tree.flatten(outputs), keras.tree.flatten(expected), strict=True):
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_save_pretrained_and_from_pretrained_round_trip_remotely(remote_tokenizer, tmp_path,
                                                                 monkeypatch):
  """A classifier with labels, its tokenizer and preprocessor, saved into ram:// and into a
  local directory: the same files, the same bytes (but the weights file's), and loaded back
  from ram:// the same outputs, labels and tokens; its backbone too."""
  monkeypatch.chdir(tmp_path)
  model = XLNetClassifier(XLNetModel(tiny_config()), num_classes=3)
  randomize_weights(model, 3)
  model.labels = ["negative", "neutral", "positive"]
  model.preprocessor = XLNetPreprocessor(remote_tokenizer, sequence_length=8)
  remote = model.save_pretrained(f"ram://pretrained-{uuid.uuid4().hex}/classifier")
  local = model.save_pretrained(str(tmp_path / "local"))
  names = sorted(os.listdir(local))
  assert sorted(files.listdir(remote)) == names and "spiece.model" in names
  for name in set(names) - {"model.weights.h5"}:
    assert files.read_bytes(f"{remote}/{name}") == files.read_bytes(f"{local}/{name}"), name
  batch = padded_pair_batch(np.random.default_rng(5), 3, 8, 30, pad_lengths=[0, 2, 1])
  reloaded = XLNetClassifier.from_pretrained(remote)
  assert_same(reloaded(batch), model(batch))
  assert reloaded.labels == model.labels
  assert reloaded.tokenizer.encode("The Cat sat.") == remote_tokenizer.encode("The Cat sat.")
  assert_same(reloaded(["the cat", "a dog"]), model(["the cat", "a dog"]))  # its preprocessor
  backbone = XLNetModel.from_pretrained(remote)  # the backbone part of a head's weights file
  assert_same(backbone(batch), model.backbone(batch))
  assert XLNetTokenizer.from_pretrained(remote).lower
  assert sorted(os.listdir(tmp_path)) == ["local"]  # nothing of the remote directories here


def test_conversion_reads_and_writes_remote_directories(tmp_path, monkeypatch):
  """A classifier in ram:// converted (checkpoints.conversion, as run/convert_checkpoint.py
  calls it) to a ram:// Hugging Face directory, that to a ram:// TF1 checkpoint, its prefix back
  to the own format: each loads with the model's outputs (the classifier's, its labels; the
  backbone's, which the TF1 file holds), and nothing is left on local disk (the work folders
  are local temporary ones, removed)."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "tmp").mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
  root = f"ram://conversion-{uuid.uuid4().hex}"
  model = XLNetClassifier(XLNetModel(tiny_config()), num_classes=3)
  randomize_weights(model, 4)
  model.labels = ["negative", "neutral", "positive"]
  batch = padded_pair_batch(np.random.default_rng(6), 3, 8, 50, pad_lengths=[0, 2, 1])
  own = model.save_pretrained(f"{root}/own")
  assert "max |diff| = 0.0" in convert_checkpoint(own, "own", f"{root}/hf", "huggingface")
  assert sorted(files.listdir(f"{root}/hf")) == ["config.json", "model.safetensors"]
  from_huggingface = XLNetClassifier.from_pretrained(f"{root}/hf")
  assert_same(from_huggingface(batch), model(batch))
  assert from_huggingface.labels == model.labels
  convert_checkpoint(f"{root}/hf", "huggingface", f"{root}/tf1", "original")
  assert sorted(files.listdir(f"{root}/tf1")) == [
      "checkpoint", "xlnet_config.json", "xlnet_model.ckpt.data-00000-of-00001",
      "xlnet_model.ckpt.index"]
  report = convert_checkpoint(f"{root}/tf1/xlnet_model.ckpt", "original", f"{root}/back")
  assert report.startswith(f"Loaded 32 variables from {root}/tf1/xlnet_model.ckpt.")
  assert_same(XLNetModel.from_pretrained(f"{root}/back")(batch), model.backbone(batch))
  assert_same(XLNetModel.from_pretrained(f"{root}/tf1/xlnet_model.ckpt")(batch),
              model.backbone(batch))
  assert sorted(os.listdir(tmp_path)) == ["tmp"]
  assert [name for name in os.listdir(tmp_path / "tmp")
          if not name.startswith("__autograph_generated_file")] == []


def test_remote_weight_files_are_read_and_checked_as_local_ones(tmp_path):
  """safetensors read from ram:// directly, pytorch_model.bin through a local copy: the same
  arrays as from a local file; a file cut short, a header size beyond the file, a damaged zip:
  the reader's one error naming the remote path."""
  root = f"ram://weights-{uuid.uuid4().hex}"
  rng = np.random.default_rng(7)
  tensors = {"a": rng.normal(size=[3, 4]).astype(np.float32),
             "b": rng.integers(0, 9, size=[5]).astype(np.int32)}
  path = write_safetensors(f"{root}/model.safetensors", tensors)
  write_safetensors(str(tmp_path / "model.safetensors"), tensors)
  assert files.read_bytes(path) == (tmp_path / "model.safetensors").read_bytes()
  assert_same(read_safetensors(path), tensors)
  assert stated_value_count(path) == 17
  raw = files.read_bytes(path)
  files.write_bytes(f"{root}/cut.safetensors", raw[:-4])
  with pytest.raises(UserInputError, match=rf"^{re.escape(root)}/cut.safetensors: tensor 'b': "
                                           r"data_offsets \[48, 68\] lie outside the 64 bytes"):
    read_safetensors(f"{root}/cut.safetensors")
  files.write_bytes(f"{root}/huge.safetensors", (10**9).to_bytes(8, "little") + raw[8:])
  with pytest.raises(UserInputError, match=rf"^{re.escape(root)}/huge.safetensors: header size "
                                           r"1000000000 is over"):
    read_safetensors(f"{root}/huge.safetensors")
  local_bin = str(tmp_path / "pytorch_model.bin")
  write_pytorch_bin(local_bin, tensors)
  files.copy(local_bin, f"{root}/pytorch_model.bin")
  assert_same(read_pytorch_bin(f"{root}/pytorch_model.bin"), read_pytorch_bin(local_bin))
  files.write_bytes(f"{root}/cut.bin", files.read_bytes(local_bin)[:-30])
  with pytest.raises(UserInputError, match=rf"^{re.escape(root)}/cut.bin: a damaged zip"):
    read_pytorch_bin(f"{root}/cut.bin")
