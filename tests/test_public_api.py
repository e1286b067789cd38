"""The public API: every name in every `__all__` imports, the top-level names are what DESIGN
promises, and the README's Python snippets run as written against a tiny model."""

import importlib
import os
import pkgutil
import re
import shutil

import keras
import numpy as np
import pytest

import xlnet_tf
from model_inputs import tiny_config
from xlnet_tf import XLNetClassifier, XLNetModel, XLNetPretrainer, checkpoints
from xlnet_tf.pretraining import create_pretraining_data
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def all_modules():
  names = ["xlnet_tf"]
  for info in pkgutil.walk_packages(xlnet_tf.__path__, "xlnet_tf."):
    # The commands define their absl flags when imported (several share names), so one process
    # imports one of them: tests/test_installed_commands.py runs each in its own.
    if not info.name.startswith("xlnet_tf.cli."):
      names.append(info.name)
  return names


def test_top_level_names():
  expected = {"XLNetConfig", "XLNetModel", "XLNetPretrainer", "XLNetClassifier",
              "XLNetMultipleChoice", "XLNetQuestionAnswering", "XLNetTokenClassifier",
              "XLNetTokenizer", "XLNetPreprocessor", "checkpoints"}
  assert set(xlnet_tf.__all__) == expected
  from xlnet_tf import (XLNetClassifier, XLNetMultipleChoice, XLNetPretrainer,  # noqa: F401
                        XLNetQuestionAnswering, XLNetTokenClassifier, XLNetTokenizer)
  assert XLNetPretrainer.__module__ == "xlnet_tf.heads.pretrainer"
  with pytest.raises(AttributeError, match="no attribute 'XLNetNothing'"):
    xlnet_tf.XLNetNothing  # noqa: B018


@pytest.mark.parametrize("module_name", all_modules())
def test_every_name_in_all_imports(module_name):
  module = importlib.import_module(module_name)
  if module_name.endswith("__init__") or hasattr(module, "__path__"):  # a package
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
  for name in getattr(module, "__all__", []):
    assert getattr(module, name) is not None, f"{module_name}.{name}"


def test_subpackage_entry_points():
  from xlnet_tf.serving.saved_model import export_saved_model  # noqa: F401
  from xlnet_tf.pretraining import pretraining_dataset  # noqa: F401
  from xlnet_tf.tasks import finetune  # noqa: F401
  from xlnet_tf.training import create_optimizer  # noqa: F401


def readme_snippets():
  with open(README, encoding="utf-8") as handle:
    return re.findall(r"```python\n(.*?)```", handle.read(), flags=re.S)


@pytest.mark.slow
def test_readme_snippets_run(tmp_path, sp_model, corpus_files, monkeypatch):
  """The files the snippets name, made tiny: a released-model directory (config, TF1
  checkpoint, SentencePiece model), xlnet_config.json and proc_data/."""
  config = tiny_config(n_token=1000)
  released = tmp_path / "xlnet_cased_L-12_H-768_A-12"
  config.to_json_file(str(released / "xlnet_config.json"), original_keys_only=True)
  config.to_json_file(str(tmp_path / "xlnet_config.json"), original_keys_only=True)
  checkpoints.save_original_checkpoint(XLNetModel(config), str(released / "xlnet_model.ckpt"))
  shutil.copy(sp_model, released / "spiece.model")
  create_pretraining_data(corpus_files, sp_model, str(tmp_path / "proc_data"),
                          PretrainingDataConfig(seq_len=128, reuse_len=64, num_predict=21,
                                                bsz_per_host=4, bi_data=True), seed=0,
                          num_workers=1)
  lm_dir = tmp_path / "pretrain_output" / "model" / "lm"  # the main job's LM (infilling)
  keras.utils.set_random_seed(0)
  lm = XLNetPretrainer(XLNetModel(tiny_config(n_token=1000)))
  lm({"input_ids": np.ones([1, 4], np.int32), "perm_mask": np.zeros([1, 4, 4], np.float32),
      "target_mapping": np.eye(4, dtype=np.float32)[None, :1]})
  checkpoints.save_pretrained(lm, str(lm_dir))
  os.makedirs(tmp_path / "pretrain_output" / "data")
  shutil.copy(sp_model, tmp_path / "pretrain_output" / "data" / "spiece.model")
  monkeypatch.chdir(tmp_path)
  snippets = readme_snippets()
  assert len(snippets) == 6
  namespace = {}
  for snippet in snippets:
    if "model.fit(" in snippet:  # the same call, a few steps instead of a thousand
      shortened = snippet.replace("steps_per_epoch=100, epochs=10", "steps_per_epoch=2, epochs=1")
      assert shortened != snippet
      snippet = shortened
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102
  assert namespace["out"]["query_output"].shape == (2, 1, config.d_model)
  assert namespace["logits"].shape == (2, 2) and namespace["classifier"].labels == [
      "negative", "positive"]
  assert sorted(os.listdir(tmp_path / "my_classifier")) == [
      "head.json", "labels.json", "model.weights.h5", "preprocessor.json", "spiece.model",
      "tokenizer_config.json", "xlnet_config.json"]
  # Raw strings: fit, evaluate, predict; the preprocessor saved with the head.
  assert namespace["scores"].shape == (2, 2)
  assert np.isfinite(namespace["sentiment"].history.history["loss"][-1])
  assert XLNetClassifier.from_pretrained("sentiment").preprocessor.sequence_length == 64
  assert np.isfinite(namespace["model"].history.history["loss"][-1])
  assert set(namespace["batch"]) >= {"input_ids", "perm_mask", "target_mapping", "target"}
  assert namespace["filled"].shape == namespace["blanks"].input_ids.shape
  assert namespace["logp"].shape == (1,) and len(namespace["ranked"]) == 3
