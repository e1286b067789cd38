"""Time budgets: what is left, and the step count a measured speed fits into a budget."""

from xlnet_tf.pretraining import time_budget
from xlnet_tf.pretraining.time_budget import StepBudget, TimeBudget


class FakeClock:
  def __init__(self):
    self.now = 1000.0

  def __call__(self):
    return self.now


def test_time_budget_counts_from_its_start():
  clock = FakeClock()
  budget = TimeBudget(60.0, started=clock.now - 10, clock=clock)
  clock.now += 5
  assert budget.elapsed() == 15.0
  assert budget.left() == 45.0 and budget.left(reserved=50.0) == -5.0


def test_step_budget_times_the_steps_after_the_first_and_fixes_the_count_once():
  """Resumed at step 100, 60 s budget: the first step (compilation) takes 10 s, then 20 steps
  at 0.5 s each: 40 s left, less the 5 s reserve, at 2 steps/s -> 70 more steps."""
  clock = FakeClock()
  budget = StepBudget(60.0, first_step=100, clock=clock)
  clock.now += 10
  assert budget.after_step(101, 1.0) is None
  fitted = []
  for step in range(102, 130):
    clock.now += 0.5
    fitted.append(budget.after_step(step, 1.0))
  calibration_step = 101 + time_budget.CALIBRATION_STEPS
  assert fitted[calibration_step - 102] == calibration_step + int(
      2.0 * (60 - 20 - time_budget.RESERVE_SECONDS)) == 191
  assert [f for f in fitted if f is not None] == [191]  # once
  assert budget.total_steps == 191


def test_an_overspent_budget_still_trains_one_more_step():
  clock = FakeClock()
  budget = StepBudget(1.0, first_step=0, clock=clock)
  clock.now += 30
  budget.after_step(1, 1.0)
  clock.now += 1
  calibration_step = 1 + time_budget.CALIBRATION_STEPS
  fitted = [budget.after_step(step, 1.0) for step in range(2, calibration_step + 1)]
  assert fitted[-1] == calibration_step + 1



def test_the_fitted_count_never_exceeds_the_runs_train_steps():
  """--train_steps with --max_minutes is the most: a budget that fits 191 steps stops at 150."""
  clock = FakeClock()
  budget = StepBudget(60.0, first_step=100, most_steps=150, clock=clock)
  clock.now += 10
  budget.after_step(101, 1.0)
  fitted = []
  for step in range(102, 102 + time_budget.CALIBRATION_STEPS):
    clock.now += 0.5
    fitted.append(budget.after_step(step, 1.0))
  assert [f for f in fitted if f is not None] == [150] and budget.total_steps == 150
