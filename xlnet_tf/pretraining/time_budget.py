"""Wall-time budgets: what is left of a budget, and how many training steps fit in it.

A command given M minutes (run/pretrain.py --max_minutes) spends some on the data and the first
evaluation and keeps back what the end costs; the training loop gets the rest as a StepBudget,
which times the steps after the first (it traces and compiles) and fixes the step count there.
"""

import time
from typing import Callable, Optional

from absl import logging

CALIBRATION_STEPS = 20      # timed steps after compilation: the speed that sets the step count
RESERVE_SECONDS = 5.0       # kept back by the loop for its final checkpoint and the exports


class TimeBudget:
  """`seconds` of wall time counted from `started` (a `clock` reading; default: now)."""

  def __init__(self, seconds: float, started: Optional[float] = None,
               clock: Callable[[], float] = time.perf_counter):
    self.seconds, self.clock = seconds, clock
    self.started = clock() if started is None else started

  def elapsed(self) -> float:
    return self.clock() - self.started

  def left(self, reserved: float = 0.0) -> float:
    """What is left, less `reserved` seconds (negative when overspent)."""
    return self.seconds - self.elapsed() - reserved


class StepBudget(TimeBudget):
  """A training run's budget: after CALIBRATION_STEPS steps past the first, their speed fixes
  the step count that ends the run within the budget (RESERVE_SECONDS kept back).

  The loop calls `after_step(step, loss)` after each step; it returns that count once (at the
  calibration step), None otherwise. The loss is read there so that the timed steps have run.
  The count never exceeds `most_steps` (the run's train_steps: with a budget, the most).
  """

  def __init__(self, seconds: float, first_step: int, most_steps: Optional[int] = None,
               **kwargs):
    super().__init__(seconds, **kwargs)
    self.first_step = first_step  # the step the run starts (or resumes) from
    self.most_steps = most_steps
    self.compiled_at = self.compiled_step = None
    self.total_steps = None  # fixed by the calibration

  def after_step(self, step: int, loss) -> Optional[int]:
    if self.total_steps is not None:
      return None
    if step - self.first_step == 1:
      float(loss)  # compiled: from here on each step costs the same
      self.compiled_at, self.compiled_step = self.clock(), step
    elif self.compiled_step is not None and step - self.compiled_step == CALIBRATION_STEPS:
      float(loss)
      now = self.clock()
      rate = CALIBRATION_STEPS / (now - self.compiled_at)
      seconds_left = self.seconds - (now - self.started)
      self.total_steps = step + max(int(rate * (seconds_left - RESERVE_SECONDS)), 1)
      if self.most_steps is not None:
        self.total_steps = min(self.total_steps, self.most_steps)
      logging.info("Time budget: %.0f s left at %.2f steps/s -> %d steps in all", seconds_left,
                   rate, self.total_steps)
      return self.total_steps
    return None
