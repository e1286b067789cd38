"""from_pretrained and save_pretrained: one call for every layout (own, Hugging Face, the
original TF1, a hub id read from huggingface_hub's cache), for XLNetModel and every head; and
the padding mask under Hugging Face's and keras-hub's names."""

import json
import logging
import os
import shutil

import keras
import numpy as np
import pytest

from checkpoint_files import (huggingface_tf_weights, write_hub_cache, write_keras_h5,
                              write_pytorch_bin, write_sharded)
from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import (XLNetClassifier, XLNetModel, XLNetMultipleChoice, XLNetPretrainer,
                      XLNetQuestionAnswering, XLNetTokenClassifier, XLNetTokenizer, checkpoints)
from xlnet_tf.checkpoints.huggingface_writer import (huggingface_config, huggingface_tensors,
                                                     save_huggingface_checkpoint)
from xlnet_tf.checkpoints.naming import original_variable_map
from xlnet_tf.checkpoints.safetensors_io import write_safetensors
from xlnet_tf.heads import registry
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.utils.errors import UserInputError

LENGTH = 8
LABELS = ["negative", "neutral", "positive"]


@pytest.fixture(scope="module")
def sp_path(tmp_path_factory):
  """A SentencePiece model of 30 pieces (the tiny config has 50 token ids)."""
  folder = tmp_path_factory.mktemp("spiece")
  corpus = folder / "corpus.txt"
  corpus.write_text("the cat sat on the mat.\nthe dog sat on the log.\n" * 50)
  return train_sentencepiece([str(corpus)], str(folder / "spiece"), vocab_size=30)


@pytest.fixture(scope="module")
def batch():
  """Batch 3, left padding of 0, 2 and 1 tokens, segment ids 0, 1, 2 and padding's 4."""
  return padded_pair_batch(np.random.default_rng(5), 3, LENGTH, 50, pad_lengths=[0, 2, 1])


def build(kind, seed=1, summary_type="attn"):
  """A head of `kind` (or the backbone) over a tiny model with random weights (a classifier
  pooling by `summary_type`)."""
  backbone = XLNetModel(tiny_config())
  heads = {
      "backbone": lambda: backbone,
      "classifier": lambda: XLNetClassifier(backbone, num_classes=3, summary_type=summary_type),
      "multi_label": lambda: XLNetClassifier(backbone, num_classes=3, multi_label=True),
      "tagger": lambda: XLNetTokenClassifier(backbone, num_labels=3),
      "question_answering": lambda: XLNetQuestionAnswering(backbone, start_n_top=3, end_n_top=2),
      "multiple_choice": lambda: XLNetMultipleChoice(backbone),
      "pretrainer": lambda: XLNetPretrainer(backbone),
  }
  model = heads[kind]()
  randomize_weights(model, seed)
  return model


def inputs_for(kind, batch):
  if kind == "multiple_choice":
    return {key: np.stack([value, value[::-1]], axis=1) for key, value in batch.items()}
  if kind == "question_answering":
    return dict(batch, p_mask=1.0 - batch["input_mask"], cls_index=np.full([3], LENGTH - 1))
  if kind == "pretrainer":
    mapping = np.zeros([3, 2, LENGTH], np.float32)
    mapping[:, 0, 3] = mapping[:, 1, 5] = 1.0
    perm_mask = np.zeros([3, LENGTH, LENGTH], np.float32)
    perm_mask[:, :, [3, 5]] = 1.0
    return dict(batch, perm_mask=perm_mask, target_mapping=mapping)
  return batch


def outputs(model, inputs):
  """Every output array of a call, in a fixed order."""
  result = model(inputs)
  if isinstance(model, XLNetModel):
    result = result["sequence_output"]
  return [np.asarray(value) for value in keras.tree.flatten(result)]


def assert_same_outputs(model, reloaded, inputs):
  for ours, theirs in zip(outputs(model, inputs), outputs(reloaded, inputs), strict=True):
    np.testing.assert_array_equal(ours, theirs)


def assert_same_backbone(model, reloaded, batch):
  assert_same_outputs(checkpoints.backbone_of(model), checkpoints.backbone_of(reloaded), batch)


HEAD_CLASSES = {"classifier": XLNetClassifier, "multi_label": XLNetClassifier,
                "tagger": XLNetTokenClassifier, "question_answering": XLNetQuestionAnswering,
                "multiple_choice": XLNetMultipleChoice, "pretrainer": XLNetPretrainer}


@pytest.fixture(scope="module")
def own_directories(tmp_path_factory, sp_path):
  """{kind: (model, its save_pretrained directory)}: labels on the classifiers and the tagger,
  tuned thresholds on the multi-label one, a lower-casing tokenizer on the backbone."""
  root = tmp_path_factory.mktemp("own")
  saved = {}
  for kind in ["backbone"] + sorted(HEAD_CLASSES):
    model = build(kind)
    if kind in ("classifier", "multi_label", "tagger"):
      model.labels = list(LABELS)
    if kind == "multi_label":
      model.thresholds = [0.25, 0.5, 0.75]
    if kind == "backbone":
      model.tokenizer = XLNetTokenizer(sp_path, lower=True)
    saved[kind] = model, model.save_pretrained(str(root / kind))
  return saved


def test_own_backbone_round_trip_with_its_tokenizer(own_directories, batch):
  model, directory = own_directories["backbone"]
  assert sorted(os.listdir(directory)) == ["model.weights.h5", "spiece.model",
                                           "tokenizer_config.json", "xlnet_config.json"]
  reloaded = XLNetModel.from_pretrained(directory)
  assert reloaded.config == model.config
  assert_same_outputs(model, reloaded, batch)
  assert reloaded.tokenizer.lower and not reloaded.tokenizer.keep_accents
  assert reloaded.tokenizer.encode("The Cat sat.") == model.tokenizer.encode("The Cat sat.")
  tokenizer = XLNetTokenizer.from_pretrained(directory)
  assert tokenizer.lower and tokenizer.vocab_size == 30
  # Saved again, the tokenizer travels: a self-contained copy.
  copy = reloaded.save_pretrained(os.path.join(os.path.dirname(directory), "backbone_copy"))
  assert XLNetTokenizer.from_pretrained(copy).encode("A dog.") == tokenizer.encode("A dog.")


@pytest.mark.parametrize("kind", sorted(HEAD_CLASSES))
def test_own_head_round_trip(own_directories, batch, kind):
  model, directory = own_directories[kind]
  head_class = HEAD_CLASSES[kind]
  reloaded = head_class.from_pretrained(directory)
  assert type(reloaded) is head_class and reloaded.tokenizer is None
  assert reloaded.head_config() == model.head_config()
  assert_same_outputs(model, reloaded, inputs_for(kind, batch))
  if kind in ("classifier", "multi_label", "tagger"):
    assert reloaded.labels == LABELS
  if kind == "multi_label":
    assert reloaded.thresholds == [0.25, 0.5, 0.75]
  # XLNetModel.from_pretrained of a head's directory: its backbone.
  assert_same_backbone(model, XLNetModel.from_pretrained(directory), batch)
  # The registry's loader picks the class head.json names.
  assert type(registry.load_saved(directory)) is head_class


def test_saved_files_of_a_head(own_directories):
  _, directory = own_directories["multi_label"]
  assert sorted(os.listdir(directory)) == ["head.json", "labels.json", "model.weights.h5",
                                           "thresholds.json", "xlnet_config.json"]
  with open(os.path.join(directory, "thresholds.json")) as handle:
    assert json.load(handle) == dict(zip(LABELS, [0.25, 0.5, 0.75]))


def test_a_head_over_a_loaded_backbone_saves_its_tokenizer(own_directories, tmp_path, batch):
  _, directory = own_directories["backbone"]
  head = XLNetClassifier(XLNetModel.from_pretrained(directory), num_classes=2)
  head.save_pretrained(str(tmp_path / "head"))
  reloaded = XLNetClassifier.from_pretrained(str(tmp_path / "head"))
  assert reloaded.tokenizer.lower and reloaded.labels is None
  assert_same_outputs(head, reloaded, batch)


def test_run_time_options_and_constructor_arguments(own_directories, batch):
  _, directory = own_directories["backbone"]
  model = XLNetModel.from_pretrained(directory, mem_len=4, fused=False)
  assert model.config.mem_len == 4 and not model.fused
  _, directory = own_directories["question_answering"]
  head = XLNetQuestionAnswering.from_pretrained(directory, start_n_top=2)  # changes no weight
  assert (head.start_n_top, head.end_n_top) == (2, 2)


# ---- Hugging Face directories ---------------------------------------------------------------

TRANSFORMERS_HEADS = {"backbone": "XLNetModel", "classifier": "XLNetForSequenceClassification",
                      "tagger": "XLNetForTokenClassification",
                      "question_answering": "XLNetForQuestionAnswering",
                      "multiple_choice": "XLNetForMultipleChoice",
                      "pretrainer": "XLNetLMHeadModel"}


@pytest.fixture(scope="module")
def huggingface_directories(tmp_path_factory, sp_path):
  """{kind: (model, a Hugging Face directory of it)}, as transformers' save_pretrained writes
  them (config.json + model.safetensors) plus spiece.model and tokenizer_config.json."""
  root = tmp_path_factory.mktemp("huggingface")
  saved = {}
  for kind in TRANSFORMERS_HEADS:
    model = build(kind, seed=2, summary_type="mean")  # transformers pools no other way
    labels = LABELS if kind in ("classifier", "tagger") else None
    directory = save_huggingface_checkpoint(model, str(root / kind), labels)
    shutil.copy(sp_path, os.path.join(directory, "spiece.model"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as handle:
      json.dump({"do_lower_case": True, "keep_accents": False}, handle)
    saved[kind] = model, directory
  return saved


def test_huggingface_backbone(huggingface_directories, batch):
  model, directory = huggingface_directories["backbone"]
  reloaded = XLNetModel.from_pretrained(directory)
  assert_same_outputs(model, reloaded, batch)
  assert reloaded.tokenizer.lower and XLNetTokenizer.from_pretrained(directory).lower


@pytest.mark.parametrize("kind", sorted(set(TRANSFORMERS_HEADS) - {"backbone"}))
def test_huggingface_heads(huggingface_directories, batch, kind):
  model, directory = huggingface_directories[kind]
  with open(os.path.join(directory, "config.json")) as handle:
    assert json.load(handle)["architectures"] == [TRANSFORMERS_HEADS[kind]]
  reloaded = HEAD_CLASSES[kind].from_pretrained(directory)
  assert_same_outputs(model, reloaded, inputs_for(kind, batch))
  if kind in ("classifier", "tagger"):
    assert reloaded.labels == LABELS
  assert reloaded.tokenizer.lower
  assert_same_backbone(model, XLNetModel.from_pretrained(directory), batch)


def test_huggingface_pytorch_bin_and_tf_h5(tmp_path, batch):
  """The other two weight files of a Hugging Face directory, sharded too."""
  model = build("pretrainer", seed=3)
  config = checkpoints.backbone_of(model).config
  tensors = huggingface_tensors(model)
  tf_weights = huggingface_tf_weights(
      {name: variable.numpy() for name, variable in original_variable_map(model).items()}, config)
  tf_weights["lm_loss/bias:0"] = model.lm_bias.numpy()
  writers = {
      "bin": lambda folder: write_pytorch_bin(str(folder / "pytorch_model.bin"), tensors),
      "h5": lambda folder: write_keras_h5(str(folder / "tf_model.h5"), tf_weights),
      "sharded_safetensors": lambda folder: write_sharded(
          str(folder), "model.safetensors", tensors,
          lambda path, part: write_safetensors(path, part, {"format": "pt"}))}
  for name, write in writers.items():
    folder = tmp_path / name
    folder.mkdir()
    write(folder)
    (folder / "config.json").write_text(json.dumps(huggingface_config(model)))
    reloaded = XLNetPretrainer.from_pretrained(str(folder))
    assert_same_outputs(model, reloaded, inputs_for("pretrainer", batch))
    assert reloaded.tokenizer is None


def test_a_transformers_head_without_an_xlnet_tf_class(huggingface_directories, tmp_path, batch):
  model, directory = huggingface_directories["backbone"]
  simple = tmp_path / "simple"
  shutil.copytree(directory, simple)
  values = json.loads((simple / "config.json").read_text())
  values["architectures"] = ["XLNetForQuestionAnsweringSimple"]
  (simple / "config.json").write_text(json.dumps(values))
  tensors = huggingface_tensors(model)
  tensors.update({"qa_outputs.weight": np.zeros([2, 32], np.float32),
                  "qa_outputs.bias": np.zeros([2], np.float32)})
  write_safetensors(str(simple / "model.safetensors"), tensors, {"format": "pt"})
  assert_same_outputs(model, XLNetModel.from_pretrained(str(simple)), batch)
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"holds transformers' XLNetForQuestionAnsweringSimple .*, not an "
                           r"XLNetQuestionAnswering"):
    XLNetQuestionAnswering.from_pretrained(str(simple))


# ---- the original TF1 release -----------------------------------------------------------------

def test_original_directory(tmp_path, sp_path, batch):
  """xlnet_config.json (the original keys) + xlnet_model.ckpt + spiece.model, as released."""
  model = build("pretrainer", seed=4)
  config = checkpoints.backbone_of(model).config
  checkpoints.save_original_checkpoint(model, str(tmp_path / "xlnet_model.ckpt"))
  config.to_json_file(str(tmp_path / "xlnet_config.json"), original_keys_only=True)
  shutil.copy(sp_path, tmp_path / "spiece.model")
  backbone = XLNetModel.from_pretrained(str(tmp_path), dropout=0.0, dropatt=0.0)
  assert_same_backbone(model, backbone, batch)
  assert not backbone.tokenizer.lower  # the original's models are cased
  # The LM bias the original pretraining keeps beside the backbone: the whole pretrainer.
  lm = XLNetPretrainer.from_pretrained(str(tmp_path), dropout=0.0, dropatt=0.0)
  assert_same_outputs(model, lm, inputs_for("pretrainer", batch))


# ---- a hub id, read offline from huggingface_hub's cache --------------------------------------

@pytest.fixture
def offline_hub_cache(tmp_path, monkeypatch):
  """An empty huggingface_hub cache under tmp_path, offline (no network is touched)."""
  from huggingface_hub import constants
  cache = tmp_path / "hf_home" / "hub"
  cache.mkdir(parents=True)
  monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
  monkeypatch.setenv("HF_HUB_CACHE", str(cache))
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  # huggingface_hub reads the variables once, on import (earlier in this process, maybe).
  monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
  monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
  return cache


def test_hub_id_from_the_cache(huggingface_directories, offline_hub_cache, batch):
  model, directory = huggingface_directories["classifier"]
  write_hub_cache(offline_hub_cache, "xlnet-tests/tiny-sst", [
      os.path.join(directory, name) for name in sorted(os.listdir(directory))])
  reloaded = XLNetClassifier.from_pretrained("xlnet-tests/tiny-sst")
  assert_same_outputs(model, reloaded, batch)
  assert reloaded.labels == LABELS and reloaded.tokenizer.lower
  assert_same_backbone(model, XLNetModel.from_pretrained("xlnet-tests/tiny-sst"), batch)
  assert XLNetTokenizer.from_pretrained("xlnet-tests/tiny-sst").vocab_size == 30
  with pytest.raises(FileNotFoundError, match=r"xlnet-tests/absent: no such directory, and no "
                                              r"snapshot of that Hugging Face hub id"):
    XLNetModel.from_pretrained("xlnet-tests/absent")


# ---- a new head over a backbone ---------------------------------------------------------------

def test_a_new_head_over_a_backbone_or_a_language_model(own_directories, huggingface_directories,
                                                        batch, caplog):
  caplog.set_level(logging.WARNING)
  model, directory = own_directories["backbone"]
  head = XLNetClassifier.from_pretrained(directory, num_classes=2, summary_type="mean",
                                         dropout=0.0)
  assert (head.num_classes, head.summary_type, head.labels) == (2, "mean", None)
  assert_same_backbone(model, head, batch)
  assert head.tokenizer.lower
  messages = [record.getMessage() for record in caplog.records]
  assert messages == [f"{directory}: holds a backbone only; a new XLNetClassifier over its "
                      "backbone, its head's weights initialized at random (train them before "
                      "use)"]
  # A pretrained language model (transformers' XLNetLMHeadModel): where fine-tuning starts.
  caplog.clear()
  lm, lm_directory = huggingface_directories["pretrainer"]
  tagger = XLNetTokenClassifier.from_pretrained(lm_directory, num_labels=5)
  assert_same_backbone(lm, tagger, batch)
  assert "holds transformers' XLNetLMHeadModel" in caplog.records[0].getMessage()
  with pytest.raises(UserInputError, match=r"holds no XLNetClassifier to read them from; a new "
                                           r"one needs num_classes"):
    XLNetClassifier.from_pretrained(directory)


# ---- contradictions and bad input -------------------------------------------------------------

def test_contradictions_name_both_sides(own_directories, huggingface_directories):
  _, directory = own_directories["classifier"]
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"XLNetClassifier.from_pretrained: num_classes=2 against the stored 3: "
                           r".* holds an XLNetClassifier \(.*head.json\)"):
    XLNetClassifier.from_pretrained(directory, num_classes=2)
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"multi_label=True against the stored False"):
    XLNetClassifier.from_pretrained(directory, multi_label=True)
  _, hf_directory = huggingface_directories["classifier"]
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"num_classes=4 against the stored 3: .* holds transformers' "
                           r"XLNetForSequenceClassification"):
    XLNetClassifier.from_pretrained(hf_directory, num_classes=4)
  _, qa_directory = own_directories["question_answering"]
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"holds an XLNetQuestionAnswering \(.*head.json\), not an "
                           r"XLNetClassifier"):
    XLNetClassifier.from_pretrained(qa_directory, num_classes=3)
  _, tagger_directory = huggingface_directories["tagger"]
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"holds transformers' XLNetForTokenClassification .*, not an "
                           r"XLNetPretrainer"):
    XLNetPretrainer.from_pretrained(tagger_directory)


def test_bad_inputs_are_one_clear_error(own_directories, tmp_path):
  missing = str(tmp_path / "missing")
  with pytest.raises(FileNotFoundError, match=rf"{missing}: no such directory; expected a "
                                              r"directory holding xlnet_tf's own files"):
    XLNetModel.from_pretrained(missing)
  (tmp_path / "notes").mkdir()
  (tmp_path / "notes" / "README.txt").write_text("not a model")
  with pytest.raises(UserInputError, match=r"notes: not a pretrained XLNet directory; expected "
                                           r".*config.json \+ model.safetensors.*; it holds: "
                                           r"README.txt"):
    XLNetClassifier.from_pretrained(str(tmp_path / "notes"), num_classes=2)
  with pytest.raises(UserInputError, match=r"README.txt: a file; expected a directory"):
    XLNetModel.from_pretrained(str(tmp_path / "notes" / "README.txt"))
  _, directory = own_directories["backbone"]
  with pytest.raises(UserInputError, match=r"XLNetModel.from_pretrained: unknown keyword "
                                           r"argument\(s\) \['num_classes'\]"):
    XLNetModel.from_pretrained(directory, num_classes=3)
  with pytest.raises(UserInputError, match=r"cannot override \['n_layer'\]"):
    XLNetModel.from_pretrained(directory, n_layer=3)
  with pytest.raises(FileNotFoundError, match=r"no spiece.model there"):
    XLNetTokenizer.from_pretrained(own_directories["classifier"][1])


def test_loading_stays_strict(own_directories, huggingface_directories, tmp_path):
  """A directory whose weights do not fit: CheckpointMismatchError naming the weight."""
  _, directory = huggingface_directories["backbone"]
  broken = tmp_path / "broken"
  shutil.copytree(directory, broken)
  tensors = huggingface_tensors(huggingface_directories["backbone"][0])
  del tensors["transformer.layer.1.ff.layer_2.bias"]
  write_safetensors(str(broken / "model.safetensors"), tensors, {"format": "pt"})
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r"missing: model/transformer/layer_1/ff/layer_2/bias "
                           r"\(transformer.layer.1.ff.layer_2.bias\)"):
    XLNetModel.from_pretrained(str(broken))


# ---- the padding mask's other names -----------------------------------------------------------

@pytest.mark.parametrize("kind", ["backbone", "classifier", "tagger", "multiple_choice"])
def test_attention_mask_and_padding_mask_are_input_mask(own_directories, batch, kind):
  model = own_directories[kind][0]
  inputs = inputs_for(kind, batch)
  expected = outputs(model, inputs)
  mask = inputs["input_mask"]
  without = {key: value for key, value in inputs.items() if key != "input_mask"}
  assert not np.array_equal(outputs(model, without)[0], expected[0])  # the mask matters
  for name in ("attention_mask", "padding_mask"):
    for ours, theirs in zip(expected, outputs(model, {**without, name: mask}), strict=True):
      np.testing.assert_array_equal(ours, theirs)
  with pytest.raises(UserInputError, match=r"the padding mask must be given once, as "
                                           r"input_mask, attention_mask or padding_mask .*; "
                                           r"got input_mask and attention_mask"):
    model({**inputs, "attention_mask": mask})


def test_a_task_head_reads_forward_over_a_pretrained_backbone(tmp_path, batch):
  """A backbone pretrained with bi_data (half of each batch read backward) gives task heads
  that read every row forward, an odd batch included; the pretrainer keeps bi_data."""
  backbone = XLNetModel(tiny_config(bi_data=True))
  randomize_weights(backbone, 4)
  directory = backbone.save_pretrained(str(tmp_path / "pretrained"))
  classifier = XLNetClassifier.from_pretrained(directory, num_classes=2)
  assert not classifier.backbone.config.bi_data
  forward = XLNetModel(tiny_config())
  forward.set_weights(backbone.get_weights())
  assert_same_outputs(forward, classifier.backbone, batch)  # batch 3: odd
  assert XLNetPretrainer.from_pretrained(directory).backbone.config.bi_data
  assert XLNetTokenClassifier.from_pretrained(directory, num_labels=2,
                                              bi_data=True).backbone.config.bi_data


def test_a_fast_tokenizer_file_alone_is_said(huggingface_directories, tmp_path, caplog):
  """transformers 5 saves tokenizer.json only: the model loads without a tokenizer, and one
  line says why and what to copy."""
  _, directory = huggingface_directories["classifier"]
  copy = tmp_path / "transformers_5"
  shutil.copytree(directory, copy)
  os.remove(copy / "spiece.model")
  (copy / "tokenizer.json").write_text("{}")
  with caplog.at_level(logging.WARNING):
    head = XLNetClassifier.from_pretrained(str(copy))
  assert head.tokenizer is None and head.preprocessor is None
  assert any("holds transformers' tokenizer.json but no spiece.model" in record.getMessage()
             for record in caplog.records)
