"""The permutation LM's gradients against finite differences of an independent float64 loss.

A defect check for XLNet's case: if the two-stream loss sent wrong gradients to the
content stream (which fine-tuning reads, and which the permutation LM reaches only through the
query stream's attention), perm would transfer worse than it should. The loss here is the
pretraining head's (XLNetPretrainer.pretraining_loss: mean cross-entropy over the real
targets), its gradients TensorFlow's; the reference is tests/xlnet_reference.py's float64
forward pass, logits through the tied embedding plus lm_loss/bias, differentiated by central
differences, element by element, on weights of every kind: the query stream's start
(mask_emb), the word embedding (inputs and tied output), both layers' projections, the
feed-forward, the attention biases, the segment embedding, and the output bias.
"""

import numpy as np
import pytest
import tensorflow as tf

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, \
    tiny_config
from xlnet_reference import model_weights_by_original_name, randomize_weights, xlnet_forward
from xlnet_tf import XLNetModel
from xlnet_tf.heads import XLNetPretrainer

LENGTH = 8
PREFIX = "model/transformer/"
CHECKED = ["mask_emb/mask_emb", "word_embedding/lookup_table", "layer_0/rel_attn/q/kernel",
           "layer_0/rel_attn/k/kernel", "layer_0/rel_attn/r/kernel",
           "layer_1/rel_attn/v/kernel", "layer_1/ff/layer_1/kernel", "r_w_bias", "r_r_bias",
           "r_s_bias", "seg_embed", "layer_1/rel_attn/LayerNorm/gamma"]


def reference_loss(weights, lm_bias, config, inputs, targets, target_mask):
  """Mean cross-entropy of the targets, float64, from the reference's query stream."""
  query = xlnet_forward(weights, config, **inputs)["query_output"]  # [B, P, D]
  logits = query @ weights[PREFIX + "word_embedding/lookup_table"].T + lm_bias
  top = logits.max(-1, keepdims=True)
  log_softmax = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
  picked = np.take_along_axis(log_softmax, targets[..., None], axis=-1)[..., 0]
  return -(picked * target_mask).sum() / target_mask.sum()


def test_two_stream_loss_gradients_match_finite_differences_of_the_float64_reference():
  rng = np.random.default_rng(3)
  config = tiny_config(n_token=40)
  model = XLNetPretrainer(XLNetModel(config))
  inputs = padded_pair_batch(rng, 3, LENGTH, config.n_token, pad_lengths=[0, 2, 1])
  perm_mask, targets, _ = factorization_perm_mask(rng, 3, LENGTH, 3)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, LENGTH, 1))
  model(inputs)
  randomize_weights(model.backbone, seed=5)
  model.lm_bias.assign(rng.normal(0, 0.3, config.n_token).astype(np.float32))
  target_ids = np.take_along_axis(inputs["input_ids"], targets, axis=1)
  batch = {"target": np.pad(target_ids, [(0, 0), (0, 1)]),
           "target_mask": np.pad(np.ones_like(target_ids, np.float32), [(0, 0), (0, 1)])}

  with tf.GradientTape() as tape:
    loss = model.pretraining_loss(model(inputs, training=True), batch)
  variables = {name: variable for name, variable in zip(
      model_weights_by_original_name(model.backbone), model.backbone.weights)}
  checked = [variables[PREFIX + name] for name in CHECKED] + [model.lm_bias]
  gradients = [np.asarray(g) for g in tape.gradient(loss, checked)]

  weights = {name: value.astype(np.float64)
             for name, value in model_weights_by_original_name(model.backbone).items()}
  lm_bias = model.lm_bias.numpy().astype(np.float64)

  def loss_at(weights, lm_bias):
    return reference_loss(weights, lm_bias, config, inputs, batch["target"], batch["target_mask"])

  assert loss.numpy() == pytest.approx(loss_at(weights, lm_bias), rel=1e-5)
  step = 1e-5
  for name, gradient in zip(CHECKED + ["lm_loss/bias"], gradients):
    values = lm_bias if name == "lm_loss/bias" else weights[PREFIX + name]
    # Elements with the largest gradients (where an error would show) and random ones.
    flat = np.argsort(-np.abs(gradient).ravel())[:3].tolist() + rng.choice(
        gradient.size, 3, replace=False).tolist()
    for index in flat:
      where = np.unravel_index(index, gradient.shape)
      original = values[where]
      values[where] = original + step
      above = loss_at(weights, lm_bias)
      values[where] = original - step
      below = loss_at(weights, lm_bias)
      values[where] = original
      numeric = (above - below) / (2 * step)
      assert gradient[where] == pytest.approx(numeric, rel=2e-3, abs=2e-6), (name, where)
