"""AdamW with per-variable learning-rate multipliers (layer-wise decay) and XLNet's schedule.

The original (and the Model Garden) implement layer-wise learning-rate decay by scaling the
gradients of lower layers, which Adam's normalisation cancels: the update is unchanged. Here the
multiplier scales the learning rate itself, so layer i really moves decay^(L-1-i) as far as the
top layer. Variables that hold all layers at once (untied r_w_bias [L, N, H], seg_embed
[L, 2, N, H]) get a per-layer multiplier tensor.
"""

import re
from typing import Dict, Optional

import keras
import numpy as np
import tensorflow as tf

NO_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias", "lm_loss_bias")
_LAYER = re.compile(r"(^|/)layer_(\d+)(/|$)")
_PER_LAYER_VARIABLES = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warmup from 0 to `peak` over `warmup_steps`, then linear decay to
  `peak * min_lr_ratio` at `total_steps` (the original's schedule)."""

  def __init__(self, peak: float, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0):
    self.peak = peak
    self.warmup_steps = warmup_steps
    self.total_steps = total_steps
    self.min_lr_ratio = min_lr_ratio

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    warmup = self.peak * step / max(self.warmup_steps, 1)
    decay_span = max(self.total_steps - self.warmup_steps, 1)
    progress = tf.minimum((step - self.warmup_steps) / decay_span, 1.0)
    decayed = self.peak * (1.0 - progress * (1.0 - self.min_lr_ratio))
    return tf.where(step < self.warmup_steps, warmup, decayed)

  def get_config(self):
    return {"peak": self.peak, "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps, "min_lr_ratio": self.min_lr_ratio}


def layerwise_multipliers(variables, n_layer: int, decay_rate: float) -> Dict[str, np.ndarray]:
  """{variable path: multiplier} for decay_rate < 1: layer i -> decay^(L-1-i); the embeddings
  (below layer 0) -> decay^L; per-layer stacked biases -> a [L, 1, ...] tensor; the rest 1."""
  multipliers = {}
  if decay_rate == 1.0:
    return multipliers
  for variable in variables:
    path = variable.path
    name = path.rsplit("/", 1)[-1]
    match = _LAYER.search(path)
    if match:
      multipliers[path] = np.float32(decay_rate ** (n_layer - 1 - int(match.group(2))))
    elif name in ("word_embedding", "mask_emb"):
      multipliers[path] = np.float32(decay_rate ** n_layer)
    elif name in _PER_LAYER_VARIABLES and len(variable.shape) >= 3 and \
        variable.shape[0] == n_layer:
      per_layer = decay_rate ** (n_layer - 1 - np.arange(n_layer))
      multipliers[path] = per_layer.reshape([n_layer] + [1] * (len(variable.shape) - 1)
                                            ).astype(np.float32)
  return multipliers


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetAdamW(keras.optimizers.Optimizer):
  """Adam with decoupled weight decay and per-variable learning-rate multipliers.

  Weight decay skips LayerNorm parameters and biases (by variable path). The multiplier scales
  the whole step, weight decay included.
  """

  def __init__(self, learning_rate=1e-4, weight_decay: float = 0.0, beta_1: float = 0.9,
               beta_2: float = 0.999, epsilon: float = 1e-6,
               lr_multipliers: Optional[Dict[str, np.ndarray]] = None,
               global_clipnorm: Optional[float] = 1.0, name: str = "xlnet_adamw", **kwargs):
    super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm, name=name,
                     **kwargs)
    self.decay_rate = weight_decay
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self.lr_multipliers = dict(lr_multipliers or {})

  def build(self, variables):
    if self.built:
      return
    super().build(variables)
    self._first_moments = [self.add_variable_from_reference(v, "m") for v in variables]
    self._second_moments = [self.add_variable_from_reference(v, "v") for v in variables]
    # update_step may receive the backend variable, which has no path: key by index.
    self._multipliers = [self.lr_multipliers.get(v.path) for v in variables]
    self._decayed = [not any(part in v.path for part in NO_WEIGHT_DECAY) for v in variables]

  def update_step(self, gradient, variable, learning_rate):
    dtype = variable.dtype
    learning_rate = tf.cast(learning_rate, dtype)
    index = self._get_variable_index(variable)
    multiplier = self._multipliers[index]
    if multiplier is not None:
      learning_rate = learning_rate * tf.constant(multiplier, dtype)
    gradient = tf.cast(gradient, dtype)
    step = tf.cast(self.iterations + 1, dtype)
    first, second = self._first_moments[index], self._second_moments[index]
    first.assign(self.beta_1 * first + (1.0 - self.beta_1) * gradient)
    second.assign(self.beta_2 * second + (1.0 - self.beta_2) * tf.square(gradient))
    first_hat = first / (1.0 - tf.pow(tf.cast(self.beta_1, dtype), step))
    second_hat = second / (1.0 - tf.pow(tf.cast(self.beta_2, dtype), step))
    update = first_hat / (tf.sqrt(second_hat) + self.epsilon)
    if self.decay_rate and self._decayed[index]:
      update += self.decay_rate * variable
    variable.assign_sub(learning_rate * update)

  def get_config(self):
    config = super().get_config()
    config.update(weight_decay=self.decay_rate, beta_1=self.beta_1, beta_2=self.beta_2,
                  epsilon=self.epsilon,
                  lr_multipliers={k: np.asarray(v).tolist() for k, v in
                                  self.lr_multipliers.items()})
    return config


def create_optimizer(model, learning_rate: float, train_steps: int, warmup_steps: int = 0,
                     weight_decay: float = 0.01, lr_layer_decay_rate: float = 1.0,
                     min_lr_ratio: float = 0.0, clip_norm: float = 1.0) -> XLNetAdamW:
  """The optimizer of XLNet runs: AdamW (eps 1e-6), warmup + linear decay, clipping 1.0."""
  from xlnet_tf.checkpoints.naming import backbone_of
  schedule = WarmupLinearDecay(learning_rate, warmup_steps, train_steps, min_lr_ratio)
  multipliers = layerwise_multipliers(model.trainable_variables,
                                      backbone_of(model).config.n_layer, lr_layer_decay_rate)
  return XLNetAdamW(schedule, weight_decay=weight_decay, lr_multipliers=multipliers,
                    global_clipnorm=clip_norm)
