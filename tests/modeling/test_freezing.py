"""XLNetModel.freeze_layers: the embedding, the first N blocks and their rows of the stacked
per-layer variables stay bit-identical through training (Model.fit and a custom loop, weight
decay on, a high learning rate); everything else moves."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from layer_checks import assert_keras_file_round_trip
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import XLNetClassifier, XLNetModel, checkpoints
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.modeling.freezing import STACKED_VARIABLES
from xlnet_tf.training.optimization import create_optimizer

FROZEN = 1  # of 3 blocks


def classifier(frozen_layers=FROZEN, untie_r=True):
  keras.utils.set_random_seed(1)
  backbone = XLNetModel(tiny_config(n_layer=3, untie_r=untie_r, dropout=0.1, dropatt=0.1))
  backbone.freeze_layers(frozen_layers)
  return XLNetClassifier(backbone, num_classes=2)


def training_batch(rng):
  inputs = padded_pair_batch(rng, 4, 10, 50, pad_lengths=[3, 0, 1, 0])
  return inputs, np.array([0, 1, 1, 0], np.int32)


def snapshot(model):
  return {v.path: np.array(v.numpy()) for v in model.weights}


def frozen_and_trained(backbone):
  """(paths fixed whole, paths trained whole, stacked variables: rows fixed / rows trained)."""
  frozen = [backbone.word_embedding.path, backbone.mask_emb.path]
  frozen += [v.path for block in backbone.blocks[:FROZEN] for v in block.weights]
  trained = [v.path for block in backbone.blocks[FROZEN:] for v in block.weights]
  stacked = [getattr(backbone, name).path for name in STACKED_VARIABLES]
  return frozen, trained, stacked


def fit_steps(model, inputs, labels, steps):
  """Keras Model.fit, as user code runs it with the project's optimizer."""
  model.compile(optimizer=create_optimizer(model, 0.1, 100, weight_decay=0.5,
                                           lr_layer_decay_rate=0.8),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.fit(tf.data.Dataset.from_tensors((inputs, labels)).repeat(steps), verbose=0)


def loop_steps(model, inputs, labels, steps, optimizer=None):
  """A custom loop over model.trainable_variables (the fine-tuning loop's pattern)."""
  optimizer = optimizer or create_optimizer(model, 0.1, 100, weight_decay=0.5)
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @tf.function
  def step(x, y):
    with tf.GradientTape() as tape:
      value = loss(y, model(x, training=True))
    grads = tape.gradient(value, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

  for _ in range(steps):
    step(inputs, labels)


@pytest.mark.parametrize("train", [
    fit_steps, loop_steps,
    lambda m, x, y, n: loop_steps(m, x, y, n, keras.optimizers.Adam(0.1))])  # no weight decay
def test_frozen_weights_stay_bit_identical_and_the_rest_moves(rng, train):
  model = classifier()
  inputs, labels = training_batch(rng)
  before = snapshot(model)
  train(model, inputs, labels, 3)
  after = snapshot(model)
  frozen, trained, stacked = frozen_and_trained(model.backbone)
  for path in frozen:
    np.testing.assert_array_equal(after[path], before[path], err_msg=path)
  for path in stacked:
    np.testing.assert_array_equal(after[path][:FROZEN], before[path][:FROZEN], err_msg=path)
    assert (after[path][FROZEN:] != before[path][FROZEN:]).mean() > 0.5, path
  for path in trained + [model.logit.kernel.path]:
    assert (after[path] != before[path]).mean() > 0.5, path


def test_freezing_nothing_but_the_embedding_and_everything_again(rng):
  model = classifier(frozen_layers=0)
  inputs, labels = training_batch(rng)
  before = snapshot(model)
  loop_steps(model, inputs, labels, 2)
  after = snapshot(model)
  np.testing.assert_array_equal(after["transformer/word_embedding"],
                                before["transformer/word_embedding"])
  assert (after["transformer/r_w_bias"][0] != before["transformer/r_w_bias"][0]).all()
  model.backbone.freeze_layers(None)
  assert len(model.trainable_variables) == len(classifier(None).trainable_variables)


def test_tied_biases_are_frozen_only_with_every_block():
  assert classifier(frozen_layers=2, untie_r=False).backbone.r_w_bias.trainable
  frozen_all = classifier(frozen_layers=3, untie_r=False).backbone
  assert not frozen_all.r_w_bias.trainable and frozen_all.seg_embed.trainable  # seg_embed: [L]
  assert [v.path for v in frozen_all.trainable_variables] == ["transformer/seg_embed"]


def test_the_frozen_count_survives_keras_files_and_checkpoints_load_in_either_state(
    tmp_path, rng):
  model = classifier()
  inputs, _ = training_batch(rng)
  restored = assert_keras_file_round_trip(model, lambda m: m(inputs), tmp_path / "m.keras",
                                          atol=0)
  assert restored.backbone.frozen_layers == FROZEN
  checkpoints.save_pretrained(model, str(tmp_path / "own"))  # frozen -> not frozen: same values
  unfrozen = classifier(frozen_layers=None)
  checkpoints.load_own_checkpoint(unfrozen, str(tmp_path / "own"))
  np.testing.assert_array_equal(unfrozen(inputs), model(inputs))


@pytest.mark.parametrize("count", [-1, 4, 1.5, True])
def test_a_count_outside_the_layers_is_refused_naming_it_and_n_layer(count):
  with pytest.raises(UserInputError, match=rf"^freeze_layers must be an integer from 0 to the "
                     rf"model's n_layer \(3\); got {count}$"):
    classifier(frozen_layers=count)
