"""Damaged, truncated and incomplete checkpoint files: one line naming the file, nothing loaded.

Each case builds its bad file in the test. The library cases call the public loaders; the CLI
cases run run/convert_checkpoint.py and check the one `error:` line, the exit status and that
no output (not even a partial one) is left.
"""

import glob
import json
import os
import shutil
import zipfile

import h5py
import numpy as np
import pytest
import tensorflow as tf

from checkpoint_files import (convert_checkpoint, huggingface_tensors, huggingface_tf_weights,
                              original_weights, pickle_bytes, write_huggingface_config,
                              write_keras_h5, write_pytorch_bin, write_tf1_checkpoint)
from cli_output import run_tool
from model_inputs import tiny_config
from xlnet_tf import XLNetModel, checkpoints
from xlnet_tf.checkpoints import conversion
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.classifier import XLNetClassifier

CONFIG = tiny_config()


def cut_in_half(path):
  raw = open(path, "rb").read()
  with open(path, "wb") as handle:
    handle.write(raw[:len(raw) // 2])


def own_directory(directory):
  checkpoints.save_pretrained(XLNetModel(CONFIG), str(directory))
  return str(directory / "model.weights.h5")


def pytorch_directory(directory):
  write_huggingface_config(str(directory), CONFIG)
  return write_pytorch_bin(str(directory / "pytorch_model.bin"),
                           huggingface_tensors(original_weights(CONFIG), CONFIG))


def rewrite_zip(path, change):
  """The zip at `path` rewritten member by member: change(name, bytes) gives the new bytes, or
  None to leave the member out."""
  with zipfile.ZipFile(path) as archive:
    members = [(name, archive.read(name)) for name in archive.namelist()]
  with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
    for name, raw in members:
      raw = change(name, raw)
      if raw is not None:
        archive.writestr(name, raw)


def flip_a_stored_byte(path, member):
  """Changes one byte of `member`'s data in place, so its CRC no longer matches."""
  with zipfile.ZipFile(path) as archive:
    info = archive.getinfo(member)
  raw = bytearray(open(path, "rb").read())
  data_start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
  raw[data_start] ^= 0xFF
  open(path, "wb").write(bytes(raw))


# ---- the cases: build(tmp_path) -> (the file to name, load(model) through a public loader) ---

def own_weights_cut_short(tmp_path):
  weights = own_directory(tmp_path / "own")
  cut_in_half(weights)
  return weights, lambda model: checkpoints.load_own_checkpoint(model, str(tmp_path / "own"))


def own_weights_not_hdf5(tmp_path):
  weights = own_directory(tmp_path / "own")
  open(weights, "wb").write(b"not an HDF5 file\n" * 20)
  return weights, lambda model: checkpoints.load_own_checkpoint(model, str(tmp_path / "own"))


def own_weights_missing_one(tmp_path):
  weights = own_directory(tmp_path / "own")
  with h5py.File(weights, "a") as handle:
    del handle["vars/5"]  # the backbone's last own variable (seg_embed)
  return weights, lambda model: checkpoints.load_own_checkpoint(model, str(tmp_path / "own"))


def own_backbone_into_a_classifier(tmp_path):
  weights = own_directory(tmp_path / "own")
  return weights, lambda model: checkpoints.load_own_checkpoint(
      XLNetClassifier(model, 2), str(tmp_path / "own"))


def own_config_without_d_model(tmp_path):
  own_directory(tmp_path / "own")
  config_path = tmp_path / "own" / "xlnet_config.json"
  values = CONFIG.to_dict()
  del values["d_model"]
  config_path.write_text(json.dumps(values))
  return str(config_path), lambda model: XLNetModel.from_pretrained(str(tmp_path / "own"))


def pytorch_bin_cut_short(tmp_path):
  path = pytorch_directory(tmp_path / "hf")
  cut_in_half(path)
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def pytorch_bin_missing_storage(tmp_path):
  path = pytorch_directory(tmp_path / "hf")
  rewrite_zip(path, lambda name, raw: None if name == "archive/data/1" else raw)
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def pytorch_bin_bad_crc(tmp_path):
  path = pytorch_directory(tmp_path / "hf")
  flip_a_stored_byte(path, "archive/data/2")
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def pytorch_bin_pickle_cut_short(tmp_path):
  path = pytorch_directory(tmp_path / "hf")
  rewrite_zip(path, lambda name, raw: raw[:len(raw) // 2] if name.endswith("data.pkl") else raw)
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def pytorch_bin_legacy_format(tmp_path):
  path = pytorch_directory(tmp_path / "hf")
  open(path, "wb").write(pickle_bytes({"x": 1}))
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def pytorch_bin_neither_zip_nor_pickle(tmp_path):
  path = pytorch_directory(tmp_path / "hf")
  open(path, "wb").write(b"<html>404 Not Found</html>")
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def tf_model_h5_cut_short(tmp_path):
  write_huggingface_config(str(tmp_path / "hf"), CONFIG)
  path = write_keras_h5(str(tmp_path / "hf" / "tf_model.h5"),
                        huggingface_tf_weights(original_weights(CONFIG), CONFIG))
  cut_in_half(path)
  return path, lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))


def huggingface_config_not_json(tmp_path):
  pytorch_directory(tmp_path / "hf")
  (tmp_path / "hf" / "config.json").write_text('{"d_model": 32,')
  return (str(tmp_path / "hf" / "config.json"),
          lambda model: checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf")))


def original_data_cut_short(tmp_path):
  prefix = write_tf1_checkpoint(original_weights(CONFIG), str(tmp_path / "xlnet_model.ckpt"))
  cut_in_half(glob.glob(prefix + ".data-*")[0])
  return prefix, lambda model: checkpoints.load_original_checkpoint(model, prefix)


def original_index_cut_short(tmp_path):
  prefix = write_tf1_checkpoint(original_weights(CONFIG), str(tmp_path / "xlnet_model.ckpt"))
  cut_in_half(prefix + ".index")
  return prefix, lambda model: checkpoints.load_original_checkpoint(model, prefix)


LIBRARY_CASES = {
    # case: (builder, exception type, what the message says after the file's name)
    "own weights cut short": (own_weights_cut_short, UserInputError,
                              r"not a readable HDF5 file \(.*truncated file"),
    "own weights not HDF5": (own_weights_not_hdf5, UserInputError,
                             r"not a readable HDF5 file \(.*signature not found"),
    "own weights missing a variable": (own_weights_missing_one,
                                       checkpoints.CheckpointMismatchError,
                                       r"does not hold the weights of XLNetModel 'transformer': "
                                       r"it holds nothing the model has no variable for, and "
                                       r"lacks float \[2, 2, 4, 8\]; nothing was loaded"),
    "own backbone into a classifier": (own_backbone_into_a_classifier,
                                       checkpoints.CheckpointMismatchError,
                                       r"does not hold the weights of XLNetClassifier"),
    "own config without d_model": (own_config_without_d_model, UserInputError,
                                   r"missing the XLNet config key\(s\) \['d_model'\]"),
    "pytorch_model.bin cut short": (pytorch_bin_cut_short, UserInputError,
                                    r"a damaged zip archive \(no end-of-central-directory "
                                    r"record: cut short"),
    "pytorch_model.bin missing a storage": (pytorch_bin_missing_storage, UserInputError,
                                            r"the pickle refers to storage '1', but the "
                                            r"archive has no record archive/data/1"),
    "pytorch_model.bin bad CRC": (pytorch_bin_bad_crc, UserInputError,
                                  r"a damaged zip archive \(Bad CRC-32 for file "
                                  r"'archive/data/2'\)"),
    "pytorch_model.bin pickle cut short": (pytorch_bin_pickle_cut_short, UserInputError,
                                           r"archive/data.pkl is not a complete state-dict "
                                           r"pickle"),
    "pytorch_model.bin legacy format": (pytorch_bin_legacy_format, UserInputError,
                                        r"not a zip archive but a pickle: the legacy .*"
                                        r"safe_serialization=True"),
    "pytorch_model.bin not PyTorch": (pytorch_bin_neither_zip_nor_pickle, UserInputError,
                                      r"neither a zip archive nor a pickle"),
    "tf_model.h5 cut short": (tf_model_h5_cut_short, UserInputError,
                              r"not a readable HDF5 file"),
    "config.json not JSON": (huggingface_config_not_json, UserInputError, r"not valid JSON"),
    "original .data cut short": (original_data_cut_short, UserInputError,
                                 r"cannot read model/transformer/\S+ \(Read less bytes"),
    "original .index cut short": (original_index_cut_short, UserInputError,
                                  r"unreadable TF checkpoint \("),
}


@pytest.mark.parametrize("case", sorted(LIBRARY_CASES))
def test_bad_checkpoint_is_one_line_naming_the_file_and_nothing_is_loaded(tmp_path, case):
  build, error_type, message = LIBRARY_CASES[case]
  named_file, load = build(tmp_path)
  model = XLNetModel(CONFIG)
  before = [variable.numpy().copy() for variable in model.weights]
  with pytest.raises(error_type) as raised:
    load(model)
  text = str(raised.value)
  assert text.startswith(f"{named_file}: "), text
  assert "\n" not in text, text
  assert raised.match(message)
  for variable, value in zip(model.weights, before):
    np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.path)


def test_copied_original_directory_loads_its_own_weights(tmp_path):
  """The `checkpoint` file names the checkpoint relative to its directory: a copy reads the
  copy, even with the original directory gone or holding other weights."""
  weights = original_weights(CONFIG, seed=3)
  source = tmp_path / "source"
  prefix = write_tf1_checkpoint(weights, str(source / "xlnet_model.ckpt"))
  CONFIG.to_json_file(str(source / "xlnet_config.json"), original_keys_only=True)
  convert_checkpoint(prefix, "original", str(tmp_path / "converted"), "original")
  state = (tmp_path / "converted" / "checkpoint").read_text()
  assert 'model_checkpoint_path: "xlnet_model.ckpt"' in state and str(tmp_path) not in state
  shutil.copytree(tmp_path / "converted", tmp_path / "copy")
  shutil.rmtree(tmp_path / "converted")
  shutil.rmtree(source)
  assert tf.train.latest_checkpoint(str(tmp_path / "copy")) == str(tmp_path / "copy" /
                                                                   "xlnet_model.ckpt")
  model = XLNetModel(CONFIG)
  report = checkpoints.load_original_checkpoint(model, str(tmp_path / "copy"))
  assert report.source == str(tmp_path / "copy" / "xlnet_model.ckpt")
  np.testing.assert_array_equal(model.word_embedding.numpy(),
                                weights["model/transformer/word_embedding/lookup_table"])


def test_absolute_checkpoint_state_is_read_inside_the_copy(tmp_path):
  """TF1's Saver writes an absolute path; a copy of its directory must not read the original's
  (here rewritten) weights through it."""
  first, second = original_weights(CONFIG, seed=1), original_weights(CONFIG, seed=2)
  write_tf1_checkpoint(first, str(tmp_path / "run" / "xlnet_model.ckpt"))
  assert str(tmp_path / "run") in (tmp_path / "run" / "checkpoint").read_text()
  shutil.copytree(tmp_path / "run", tmp_path / "copy")
  write_tf1_checkpoint(second, str(tmp_path / "run" / "xlnet_model.ckpt"))
  model = XLNetModel(CONFIG)
  checkpoints.load_original_checkpoint(model, str(tmp_path / "copy"))
  np.testing.assert_array_equal(model.word_embedding.numpy(),
                                first["model/transformer/word_embedding/lookup_table"])


def test_failed_conversion_leaves_no_output(tmp_path, monkeypatch):
  own_directory(tmp_path / "own")

  def verification_fails(config):
    raise RuntimeError("verification interrupted")
  monkeypatch.setattr(conversion, "verification_batch", verification_fails)
  with pytest.raises(RuntimeError, match="verification interrupted"):
    convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "out"), "original")
  assert sorted(os.listdir(tmp_path)) == ["own"]


def test_conversion_into_an_existing_directory_replaces_its_files(tmp_path):
  for seed in (1, 2):
    model = XLNetModel(CONFIG)
    model.word_embedding.assign(original_weights(CONFIG, seed=seed)[
        "model/transformer/word_embedding/lookup_table"])
    checkpoints.save_pretrained(model, str(tmp_path / f"own{seed}"))
    convert_checkpoint(str(tmp_path / f"own{seed}"), "own", str(tmp_path / "out"),
                               "original")
  assert sorted(os.listdir(tmp_path)) == ["out", "own1", "own2"]
  reloaded = XLNetModel(CONFIG)
  checkpoints.load_original_checkpoint(reloaded, str(tmp_path / "out"))
  np.testing.assert_array_equal(reloaded.word_embedding.numpy(), model.word_embedding.numpy())


def directory_of_no_known_layout(tmp_path):
  (tmp_path / "bert").mkdir()
  (tmp_path / "bert" / "bert_config.json").write_text('{"hidden_size": 32}')
  (tmp_path / "bert" / "vocab.txt").write_text("[PAD]\n[UNK]\n")
  return str(tmp_path / "bert"), [f"--input={tmp_path / 'bert'}"]


def input_format_contradicting_the_files(tmp_path):
  """An own directory given as huggingface (refused before its weights are read)."""
  (tmp_path / "own").mkdir()
  CONFIG.to_json_file(str(tmp_path / "own" / "xlnet_config.json"))
  (tmp_path / "own" / "model.weights.h5").write_bytes(b"")
  return (f"--input_format=huggingface contradicts --input={tmp_path / 'own'}",
          [f"--input={tmp_path / 'own'}", "--input_format=huggingface"])


CLI_CASES = {
    # case: (builder giving (file to name, convert_checkpoint.py flags), message after the name)
    # --input: any layout or a hub id, its format what its files are (--input_format agreeing).
    "--input that does not exist": (
        lambda tmp_path: (str(tmp_path / "none"), [f"--input={tmp_path / 'none'}"]),
        "no such directory; expected a directory holding"),
    "--input of no known layout": (directory_of_no_known_layout,
                                   "not a pretrained XLNet directory; expected"),
    "--input_format contradicting --input": (input_format_contradicting_the_files,
                                             "it holds own files"),
    "own model.weights.h5 cut short": (
        lambda tmp_path: (own_weights_cut_short(tmp_path)[0],
                          [f"--input={tmp_path / 'own'}", "--input_format=own"]),
        "not a readable HDF5 file"),
    "pytorch_model.bin cut short": (
        lambda tmp_path: (pytorch_bin_cut_short(tmp_path)[0],
                          [f"--input={tmp_path / 'hf'}", "--input_format=huggingface"]),
        "a damaged zip archive (no end-of-central-directory record"),
    "pytorch_model.bin missing a storage": (
        lambda tmp_path: (pytorch_bin_missing_storage(tmp_path)[0],
                          [f"--input={tmp_path / 'hf'}", "--input_format=huggingface"]),
        "the pickle refers to storage '1', but the archive has no record archive/data/1"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_convert_checkpoint_cli_bad_input(tmp_path, case):
  build, message = CLI_CASES[case]
  named_file, arguments = build(tmp_path)
  inputs = sorted(os.listdir(tmp_path))
  result = run_tool("run/convert_checkpoint.py", *arguments, f"--output={tmp_path / 'out'}")
  assert result.returncode == 1, result.stderr
  errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
  assert errors == [line for line in result.stderr.splitlines() if line.strip()], result.stderr
  assert len(errors) == 1 and errors[0].startswith(f"error: {named_file}: {message}"), errors
  assert sorted(os.listdir(tmp_path)) == inputs  # no output, no staging directory
