import keras
import numpy as np
import tensorflow as tf

from model_inputs import tiny_config
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.training.optimization import (WarmupLinearDecay, XLNetAdamW, create_optimizer,
                                            layerwise_multipliers)


def test_warmup_then_linear_decay():
  schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=110)
  values = [float(schedule(step)) for step in (0, 5, 10, 60, 110, 200)]
  np.testing.assert_allclose(values, [0, 5e-4, 1e-3, 5e-4, 0, 0], atol=1e-9)


def _one_step(model, optimizer, seed=0):
  """One update with the same random gradient magnitudes for every variable."""
  rng = np.random.default_rng(seed)
  before = {v.path: v.numpy().copy() for v in model.trainable_variables}
  gradients = [tf.constant(rng.standard_normal(v.shape).astype(np.float32))
               for v in model.trainable_variables]
  optimizer.apply_gradients(zip(gradients, model.trainable_variables))
  return {v.path: np.abs(v.numpy() - before[v.path]).mean() for v in model.trainable_variables}


def test_lower_layers_really_move_less():
  model = XLNetPretrainer(tiny_config(n_layer=3))
  optimizer = create_optimizer(model, 1e-2, 100, lr_layer_decay_rate=0.5, weight_decay=0.0)
  moved = _one_step(model, optimizer)
  top = moved["transformer/layer_2/ff/layer_1/kernel"]
  np.testing.assert_allclose(moved["transformer/layer_1/ff/layer_1/kernel"] / top, 0.5,
                             rtol=0.02)
  np.testing.assert_allclose(moved["transformer/layer_0/ff/layer_1/kernel"] / top, 0.25,
                             rtol=0.02)
  np.testing.assert_allclose(moved["transformer/word_embedding"] / top, 0.125, rtol=0.05)
  r_w_bias = model.backbone.r_w_bias.numpy()  # untied [L, N, H]: per-layer multipliers
  assert r_w_bias.shape[0] == 3


def test_scaling_gradients_is_a_no_op_under_adam():
  """Why the multiplier must scale the learning rate: Adam cancels a gradient scale."""
  moved = []
  for scale in (1.0, 0.25):
    variable = keras.Variable(np.ones(4, np.float32), name="w")
    optimizer = XLNetAdamW(1e-2, global_clipnorm=None)
    optimizer.apply_gradients([(tf.constant([0.3, -0.2, 0.5, 1.0]) * scale, variable)])
    moved.append(1.0 - variable.numpy())
  np.testing.assert_allclose(moved[0], moved[1], rtol=1e-4)


def test_weight_decay_skips_layer_norm_and_biases():
  model = XLNetPretrainer(tiny_config())
  optimizer = create_optimizer(model, 1e-1, 100, weight_decay=0.5)
  before = {v.path: v.numpy().copy() for v in model.trainable_variables}
  zeros = [tf.zeros_like(v) for v in model.trainable_variables]
  optimizer.apply_gradients(zip(zeros, model.trainable_variables))
  for variable in model.trainable_variables:
    changed = not np.array_equal(variable.numpy(), before[variable.path])
    exempt = any(part in variable.path for part in ("LayerNorm", "bias"))
    assert changed != exempt or not before[variable.path].any(), variable.path


def test_multipliers_of_stacked_biases():
  model = XLNetPretrainer(tiny_config(n_layer=3))
  multipliers = layerwise_multipliers(model.trainable_variables, 3, 0.5)
  np.testing.assert_allclose(multipliers["transformer/seg_embed"].ravel(), [0.25, 0.5, 1])
  assert "model/lm_loss_bias" not in multipliers
