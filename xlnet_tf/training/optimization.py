"""AdamW with per-variable learning-rate multipliers (layer-wise decay) and XLNet's schedule.

The original (and the Model Garden) implement layer-wise learning-rate decay by scaling the
gradients of lower layers, which Adam's normalisation cancels: the update is unchanged. Here the
multiplier scales the learning rate itself, so layer i really moves decay^(L-1-i) as far as the
top layer. Variables that hold all layers at once (untied r_w_bias [L, N, H], seg_embed
[L, 2, N, H]) get a per-layer multiplier tensor.
"""

import re
from typing import Dict, Optional, Union

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.modeling.freezing import STACKED_VARIABLES, frozen_row_mask
from xlnet_tf.training.options import OptimizerOptions

NO_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias", "lm_loss_bias")
_LAYER = re.compile(r"(^|/)layer_(\d+)(/|$)")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warmup from 0 to `peak` over `warmup_steps`, then linear decay to
  `peak * min_lr_ratio` at `total_steps` (the original's schedule).

  With `adjustable_total=True` the total is a variable that `set_total_steps` changes while
  compiled steps keep running (a run with a time budget learns its step count from its speed).
  """

  def __init__(self, peak: float, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0,
               adjustable_total: bool = False):
    self.peak = peak
    self.warmup_steps = warmup_steps
    self.total_steps = total_steps
    self.min_lr_ratio = min_lr_ratio
    self._total_variable = (tf.Variable(float(total_steps), trainable=False, dtype=tf.float32,
                                        name="schedule_total_steps")
                            if adjustable_total else None)

  def set_total_steps(self, total_steps: int) -> None:
    if self._total_variable is None:
      raise ValueError("set_total_steps needs a schedule made with adjustable_total=True")
    self.total_steps = int(total_steps)
    self._total_variable.assign(float(total_steps))

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    warmup = self.peak * step / max(self.warmup_steps, 1)
    total = (float(self.total_steps) if self._total_variable is None else
             tf.convert_to_tensor(self._total_variable))
    decay_span = tf.maximum(total - float(self.warmup_steps), 1.0)
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
    elif name in STACKED_VARIABLES and len(variable.shape) >= 3 and \
        variable.shape[0] == n_layer:
      per_layer = decay_rate ** (n_layer - 1 - np.arange(n_layer))
      multipliers[path] = per_layer.reshape([n_layer] + [1] * (len(variable.shape) - 1)
                                            ).astype(np.float32)
  return multipliers


def _adamw_step(gradient, variable, first, second, learning_rate, step, gradient_scale,
                beta_1, beta_2, epsilon, weight_decay, apply_update=None):
  """One AdamW step for one variable: new (variable, m, v).

  Compiled by XLA (see XLNetAdamW.build): unfused, the dozen element-wise ops each read and
  write the whole tensor, and on a CPU that memory traffic costs more than the backward pass
  for the embedding-sized tensors. A zero `gradient_scale` (a non-finite global norm) yields
  a zero gradient, not NaN. A false `apply_update` (a scalar bool) returns the three as they
  were: a skipped step.
  """
  gradient = tf.math.multiply_no_nan(tf.cast(gradient, variable.dtype), gradient_scale)
  new_first = beta_1 * first + (1.0 - beta_1) * gradient
  new_second = beta_2 * second + (1.0 - beta_2) * tf.square(gradient)
  first_hat = new_first / (1.0 - tf.pow(beta_1, step))
  second_hat = new_second / (1.0 - tf.pow(beta_2, step))
  update = first_hat / (tf.sqrt(second_hat) + epsilon) + weight_decay * variable
  updated = (variable - learning_rate * update, new_first, new_second)
  if apply_update is None:
    return updated
  return tuple(tf.where(apply_update, new, old)
               for new, old in zip(updated, (variable, first, second)))


def _adamw_step_in_place(gradient, variable, first, second, *scalars):
  """_adamw_step writing into the variables: XLA aliases them, saving three copies."""
  _assign_all((variable, first, second), _adamw_step(
      gradient, variable.read_value(), first.read_value(), second.read_value(), *scalars))


def _assign_all(variables, values):
  for variable, value in zip(variables, values):
    variable.assign(value)


def _product(multiplier, mask):
  """The product of two optional learning-rate multipliers (None = 1)."""
  if multiplier is None or mask is None:
    return mask if multiplier is None else multiplier
  return (np.asarray(multiplier, np.float32) * mask).astype(np.float32)


def global_norm(tensors):
  """sqrt of the sum of squares over all tensors (None skipped), in float32.

  tf.nn.l2_loss reads each tensor once in TF's own kernel; tf.linalg.global_norm squares,
  then sums (two passes), and XLA's reduction is slower here."""
  return tf.sqrt(2.0 * tf.add_n([tf.nn.l2_loss(tf.cast(_dense(t), tf.float32))
                                 for t in tensors if t is not None]))


def _dense(gradient):
  """IndexedSlices (embedding lookups) as a dense tensor; duplicate rows summed."""
  return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetAdamW(keras.optimizers.Optimizer):
  """Adam with decoupled weight decay and per-variable learning-rate multipliers.

  Weight decay skips LayerNorm parameters and biases (by variable path). The multiplier scales
  the whole step, weight decay included. Global-norm clipping is folded into the fused update
  (the clipped gradients are never materialized); `apply_scaled_gradients` lets a training
  loop fold its own factor (normalizer, clipping, replica share) in the same way.
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
    # Scalars folded into the fused update, set only while one apply() is being traced/run.
    self._gradient_scale = None  # from apply_scaled_gradients
    self._apply_update = None  # from apply_scaled_gradients
    self._clip_factor = None  # from global-norm clipping

  def build(self, variables):
    if self.built:
      return
    super().build(variables)
    self._first_moments = [self.add_variable_from_reference(v, "m") for v in variables]
    self._second_moments = [self.add_variable_from_reference(v, "v") for v in variables]
    # update_step may receive the backend variable, which has no path: key by index. Frozen
    # rows of a stacked variable (layer_freezing) take a zero step, weight decay included.
    self._multipliers = [_product(self.lr_multipliers.get(v.path), frozen_row_mask(v))
                         for v in variables]
    self._decayed = [not any(part in v.path for part in NO_WEIGHT_DECAY) for v in variables]
    # Per optimizer: a module-level function would keep traces of deleted variables.
    self._fused_step = tf.function(_adamw_step, jit_compile=True, autograph=False)
    self._fused_step_in_place = tf.function(_adamw_step_in_place, jit_compile=True,
                                            autograph=False)

  def apply_scaled_gradients(self, grads_and_vars, scale, apply_update=None):
    """apply_gradients as if every gradient were multiplied by the scalar `scale` (before any
    clipping), done inside the fused update; 0 = a zero gradient. `apply_update`, a scalar
    bool: when false, the variables and moments stay as they are (a skipped step; the step
    count still advances)."""
    self._gradient_scale = tf.convert_to_tensor(scale, tf.float32)
    self._apply_update = apply_update
    try:
      return self.apply_gradients(grads_and_vars)
    finally:
      self._gradient_scale = self._apply_update = None

  def apply(self, grads, trainable_variables=None):
    try:
      return super().apply(grads, trainable_variables)
    finally:
      self._clip_factor = None

  def _clip_gradients(self, grads):
    """Global-norm clipping as a factor on the fused update (Keras' semantics otherwise)."""
    if not (self.global_clipnorm and self.global_clipnorm > 0):
      return super()._clip_gradients(grads)
    norm = global_norm(grads)
    if self._gradient_scale is not None:  # the norm of the scaled gradients
      norm = norm * tf.abs(self._gradient_scale)
    self._clip_factor = tf.minimum(1.0, self.global_clipnorm / norm)
    return grads

  def update_step(self, gradient, variable, learning_rate):
    dtype = variable.dtype
    index = self._get_variable_index(variable)
    learning_rate = tf.cast(learning_rate, dtype)
    multiplier = self._multipliers[index]
    if multiplier is not None:
      learning_rate = learning_rate * tf.constant(multiplier, dtype)
    scale = tf.constant(1.0) if self._clip_factor is None else self._clip_factor
    if self._gradient_scale is not None:  # scale 0 wins over a NaN clip factor
      scale = tf.math.multiply_no_nan(scale, self._gradient_scale)
    first, second = self._first_moments[index], self._second_moments[index]
    scalars = (learning_rate, tf.cast(self.iterations + 1, dtype), tf.cast(scale, dtype),
               tf.constant(self.beta_1, dtype), tf.constant(self.beta_2, dtype),
               tf.constant(self.epsilon, dtype),
               tf.constant(self.decay_rate if self._decayed[index] else 0.0, dtype))
    if self._apply_update is not None:
      scalars += (self._apply_update,)
    variable, first, second = (v.value if isinstance(v, keras.Variable) else v
                               for v in (variable, first, second))
    if isinstance(first, tf.distribute.DistributedValues):
      # A mirrored slot handed to a function would resolve to one device's copy: compute the
      # new values and assign them, which reaches each device's copy.
      _assign_all((variable, first, second), self._fused_step(
          _dense(gradient), tf.convert_to_tensor(variable), tf.convert_to_tensor(first),
          tf.convert_to_tensor(second), *scalars))
    else:
      self._fused_step_in_place(_dense(gradient), variable, first, second, *scalars)

  def get_config(self):
    config = super().get_config()
    config.update(weight_decay=self.decay_rate, beta_1=self.beta_1, beta_2=self.beta_2,
                  epsilon=self.epsilon,
                  lr_multipliers={k: np.asarray(v).tolist() for k, v in
                                  self.lr_multipliers.items()})
    return config


def create_optimizer(model, options: Union[OptimizerOptions, float], train_steps: int, *fields,
                     adjustable_total: bool = False, **named_fields) -> XLNetAdamW:
  """XLNet's AdamW for `model`, with its warmup and linear decay ending at `train_steps`.

  AdamW (eps 1e-6, no weight decay on LayerNorm parameters or biases) with the learning rate
  of WarmupLinearDecay, per-layer rate multipliers (lr_layer_decay_rate) and global-norm
  clipping, as `options` say. `options` may also be the learning rate, with the other
  OptimizerOptions fields after `train_steps`, in their order or by name:
  create_optimizer(model, 1e-4, train_steps=1000, warmup_steps=100).

  Args:
    model: the XLNetModel or head to train; its trainable variables get the per-layer
      multipliers.
    options: an OptimizerOptions, or the peak learning rate.
    train_steps: the step at which the schedule's decay ends.
    *fields: with a learning rate as `options`: the other OptimizerOptions fields
      (warmup_steps, weight_decay, lr_layer_decay_rate, min_lr_ratio, clip_norm), in order.
    adjustable_total: the total steps can change while compiled steps run
      (WarmupLinearDecay.set_total_steps; a run with a time budget).
    **named_fields: those fields by name.

  Returns:
    The XLNetAdamW; its `schedule` attribute is the WarmupLinearDecay.

  Raises:
    TypeError: for fields given beside an OptimizerOptions.
  """
  if not isinstance(options, OptimizerOptions):
    options = OptimizerOptions(options, *fields, **named_fields)
  elif fields or named_fields:
    raise TypeError("create_optimizer: given OptimizerOptions, the fields are theirs")
  schedule = WarmupLinearDecay(options.learning_rate, options.warmup_steps, train_steps,
                               options.min_lr_ratio, adjustable_total)
  multipliers = layerwise_multipliers(model.trainable_variables,
                                      backbone_of(model).config.n_layer,
                                      options.lr_layer_decay_rate)
  optimizer = XLNetAdamW(schedule, weight_decay=options.weight_decay, lr_multipliers=multipliers,
                         global_clipnorm=options.clip_norm)
  optimizer.schedule = schedule  # (optimizer.learning_rate is the current value)
  return optimizer
