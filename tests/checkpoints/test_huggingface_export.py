"""Writing Hugging Face directories (config.json + model.safetensors): read back by our own
loader, compared with the float64 reference, loaded by transformers (when installed) with no
missing or unexpected weight and the same outputs, and the bad inputs refused in one line."""

import json
import os

import keras
import numpy as np
import pytest

from checkpoint_files import assert_matches_reference, convert_checkpoint
from cli_output import run_tool
from model_inputs import tiny_config
from transformers_heads import MODELS, build, inputs_for, outputs_of, transformers_outputs
from xlnet_tf import XLNetClassifier, XLNetModel, checkpoints
from xlnet_tf.checkpoints.huggingface import huggingface_to_original
from xlnet_tf.checkpoints.huggingface_writer import save_huggingface_checkpoint
from xlnet_tf.checkpoints.labels import save_labels
from xlnet_tf.checkpoints.safetensors_io import read_safetensors
from xlnet_tf.text.packing import pack_pair
from xlnet_tf.text.preprocessor import XLNetPreprocessor
from xlnet_tf.text.tokenizer import XLNetTokenizer

def weights_by_name(model):
  return {name: variable.numpy()
          for name, variable in checkpoints.original_variable_map(model).items()}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_written_directory_reads_back_identically(tmp_path, rng, kind):
  model = build(kind)
  save_huggingface_checkpoint(model, str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]
  reloaded = build(kind, seed=1)
  checkpoints.load_huggingface_checkpoint(reloaded, str(tmp_path))
  theirs = weights_by_name(reloaded)
  for name, value in weights_by_name(model).items():
    np.testing.assert_array_equal(theirs[name], value, err_msg=name)
  batch = inputs_for(kind, rng)
  ours, back = outputs_of(model, kind, batch), outputs_of(reloaded, kind, batch)
  for key in ours:
    np.testing.assert_array_equal(back[key], ours[key], err_msg=key)


@pytest.mark.parametrize("untie_r", [True, False])
def test_written_backbone_matches_the_float64_reference(tmp_path, rng, untie_r):
  """The file's tensors, renamed to the original names, drive the NumPy reference."""
  config = tiny_config(untie_r=untie_r)
  model = build("backbone", config)
  save_huggingface_checkpoint(model, str(tmp_path))
  tensors = read_safetensors(str(tmp_path / "model.safetensors"))
  assert "transformer.layer.1.rel_attn.r_w_bias" in tensors  # per layer, tied or not
  weights, _, _ = huggingface_to_original(tensors, config.n_layer, untie_r, source="test")
  assert_matches_reference(model, weights, config, rng)


def test_config_json_holds_the_architecture_and_labels(tmp_path):
  """A pretraining run's data layout (bi_data, reuse_len) is not written: transformers' forward
  would read the second half of every batch backwards."""
  model = build("classifier", tiny_config(ff_activation="gelu", clamp_len=5, mem_len=6,
                                          reuse_len=4, bi_data=True))
  save_huggingface_checkpoint(model, str(tmp_path), labels=["neg", "neutral", "pos"])
  values = json.loads((tmp_path / "config.json").read_text())
  expected = {"architectures": ["XLNetForSequenceClassification"], "model_type": "xlnet",
              "vocab_size": 50, "d_model": 32, "n_layer": 2, "n_head": 4, "d_head": 8,
              "d_inner": 48, "ff_activation": "gelu_new", "clamp_len": 5, "mem_len": 6,
              "reuse_len": None, "bi_data": False,
              "summary_type": "last", "summary_proj_to_labels": False, "num_labels": 3,
              "id2label": {"0": "neg", "1": "neutral", "2": "pos"},
              "label2id": {"neg": 0, "neutral": 1, "pos": 2}}
  assert {key: values[key] for key in expected} == expected
  assert "problem_type" not in values  # single-label: transformers' default softmax


def test_config_json_names_the_problem_type_of_regression_and_multi_label(tmp_path):
  for overrides, problem in (({"num_classes": 1}, "regression"),
                             ({"multi_label": True}, "multi_label_classification")):
    keras.utils.set_random_seed(0)
    model = XLNetClassifier(XLNetModel(tiny_config()), **{"num_classes": 3, **overrides})
    save_huggingface_checkpoint(model, str(tmp_path / problem))
    assert json.loads((tmp_path / problem / "config.json").read_text())["problem_type"] == problem


def own_head_directory(directory, kind, labels=None, **overrides):
  model = build(kind, **overrides)
  checkpoints.save_pretrained(model, str(directory))
  if labels is not None:
    save_labels(str(directory), labels)
  return model


@pytest.mark.parametrize("output_format", ["original", "huggingface", "own"])
def test_convert_a_pretrained_backbone_with_its_run_time_options(tmp_path, output_format):
  """A backbone as pretraining saves it (bi_data, memory, the erf gelu): the formats that hold
  no run-time option are checked under the backbone's own, and read back the same weights."""
  config = tiny_config(bi_data=True, mem_len=6, reuse_len=4, ff_activation="gelu_exact")
  model = build("backbone", config)
  model.save_pretrained(str(tmp_path / "own"))
  report = convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "out"),
                                         output_format)
  assert "max |diff| = 0.0" in report
  reloaded = XLNetModel.from_pretrained(str(tmp_path / "out"))
  assert reloaded.config.ff_activation == "gelu_exact"
  for name, value in weights_by_name(model).items():
    np.testing.assert_array_equal(weights_by_name(reloaded)[name], value, err_msg=name)


def test_convert_writes_a_head_with_its_labels(tmp_path):
  own_head_directory(tmp_path / "own", "token_classifier", labels=["O", "B", "I", "X"])
  report = convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "hf"),
                                      "huggingface")
  assert "XLNetTokenClassifier (transformers' XLNetForTokenClassification)" in report
  assert "max |diff| = 0.0" in report
  values = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert values["id2label"] == {"0": "O", "1": "B", "2": "I", "3": "X"}
  assert sorted(os.listdir(tmp_path)) == ["hf", "own"]


# (text, second text or None): capitals (the tokenizer lower-cases), accents, quotes, spaces.
TOKENIZER_TEXTS = [("The Class statement defines a NEW class.", None),
                   ("Modules hold values.", "Objects of MANY kinds"),
                   ("Café naïve ``quoted'' text", "  spaced   out  "), ("", "an empty first")]


def test_convert_carries_the_tokenizer_to_every_format(tmp_path, sp_model):
  """Own and original outputs hold spiece.model and its settings (own: the head's packing
  too), and so does an own directory converted back from huggingface; a huggingface output
  holds what transformers' XLNetTokenizer and AutoTokenizer load, and they tokenize as we do:
  the same ids and segment ids, <sep> <cls> at the end."""
  tokenizer = XLNetTokenizer(sp_model, lower=True)
  model = build("classifier", tiny_config(n_token=tokenizer.vocab_size))
  model.preprocessor = XLNetPreprocessor(tokenizer, sequence_length=24)
  checkpoints.save_pretrained(model, str(tmp_path / "input"))
  # (input, its format, output directory = its format), the last one back from huggingface.
  for source, source_format, output in (("input", "own", "own"), ("input", "own", "original"),
                                        ("input", "own", "huggingface"),
                                        ("huggingface", "huggingface", "own_again")):
    report = convert_checkpoint(str(tmp_path / source), source_format,
                                           str(tmp_path / output), output.split("_")[0])
    assert " with its tokenizer (spiece.model" in report
    assert (tmp_path / output / "spiece.model").read_bytes() == open(sp_model, "rb").read()
    reread = XLNetTokenizer.from_pretrained(str(tmp_path / output))
    assert (reread.lower, reread.keep_accents) == (True, False)
  assert json.loads((tmp_path / "own" / "preprocessor.json").read_text()) == {
      "sequence_length": 24, "num_segments": 1}
  assert sorted(os.listdir(tmp_path / "huggingface")) == [
      "config.json", "model.safetensors", "special_tokens_map.json", "spiece.model",
      "tokenizer_config.json"]
  settings = json.loads((tmp_path / "huggingface" / "tokenizer_config.json").read_text())
  assert {key: settings[key] for key in ("tokenizer_class", "do_lower_case", "sep_token",
                                         "cls_token", "additional_special_tokens")} == {
      "tokenizer_class": "XLNetTokenizer", "do_lower_case": True, "sep_token": "<sep>",
      "cls_token": "<cls>", "additional_special_tokens": ["<eop>", "<eod>"]}

  transformers = pytest.importorskip("transformers")
  special = tokenizer.special_ids
  for loader in (transformers.XLNetTokenizer, transformers.AutoTokenizer):
    theirs = loader.from_pretrained(str(tmp_path / "huggingface"))
    assert theirs.padding_side == "left"
    assert (theirs.sep_token_id, theirs.cls_token_id) == (special.sep, special.cls)
    for text, second in TOKENIZER_TEXTS:
      ids, segments = pack_pair(tokenizer.encode(text),
                                None if second is None else tokenizer.encode(second),
                                special.sep, special.cls)
      encoded = theirs(text, second, return_token_type_ids=True)
      assert (encoded["input_ids"], encoded["token_type_ids"]) == (ids, segments), text
    # transformers 5 keeps a piece ending in a digit and a comma whole, where the original
    # preprocessing (and ours) splits it off: that split is the whole difference.
    text = "In 1, 2, and 12, we counted."
    their_ids = theirs(text)["input_ids"][:-2]
    resplit = [i for piece in their_ids for i in tokenizer.replacements.get(piece, [piece])]
    assert their_ids != tokenizer.encode(text) == resplit


def test_convert_over_a_model_directory_replaces_it_whole(tmp_path):
  """Converting into a directory of another model swaps the new one in: none of the old
  model's files (weights another reader would prefer, its labels) survive beside it."""
  own_head_directory(tmp_path / "own", "backbone")
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "pytorch_model.bin").write_bytes(b"weights of another model")
  save_labels(str(tmp_path / "out"), ["stale", "labels"])
  convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "out"),
                                "huggingface")
  assert sorted(os.listdir(tmp_path / "out")) == ["config.json", "model.safetensors"]
  assert sorted(os.listdir(tmp_path)) == ["out", "own"]  # no work folder left


def test_convert_between_own_and_original_keeps_a_head(tmp_path):
  """Heads convert to the other formats too: own -> original -> back, weights unchanged."""
  model = own_head_directory(tmp_path / "own", "classifier", labels=["a", "b", "c"])
  convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "tf1"), "original")
  assert (tmp_path / "tf1" / "labels.json").exists()
  reloaded = build("classifier", seed=2)
  checkpoints.load_original_checkpoint(reloaded, str(tmp_path / "tf1"))
  theirs = weights_by_name(reloaded)
  for name, value in weights_by_name(model).items():
    np.testing.assert_array_equal(theirs[name], value, err_msg=name)


# ---- bad input: one line naming the input, exit status 1, nothing written ----

def unknown_head(tmp_path):
  own_head_directory(tmp_path / "own", "classifier")
  (tmp_path / "own" / "head.json").write_text('{"class": "XLNetRanker"}')
  return (f"{tmp_path / 'own' / 'head.json'}: class must be one of ['XLNetPretrainer', "
          "'XLNetClassifier', 'XLNetMultipleChoice', 'XLNetQuestionAnswering', "
          "'XLNetTokenClassifier']; got 'XLNetRanker'")


def attention_pooling(tmp_path):
  own_head_directory(tmp_path / "own", "classifier", summary_type="attn")
  return ("the model for --output_format=huggingface must be pooled by last, first or mean "
          "(transformers' XLNetSequenceSummary has no 'attn'); got XLNetClassifier with "
          "summary_type='attn'")


def next_sentence_head(tmp_path):
  own_head_directory(tmp_path / "own", "lm", next_sentence=True)
  return ("the model for --output_format=huggingface must be without a next-sentence "
          "classifier (XLNetLMHeadModel has none); got XLNetPretrainer with next_sentence=True")


def head_size_apart_from_d_model(tmp_path):
  own_head_directory(tmp_path / "own", "backbone", config=tiny_config(d_head=4))
  return ("the model for --output_format=huggingface must be a model with d_head * n_head == "
          "d_model (transformers derives d_head from them); got d_head 4, n_head 4, d_model 32")


def labels_of_another_head(tmp_path):
  own_head_directory(tmp_path / "own", "classifier", labels=["yes", "no"])
  return (f"{tmp_path / 'own' / 'labels.json'}: lists 2 labels, but the XLNetClassifier in "
          f"{tmp_path / 'own' / 'head.json'} has 3 classes")


def output_is_a_file(tmp_path):
  own_head_directory(tmp_path / "own", "backbone")
  (tmp_path / "out").write_text("not a directory")
  return f"{tmp_path / 'out'}: exists and is not a directory"


def output_holds_other_files(tmp_path):
  own_head_directory(tmp_path / "own", "backbone")
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "notes.txt").write_text("the user's own file")
  return (f"{tmp_path / 'out'}: holds files that are not a model's (notes.txt); a model is "
          "saved into a new directory or over a model directory, which it replaces whole")


BAD_INPUTS = {case.__name__: case for case in (
    unknown_head, attention_pooling, next_sentence_head, head_size_apart_from_d_model,
    labels_of_another_head, output_is_a_file, output_holds_other_files)}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_convert_checkpoint_cli_refuses_in_one_line(tmp_path, case):
  message = BAD_INPUTS[case](tmp_path)
  before = {path: os.path.getmtime(path) for path in map(str, tmp_path.rglob("*"))}
  result = run_tool("run/convert_checkpoint.py", f"--input={tmp_path / 'own'}",
                    "--input_format=own", f"--output={tmp_path / 'out'}",
                    "--output_format=huggingface")
  assert result.returncode == 1, result.stderr
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert lines == [f"error: {message}"], result.stderr
  assert {path: os.path.getmtime(path) for path in map(str, tmp_path.rglob("*"))} == before


# ---- transformers loads the files and computes the same outputs ----

@pytest.mark.parametrize("kind", sorted(MODELS))
def test_transformers_loads_every_weight_and_computes_the_same(tmp_path, rng, kind):
  model = build(kind)
  save_huggingface_checkpoint(model, str(tmp_path))
  batch = inputs_for(kind, rng)
  info, theirs = transformers_outputs(kind, tmp_path, batch)
  assert not any(info.values()), info  # missing, unexpected, mismatched keys, errors
  ours = outputs_of(model, kind, batch)
  assert sorted(theirs) == sorted(ours)
  for key, value in ours.items():
    np.testing.assert_allclose(theirs[key], value, atol=2e-5, rtol=1e-5, err_msg=key)


def test_transformers_reads_the_labels(tmp_path):
  transformers = pytest.importorskip("transformers")
  own_head_directory(tmp_path / "own", "classifier", labels=["neg", "neutral", "pos"])
  convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "hf"), "huggingface")
  config = transformers.AutoConfig.from_pretrained(str(tmp_path / "hf"))
  assert config.id2label == {0: "neg", 1: "neutral", 2: "pos"}
