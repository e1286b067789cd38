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


def _reference_adamw(params, grads_per_step, learning_rate, multipliers, decayed, clip,
                     scales, beta_1=0.9, beta_2=0.999, epsilon=1e-6, weight_decay=0.01):
  """Textbook AdamW in float64 NumPy: clip by global norm, then Adam with bias correction and
  decoupled decay, each variable's step scaled by its learning-rate multiplier."""
  params = [p.astype(np.float64) for p in params]
  first = [np.zeros_like(p) for p in params]
  second = [np.zeros_like(p) for p in params]
  for step, (grads, scale) in enumerate(zip(grads_per_step, scales), start=1):
    grads = [g.astype(np.float64) * scale if scale else np.zeros_like(g, np.float64)
             for g in grads]
    if clip:
      norm = np.sqrt(sum((g ** 2).sum() for g in grads))
      grads = [g * (min(1.0, clip / norm) if norm > 0 else 1.0) for g in grads]
    for i, g in enumerate(grads):
      first[i] = beta_1 * first[i] + (1 - beta_1) * g
      second[i] = beta_2 * second[i] + (1 - beta_2) * g ** 2
      update = (first[i] / (1 - beta_1 ** step)) / (
          np.sqrt(second[i] / (1 - beta_2 ** step)) + epsilon)
      update += weight_decay * params[i] if decayed[i] else 0.0
      params[i] = params[i] - learning_rate * multipliers[i] * update
  return params


def test_fused_update_equals_textbook_adamw():
  """Clipping active (norm >> 1), weight decay on the kernel only, a per-variable and a
  per-row multiplier, a scaled step and a skipped (scale 0, non-finite gradient) step."""
  rng = np.random.default_rng(3)
  shapes = {"kernel": (5, 4), "bias": (4,), "r_w_bias": (3, 2, 2)}
  variables = [keras.Variable(rng.standard_normal(shape).astype(np.float32), name=name)
               for name, shape in shapes.items()]
  row_multiplier = np.array([0.25, 0.5, 1.0], np.float32).reshape(3, 1, 1)
  multipliers = {variables[0].path: np.float32(0.5), variables[2].path: row_multiplier}
  optimizer = XLNetAdamW(1e-2, weight_decay=0.01, lr_multipliers=multipliers,
                         global_clipnorm=1.0)
  initial = [v.numpy().copy() for v in variables]
  steps = [[rng.standard_normal(shape).astype(np.float32) * 10 for shape in shapes.values()]
           for _ in range(4)]
  steps[3][0][0, 0] = np.inf
  scales = [None, None, 0.5, 0.0]
  for grads, scale in zip(steps, scales):
    pairs = zip([tf.constant(g) for g in grads], variables)
    if scale is None:
      optimizer.apply_gradients(pairs)
    else:
      optimizer.apply_scaled_gradients(pairs, scale)
  expected = _reference_adamw(initial, steps[:3] + [[np.zeros_like(g) for g in steps[3]]],
                              1e-2, [0.5, 1.0, row_multiplier], [True, False, False], 1.0,
                              [1.0, 1.0, 0.5, 1.0])
  for variable, want in zip(variables, expected):
    assert np.isfinite(variable.numpy()).all()
    np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)
