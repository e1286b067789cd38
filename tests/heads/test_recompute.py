"""Fine-tuning heads over a backbone with recompute_blocks (--recompute): the loss and every
gradient equal the model's without it, dropout on (the recomputed pass redraws the forward's
masks), frozen blocks included. tests/modeling/test_backbone.py checks the backbone's own
outputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetClassifier, XLNetModel, XLNetTokenClassifier


def head_pair(build_head, frozen_layers):
  """The same head twice, same weights and dropout generators, recompute off and on."""
  models = []
  for recompute in (False, True):
    keras.utils.set_random_seed(7)
    backbone = XLNetModel(tiny_config(dropout=0.2, dropatt=0.1), recompute_blocks=recompute,
                          frozen_layers=frozen_layers)
    models.append(build_head(backbone))
  randomize_weights(models[0], 3)
  models[1].set_weights(models[0].get_weights())
  return models


HEADS = {
    "classifier_attn_summary": (lambda b: XLNetClassifier(b, 3, summary_type="attn"),
                                lambda rng: rng.integers(0, 3, [3])),
    "token_classifier": (lambda b: XLNetTokenClassifier(b, 4),
                         lambda rng: rng.integers(0, 4, [3, 9])),
}


@pytest.mark.parametrize("head, frozen_layers", [("classifier_attn_summary", 1),
                                                  ("token_classifier", None)])
def test_recomputed_head_gradients_equal_the_stored_ones(rng, head, frozen_layers):
  build_head, labels_of = HEADS[head]
  plain, recomputing = head_pair(build_head, frozen_layers)
  inputs = {k: tf.constant(v) for k, v in
            padded_pair_batch(rng, 3, 9, 50, pad_lengths=[2, 0, 4]).items()}
  labels = tf.constant(labels_of(rng))
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def loss_and_gradients(model):
    @tf.function
    def compute(batch):
      with tf.GradientTape() as tape:
        value = loss(labels, model(batch, training=True))
      return value, tape.gradient(value, model.trainable_variables)
    return compute

  plain_step = loss_and_gradients(plain)
  expected_loss, expected = plain_step(inputs)
  got_loss, got = loss_and_gradients(recomputing)(inputs)
  np.testing.assert_allclose(got_loss.numpy(), expected_loss.numpy(), rtol=1e-6)
  assert [v.path for v in recomputing.trainable_variables] == [
      v.path for v in plain.trainable_variables]
  for variable, want, have in zip(plain.trainable_variables, expected, got):
    if want is None:  # mask_emb: no query stream
      assert have is None, variable.path
      continue
    want, have = tf.convert_to_tensor(want).numpy(), tf.convert_to_tensor(have).numpy()
    np.testing.assert_allclose(have, want, atol=1e-5, err_msg=variable.path)
    if variable.path == "transformer/seg_embed" and frozen_layers:
      assert not want[:frozen_layers].any() and want[frozen_layers:].any()
  again, _ = plain_step(inputs)  # dropout is live: another step draws other masks
  assert abs(again.numpy() - expected_loss.numpy()) > 1e-4
