"""The pretraining loop's record of a run as it goes: a progress line and TensorBoard scalars
per logged step and per held-out evaluation, and the records themselves (the run's result)."""

import time
from typing import Callable, Dict, List

from xlnet_tf.training.summaries import write_scalars
from xlnet_tf.utils.progress import format_duration, pace, print_line, seconds_to_go, step_line


class StepLog:
  """Prints training steps and held-out evaluations as fine-tuning prints its steps ("step
  100/1000: loss ...", to stdout through `printer`, without a log prefix), writes them to
  `writer` (a TensorBoard summary writer, or a no-op one) and keeps them in `history` and
  `held_out`.

  The speed (tokens/s) and ETA count from the log's creation at `start_step`; a run's
  `loss_scale` (a training.loss_scale.DynamicLossScale, or None) adds its scale and its skipped
  steps to every record.
  """

  def __init__(self, writer, tokens_per_step: int, start_step: int, loss_scale=None,
               clock: Callable[[], float] = time.perf_counter,
               printer: Callable[[str], None] = print_line):
    self.writer, self.tokens_per_step, self.loss_scale = writer, tokens_per_step, loss_scale
    self.clock, self.printer = clock, printer
    self.start_time, self.start_step = clock(), start_step
    self.history: List[Dict[str, float]] = []
    self.held_out: List[Dict[str, float]] = []

  def training_step(self, step: int, total_steps: int, loss, grad_norm,
                    learning_rate: float) -> Dict[str, float]:
    rate = pace(step - self.start_step, self.clock() - self.start_time)
    tokens = rate * self.tokens_per_step
    record = {"step": step, "loss": float(loss), "grad_norm": float(grad_norm),
              "learning_rate": learning_rate, "tokens_per_sec": tokens}
    parts = [f"loss {record['loss']:.4f}", f"lr {learning_rate:.2e}",
             f"|g| {record['grad_norm']:.3f}", f"{tokens:.0f} tokens/s",
             f"ETA {format_duration(seconds_to_go(total_steps - step, rate))}"]
    if self.loss_scale is not None:
      record.update(loss_scale=float(self.loss_scale.scale.numpy()),
                    skipped_steps=int(self.loss_scale.skipped_steps.numpy()))
      parts.append(f"loss scale {record['loss_scale']:g} (skipped steps: "
                   f"{record['skipped_steps']})")
    self.history.append(record)
    self.printer(step_line(step, total_steps, "  ".join(parts)))
    write_scalars(self.writer, step, {key: value for key, value in record.items()
                                      if key != "step"})
    return record

  def held_out_evaluation(self, step: int, total_steps: int, result: Dict[str, float]) -> None:
    self.held_out.append(dict(result, step=step))
    self.printer(step_line(step, total_steps, f"held-out loss {result['loss']:.4f}"))
    write_scalars(self.writer, step, {"held_out_loss": result["loss"]})
