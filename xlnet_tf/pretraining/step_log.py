"""The pretraining loop's record of a run as it goes: a log line and TensorBoard scalars per
logged step and per held-out evaluation, and the records themselves (the run's result)."""

import time
from typing import Callable, Dict, List

from absl import logging
import tensorflow as tf

from xlnet_tf.utils.progress import pace, seconds_to_go


class StepLog:
  """Logs training steps and held-out evaluations to absl logging and `writer` (a TensorBoard
  summary writer, or a no-op one) and keeps them in `history` and `held_out`.

  The speed (tokens/s) and ETA count from the log's creation at `start_step`; a run's
  `loss_scale` (a training.loss_scale.DynamicLossScale, or None) adds its scale and its skipped
  steps to every record.
  """

  def __init__(self, writer, tokens_per_step: int, start_step: int, loss_scale=None,
               clock: Callable[[], float] = time.perf_counter):
    self.writer, self.tokens_per_step, self.loss_scale = writer, tokens_per_step, loss_scale
    self.clock = clock
    self.start_time, self.start_step = clock(), start_step
    self.history: List[Dict[str, float]] = []
    self.held_out: List[Dict[str, float]] = []

  def training_step(self, step: int, total_steps: int, loss, grad_norm,
                    learning_rate: float) -> Dict[str, float]:
    rate = pace(step - self.start_step, self.clock() - self.start_time)
    tokens = rate * self.tokens_per_step
    record = {"step": step, "loss": float(loss), "grad_norm": float(grad_norm),
              "learning_rate": learning_rate, "tokens_per_sec": tokens}
    loss_scaling = ""
    if self.loss_scale is not None:
      record.update(loss_scale=float(self.loss_scale.scale.numpy()),
                    skipped_steps=int(self.loss_scale.skipped_steps.numpy()))
      loss_scaling = (f"  loss scale {record['loss_scale']:g} (skipped steps: "
                      f"{record['skipped_steps']})")
    self.history.append(record)
    eta = seconds_to_go(total_steps - step, rate)
    logging.info("step %d/%d  loss %.4f  lr %.2e  |g| %.3f  %.0f tokens/s  ETA %.0fs%s",
                 step, total_steps, record["loss"], learning_rate, record["grad_norm"], tokens,
                 eta, loss_scaling)
    self._scalars(step, {key: value for key, value in record.items() if key != "step"})
    return record

  def held_out_evaluation(self, step: int, result: Dict[str, float]) -> None:
    self.held_out.append(dict(result, step=step))
    logging.info("step %d: held-out loss %.4f", step, result["loss"])
    self._scalars(step, {"held_out_loss": result["loss"]})

  def _scalars(self, step: int, values: Dict[str, float]) -> None:
    with self.writer.as_default(step=step):
      for key, value in values.items():
        tf.summary.scalar(key, value)
