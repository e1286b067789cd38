import keras
import numpy as np
import pytest

from checkpoint_files import (huggingface_tensors, original_weights, write_huggingface_directory,
                              write_tf1_checkpoint)
from layer_checks import assert_keras_file_round_trip
from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights, xlnet_forward
from xlnet_tf import XLNetModel, checkpoints
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.summary import SequenceSummary


def numpy_summary(kind, sequence, mask, layer):
  if kind == "last":
    pooled = sequence[:, -1]
  elif kind == "first":
    pooled = sequence[:, 0]
  elif kind == "mean":
    pooled = sequence.mean(1)
  else:
    k = layer.attention_kernels
    query = np.einsum("d,dnh->nh", layer.summary_bias.numpy(), k["q"].numpy())
    keys = np.einsum("btd,dnh->btnh", sequence, k["k"].numpy())
    values = np.einsum("btd,dnh->btnh", sequence, k["v"].numpy())
    score = np.einsum("nh,btnh->bnt", query, keys) / np.sqrt(layer.d_head)
    score = np.where(mask[:, None, :] == 0, -1e30, score)
    prob = np.exp(score - score.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    out = np.einsum("bnh,dnh->bd", np.einsum("bnt,btnh->bnh", prob, values), k["o"].numpy())
    pooled = (out - out.mean(-1, keepdims=True)) / np.sqrt(out.var(-1, keepdims=True) + 1e-12)
  kernel, bias = layer.projection.get_weights()
  return np.tanh(pooled @ kernel + bias)


@pytest.mark.parametrize("kind", ["last", "first", "mean", "attn"])
def test_sequence_summary_matches_numpy(kind, rng):
  keras.utils.set_random_seed(0)
  layer = SequenceSummary(kind, n_head=2, d_head=4, dropout=0.0, dropatt=0.0, init_std=0.5)
  sequence = rng.standard_normal([3, 5, 8]).astype(np.float32)
  mask = np.array([[0, 0, 1, 1, 1], [1] * 5, [0, 1, 1, 1, 1]], np.float32)
  out = layer(sequence, mask).numpy()
  np.testing.assert_allclose(out, numpy_summary(kind, sequence, mask, layer), atol=1e-5)


def _expected_logits(weights, config, inputs, kernel, bias, logit_kernel, logit_bias):
  sequence = xlnet_forward(weights, config, **inputs)["sequence_output"]
  return np.tanh(sequence[:, -1] @ kernel + bias) @ logit_kernel + logit_bias


def test_loads_original_head_names_and_reproduces_logits(tmp_path, rng):
  config = tiny_config()
  weights = original_weights(config, seed=3)
  head = {"model/sequnece_summary/summary/kernel": 0.3 * rng.standard_normal([32, 32]),
          "model/sequnece_summary/summary/bias": 0.1 * rng.standard_normal([32]),
          "model/classification_mnli/logit/kernel": rng.standard_normal([32, 3]),
          "model/classification_mnli/logit/bias": rng.standard_normal([3])}
  head = {k: v.astype(np.float32) for k, v in head.items()}
  prefix = write_tf1_checkpoint({**weights, **head, "model/lm_loss/bias": np.zeros(50, np.float32)},
                                str(tmp_path / "c"))
  model = XLNetClassifier(XLNetModel(config), 3, task_name="mnli")
  report = checkpoints.load_original_checkpoint(model, prefix)
  assert "model/lm_loss/bias" in report.skipped
  inputs = padded_pair_batch(rng, 3, 8, 50, pad_lengths=[0, 2, 1])
  expected = _expected_logits(weights, config, inputs, *head.values())
  np.testing.assert_allclose(model(inputs).numpy(), expected, atol=1e-4)
  with pytest.raises(checkpoints.CheckpointMismatchError, match="classification_sst-2"):
    checkpoints.load_original_checkpoint(XLNetClassifier(XLNetModel(config), 3,
                                                         task_name="sst-2"), prefix)


def test_loads_huggingface_head_names(tmp_path, rng):
  config = tiny_config()
  weights = original_weights(config, seed=4)
  tensors = huggingface_tensors(weights, config)
  summary_kernel = (0.3 * rng.standard_normal([32, 32])).astype(np.float32)
  logit_kernel = rng.standard_normal([32, 2]).astype(np.float32)
  tensors.update({"sequence_summary.summary.weight": summary_kernel.T.copy(),
                  "sequence_summary.summary.bias": np.zeros(32, np.float32),
                  "logits_proj.weight": logit_kernel.T.copy(),
                  "logits_proj.bias": np.ones(2, np.float32)})
  write_huggingface_directory(str(tmp_path), tensors, config)
  model = XLNetClassifier(XLNetModel(config), 2)
  checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  inputs = padded_pair_batch(rng, 2, 8, 50, pad_lengths=[1, 0])
  expected = _expected_logits(weights, config, inputs, summary_kernel, np.zeros(32),
                              logit_kernel, np.ones(2))
  np.testing.assert_allclose(model(inputs).numpy(), expected, atol=1e-4)


def test_regression_and_keras_round_trip(tmp_path, rng):
  model = XLNetClassifier(XLNetModel(tiny_config()), 1, summary_type="attn", task_name="sts-b")
  randomize_weights(model.backbone, 0)
  inputs = padded_pair_batch(rng, 2, 8, 50, pad_lengths=[0, 3])
  scores = model(inputs).numpy()
  assert scores.shape == (2,)
  assert "model/regression_sts-b/logit/kernel" in model.original_head_variables()
  assert_keras_file_round_trip(model, lambda m: m(inputs), tmp_path / "m.keras")


def test_long_documents_depend_on_earlier_segments_through_memory(sp_model):
  from xlnet_tf.tasks.classification import encode_long_documents
  from xlnet_tf.text.tokenizer import XLNetTokenizer
  tokenizer = XLNetTokenizer(sp_model)
  words = "the class statement defines a new type of object with methods and values".split()
  text = " ".join(words * 3)  # about 40 tokens: 3 segments of 14
  changed = "module" + text[len("the"):]  # only the first word differs
  # Two layers see two segments back: memory holds each layer's input from the previous one.
  chunk = -(-len(tokenizer.encode(text)) // 3) + 1  # 3 chunks hold the text, 2 do not
  features = encode_long_documents(tokenizer, [text, changed], segment_length=chunk + 2,
                                   num_segments=3)
  assert features["input_ids"].shape == (2, 3, chunk + 2)
  # The change sits in the first segment only; the last segments are identical.
  np.testing.assert_array_equal(features["input_ids"][0, 1:], features["input_ids"][1, 1:])
  assert (features["input_ids"][0, 0] != features["input_ids"][1, 0]).any()
  config = tiny_config(n_token=tokenizer.vocab_size, mem_len=chunk + 2)
  model = XLNetClassifier(XLNetModel(config), 2)
  randomize_weights(model, 1)  # head included: every input visibly moves the logits
  logits = model(features).numpy()
  assert np.abs(logits[0] - logits[1]).max() > 1e-3, "memory carries the first segment"
  # Read alone (no memory), the last segments give the same decision: the difference above
  # came from text that is only in earlier segments.
  single = model({k: v[:, -1] for k, v in features.items()}).numpy()
  np.testing.assert_allclose(single[0], single[1], atol=1e-5)
