"""A classifier travels transformers -> xlnet_tf -> transformers, fine-tuned on each side:
transformers fine-tunes a tiny XLNetForSequenceClassification and saves it with its tokenizer;
XLNetClassifier.from_pretrained reads it with its labels and tokenizer and, on raw strings,
computes transformers' logits; Keras fine-tunes it on raw strings; save_pretrained and
run/convert_checkpoint.py --output_format=huggingface write it back; transformers' Auto classes
load every weight, the labels and a tokenizer that gives our ids and segments, and compute
our logits.
Skipped where torch or transformers is not importable."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from cli_output import run_tool
from xlnet_tf import XLNetClassifier, XLNetTokenizer
from xlnet_tf.checkpoints import backbone_of

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LABELS = ["negative", "positive"]
# Plain lower-case words and periods, where the two tokenizers agree (transformers 5 keeps a
# piece ending in a digit and a comma whole and always strips accents: not tested here).
# Four lengths, so each batch is padded (on the left, both libraries) by different amounts.
TEXTS = ["the function returns a new list of the values.",
         "a class.",
         "each module has its own name space and the name of the module is a string.",
         "the loop ends when the list is empty."]
TRAINING_TEXTS = ["the value is a string.", "this function is not defined.",
                  "the list of objects.", "an error is raised when the file is closed."]
TRAINING_LABELS = [1, 0, 1, 0]
TOLERANCE = 1e-4
# transformers 5's XLNetTokenizer, as transformers saves it, returns no token_type_ids unless
# asked, and XLNet then computes without segments: XLNet's inputs are asked for by name here.
# (A directory our conversion writes names them in model_input_names: asked for by default.)
SEGMENTS = {"return_token_type_ids": True}
# Weights of test_huggingface_parity's scale: the logits differ from text to text by far more
# than TOLERANCE, and erf and tanh gelu part visibly (at transformers' usual 0.02 both are
# nearly constant and a wrong form or padding would pass).
WEIGHT_SCALE = 0.5


def transformers_fine_tuned_directory(directory, sp_model):
  """A tiny XLNetForSequenceClassification fine-tuned 5 AdamW steps (dropout on), saved with
  its tokenizer by transformers; returns (the directory, the model in eval mode, the
  tokenizer)."""
  source = directory / "sentencepiece"
  source.mkdir()
  shutil.copy(sp_model, source / "spiece.model")
  tokenizer = transformers.XLNetTokenizer.from_pretrained(str(source))
  config = transformers.XLNetConfig(
      vocab_size=len(tokenizer), d_model=32, n_layer=2, n_head=4, d_inner=48,
      ff_activation="gelu", dropout=0.1, initializer_range=WEIGHT_SCALE, num_labels=len(LABELS),
      id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})
  torch.manual_seed(0)
  model = transformers.XLNetForSequenceClassification(config)
  initial = {name: value.clone() for name, value in model.state_dict().items()}
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
  batch = tokenizer(TRAINING_TEXTS, padding=True, return_tensors="pt", **SEGMENTS)
  model.train()
  for _ in range(5):
    loss = model(**batch, labels=torch.tensor(TRAINING_LABELS)).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
  moved = [name for name, value in model.state_dict().items()
           if not torch.equal(value, initial[name])]
  assert "logits_proj.weight" in moved and "transformer.layer.1.ff.layer_1.weight" in moved
  model.eval()
  saved = directory / "transformers"
  model.save_pretrained(str(saved))
  tokenizer.save_pretrained(str(saved))
  # transformers 5 saves tokenizer.json only (its save_vocabulary: the SentencePiece model as
  # tokenizer.model); we read spiece.model, which the XLNet repositories on the hub hold.
  shutil.copy(tokenizer.vocab_file, saved / "spiece.model")
  return str(saved), model, tokenizer


def transformers_logits(model, tokenizer, texts, **options):
  with torch.no_grad():
    return model(**tokenizer(texts, padding=True, return_tensors="pt", **options)).logits.numpy()


def transformers_packing(tokenizer, texts, **options):
  """transformers' (input_ids, token_type_ids) lists of `texts`, unpadded."""
  encoded = tokenizer(texts, **options)
  return encoded["input_ids"], encoded["token_type_ids"]


def unpadded_packing(features):
  """Our packed (input_ids, segment_ids) as lists, the (left) padding removed."""
  masks = np.asarray(features["input_mask"]) > 0
  return tuple([row[mask].tolist() for row, mask in zip(np.asarray(features[name]), masks)]
               for name in ("input_ids", "segment_ids"))


def trainable_values(model):
  return {variable.path: variable.numpy() for variable in model.trainable_weights}


@pytest.fixture(scope="module")
def chain(tmp_path_factory, sp_model):
  """Every stage's model and directory, built once for the tests below."""
  root = tmp_path_factory.mktemp("transformers_chain")
  directory, hf_model, hf_tokenizer = transformers_fine_tuned_directory(root, sp_model)
  stages = {"transformers_directory": directory,
            "transformers_logits": transformers_logits(hf_model, hf_tokenizer, TEXTS,
                                                       **SEGMENTS),
            "transformers_packing": transformers_packing(hf_tokenizer, TEXTS, **SEGMENTS)}

  classifier = XLNetClassifier.from_pretrained(directory)
  stages["loaded"] = {"labels": classifier.labels, "tokenizer": classifier.tokenizer,
                      "preprocessor": classifier.preprocessor,
                      "ff_activation": backbone_of(classifier).config.ff_activation,
                      "packing": unpadded_packing(classifier.preprocessor(TEXTS)),
                      "logits": classifier.predict(TEXTS, verbose=0)}

  before = trainable_values(classifier)
  keras.utils.set_random_seed(0)
  classifier.compile(optimizer=keras.optimizers.Adam(1e-3),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  history = classifier.fit(TRAINING_TEXTS, np.array(TRAINING_LABELS), batch_size=4, epochs=3,
                           verbose=0)
  after = trainable_values(classifier)
  stages.update(losses=history.history["loss"], weights_before=before, weights_after=after,
                fine_tuned_logits=classifier.predict(TEXTS, verbose=0),
                fine_tuned_packing=unpadded_packing(classifier.preprocessor(TEXTS)))

  own = str(root / "own")
  classifier.save_pretrained(own)
  converted = str(root / "converted")
  stages["conversion"] = run_tool("run/convert_checkpoint.py", f"--input={own}",
                                  f"--output={converted}", "--output_format=huggingface")
  stages.update(own_directory=own, converted_directory=converted)
  return stages


def test_our_classifier_reads_a_transformers_directory_as_transformers_computes(chain):
  """Labels from id2label, the tokenizer and a preprocessor from the directory, erf gelu from
  ff_activation "gelu"; the same ids and segments and, on raw strings, transformers' logits."""
  loaded = chain["loaded"]
  assert loaded["labels"] == LABELS
  assert isinstance(loaded["tokenizer"], XLNetTokenizer)
  assert loaded["tokenizer"].sp_path == os.path.join(chain["transformers_directory"],
                                                     "spiece.model")
  assert loaded["preprocessor"] is not None
  assert loaded["preprocessor"].tokenizer is loaded["tokenizer"]
  assert loaded["ff_activation"] == "gelu_exact"
  assert loaded["packing"] == chain["transformers_packing"]
  assert len({len(ids) for ids in loaded["packing"][0]}) == len(TEXTS)  # padded apart
  assert loaded["logits"].shape == (len(TEXTS), len(LABELS))
  margins = chain["transformers_logits"][:, 1] - chain["transformers_logits"][:, 0]
  assert np.ptp(margins) > 100 * TOLERANCE  # the texts' logits differ: the comparison tells
  np.testing.assert_allclose(loaded["logits"], chain["transformers_logits"], atol=TOLERANCE,
                             rtol=0)


def test_fit_on_raw_strings_changes_the_weights_and_the_logits(chain):
  before, after = chain["weights_before"], chain["weights_after"]
  assert sorted(before) == sorted(after)
  assert [name for name in before if np.array_equal(before[name], after[name])] == []
  assert all(np.isfinite(chain["losses"]))
  assert chain["fine_tuned_packing"] == chain["loaded"]["packing"]
  assert np.max(np.abs(chain["fine_tuned_logits"] - chain["loaded"]["logits"])) > 10 * TOLERANCE


def test_the_converted_classifier_loads_in_transformers_and_computes_ours(chain):
  result = chain["conversion"]
  assert result.returncode == 0, result.stderr
  converted = chain["converted_directory"]
  settings = json.loads(open(os.path.join(converted, "config.json")).read())
  assert (settings["architectures"], settings["ff_activation"]) == (
      ["XLNetForSequenceClassification"], "gelu")

  model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
      converted, output_loading_info=True)
  assert not any(info.values()), info  # missing, unexpected, mismatched keys, errors
  assert type(model).__name__ == "XLNetForSequenceClassification"
  assert model.config.id2label == dict(enumerate(LABELS))
  assert model.config.label2id == {name: i for i, name in enumerate(LABELS)}
  model.eval()

  tokenizer = transformers.AutoTokenizer.from_pretrained(converted)  # called as it is
  assert tokenizer.padding_side == "left"
  assert transformers_packing(tokenizer, TEXTS) == chain["fine_tuned_packing"]
  np.testing.assert_allclose(transformers_logits(model, tokenizer, TEXTS),
                             chain["fine_tuned_logits"], atol=TOLERANCE, rtol=0)
