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


SEP, CLS, PAD = 4, 3, 0  # ids of the hand-built documents below (n_token 50)


def hand_packed_documents(documents, num_segments, length):
  """[B, S, T] features laid out by hand: `tokens <sep> <cls>` right-aligned in S * T positions
  (padding first), cut into S segments; and each document's real tokens and segment ids."""
  rows, real = [], []
  for tokens in documents:
    ids, segments = list(tokens) + [SEP, CLS], [0] * (len(tokens) + 1) + [2]
    pad = num_segments * length - len(ids)
    rows.append(([PAD] * pad + ids, [4] * pad + segments, [0.0] * pad + [1.0] * len(ids)))
    real.append((ids, segments, pad))
  features = {key: np.array([row[index] for row in rows], dtype).reshape(
      len(documents), num_segments, length) for index, (key, dtype) in enumerate(
          (("input_ids", np.int32), ("segment_ids", np.int32), ("input_mask", np.float32)))}
  return features, real


def reference_long_document_logits(weights, config, real, length, head):
  """The NumPy reference read segment by segment over each document's real tokens only
  (padding dropped, not masked): its first segment is just shorter. The same as masking the
  padding, memory included, if the model does that right."""
  kernel, bias, logit_kernel, logit_bias = head
  logits = []
  for ids, segments, pad in real:
    mems = None
    positions = np.arange(pad, pad + len(ids))
    for start in range(0, positions[-1] + 1, length):
      inside = (positions >= start) & (positions < start + length)
      if not inside.any():
        continue
      out = xlnet_forward(weights, config, np.array([ids])[:, inside],
                          np.array([segments])[:, inside], mems=mems)
      mems = out["new_mems"]
    logits.append(np.tanh(out["sequence_output"][0, -1] @ kernel + bias) @ logit_kernel
                  + logit_bias)
  return np.array(logits)


def test_long_documents_match_the_reference_with_padding_masked_in_memory(tmp_path, rng):
  length, num_segments = 8, 3
  config = tiny_config(mem_len=6)  # shorter than a segment: memory keeps the last 6 states
  weights = original_weights(config, seed=5)
  head = [0.3 * rng.standard_normal([32, 32]), 0.1 * rng.standard_normal([32]),
          rng.standard_normal([32, 3]), rng.standard_normal([3])]
  head = [value.astype(np.float32) for value in head]
  names = ["model/sequnece_summary/summary/kernel", "model/sequnece_summary/summary/bias",
           "model/classification_task/logit/kernel", "model/classification_task/logit/bias"]
  prefix = write_tf1_checkpoint({**weights, **dict(zip(names, head))}, str(tmp_path / "c"))
  model = XLNetClassifier(XLNetModel(config), 3, max_segments=num_segments)
  checkpoints.load_original_checkpoint(model, prefix)
  # 3 segments, 2 (the first partly padding), the last one only (two padding segments).
  documents = [rng.integers(10, 50, size) for size in (22, 11, 5)]
  features, real = hand_packed_documents(documents, num_segments, length)
  expected = reference_long_document_logits(weights, config, real, length, head)
  np.testing.assert_allclose(model(features).numpy(), expected, atol=1e-4)
  # A document in its last segment reads as that segment alone; more padding segments in
  # front change nothing.
  np.testing.assert_allclose(model({k: v[2:, -1] for k, v in features.items()}).numpy(),
                             expected[2:], atol=1e-4)
  more, _ = hand_packed_documents(documents[1:], num_segments + 1, length)
  np.testing.assert_allclose(model(more).numpy(), expected[1:], atol=1e-4)


def test_max_segments_is_saved_and_needs_memory(tmp_path):
  model = XLNetClassifier(XLNetModel(tiny_config(mem_len=8)), 2, max_segments=4)
  checkpoints.save_pretrained(model, str(tmp_path))
  loaded = checkpoints.load_pretrained_head(str(tmp_path), XLNetClassifier)
  assert (loaded.max_segments, loaded.backbone.config.mem_len) == (4, 8)
  with pytest.raises(ValueError, match=r"^max_segments must be 1 for a backbone without memory"):
    XLNetClassifier(XLNetModel(tiny_config()), 2, max_segments=2)
  with pytest.raises(ValueError, match=r"^max_segments must be an integer >= 1; got 0"):
    XLNetClassifier(XLNetModel(tiny_config(mem_len=8)), 2, max_segments=0)
