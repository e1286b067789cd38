"""Stopping a custom training loop whose loss or weights became non-finite, before they are
saved (TrainingDivergedError names the step and the checkpoint that is kept)."""

from typing import Callable, List, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import UserInputError

# Losses are read in batches of at most this many steps: a read per step would stall the
# device's queue.
UNCHECKED_LOSSES_MAX = 100


class TrainingDivergedError(UserInputError):
  """The training loss became non-finite (a learning rate too high, bad data): the run stops
  before saving those weights."""


class DivergenceCheck:
  """Watches the losses and weights of a run; `kept()` says what stays on disk ("latest
  checkpoint: PATH" or "no checkpoint in DIR") for the error message."""

  def __init__(self, variables, kept: Callable[[], str]):
    self.variables, self.kept = variables, kept
    self.unchecked: List[Tuple[int, tf.Tensor]] = []  # (step, loss) not read yet

  def add_loss(self, step: int, loss) -> None:
    self.unchecked.append((step, loss))

  @property
  def due(self) -> bool:
    return len(self.unchecked) >= UNCHECKED_LOSSES_MAX

  def check_losses(self) -> None:
    """Raises TrainingDivergedError at the first non-finite loss added since the last check."""
    if not self.unchecked:
      return
    losses = tf.stack([loss for _, loss in self.unchecked]).numpy()
    steps = [step for step, _ in self.unchecked]
    self.unchecked.clear()
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
      self.diverged(steps[bad[0]], f"the training loss is {losses[bad[0]]}")

  def check_weights(self, step: int) -> None:
    """Raises TrainingDivergedError if a weight is not finite (before they are saved)."""
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.variables])
    if not bool(finite):
      self.diverged(step, "the weights are no longer finite")

  def diverged(self, step: int, what: str):
    raise TrainingDivergedError(f"step {step}: {what}; stopped without saving ({self.kept()}); "
                                "lower the learning rate or check the data")
