"""Dynamic loss scaling for float16 training loops (custom loops; Model.fit gets Keras' own).

float16 keeps 5 exponent bits: gradients below ~6e-8 become 0. Scaling the loss by S scales
every gradient by S, keeping small ones representable; the update divides by S again. Too large
an S overflows to inf. The scale adapts by the rule of keras.optimizers.LossScaleOptimizer
(which Model.fit wraps around the optimizer under mixed_float16): a step whose gradients are not
finite is skipped and halves the scale; `growth_steps` finite steps in a row double it.
Unlike Keras, a skipped step still advances the optimizer's step count: the custom loop counts
batches with it (the data position and the learning-rate schedule).
"""

import tensorflow as tf

INITIAL_SCALE = 2.0 ** 15   # Keras' default: too high is lowered in a few skipped steps
GROWTH_STEPS = 2000         # Keras' default


class DynamicLossScale(tf.Module):
  """The scale and its counters as variables (checkpointed with the run; mirrored across
  replicas when made under a strategy's scope, and updated identically by every replica)."""

  def __init__(self, initial_scale: float = INITIAL_SCALE, growth_steps: int = GROWTH_STEPS):
    super().__init__(name="dynamic_loss_scale")
    if initial_scale <= 0 or growth_steps < 1:
      raise ValueError(f"DynamicLossScale needs initial_scale > 0 and growth_steps >= 1; got "
                       f"{initial_scale}, {growth_steps}")
    self.growth_steps = growth_steps

    def variable(value, dtype, name):
      # Every replica computes the same update (its `finite` comes after the all-reduce).
      return tf.Variable(value, dtype=dtype, trainable=False, name=name,
                         aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.scale = variable(initial_scale, tf.float32, "scale")
    self.finite_steps = variable(0, tf.int64, "finite_steps")  # in a row, since the last change
    self.skipped_steps = variable(0, tf.int64, "skipped_steps")

  def update(self, finite) -> None:
    """After a step whose gradients were `finite` (a scalar bool): halve on a skipped step,
    double after growth_steps finite steps in a row. Branch-free (no cond: the assignments
    run in a replica context)."""
    finite_steps = tf.where(finite, self.finite_steps + 1, tf.constant(0, tf.int64))
    grow = finite_steps >= self.growth_steps
    self.scale.assign(self.scale * tf.where(finite, tf.where(grow, 2.0, 1.0), 0.5))
    self.finite_steps.assign(tf.where(grow, tf.constant(0, tf.int64), finite_steps))
    self.skipped_steps.assign_add(tf.where(finite, tf.constant(0, tf.int64), 1))
