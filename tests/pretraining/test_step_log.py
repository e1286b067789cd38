"""The pretraining loop's step log (pretraining.step_log): its lines print as fine-tuning's,
through the same printer, and its TensorBoard scalars go through training.summaries."""

import pytest
import tensorflow as tf

from xlnet_tf.pretraining.step_log import StepLog
from xlnet_tf.training.summaries import scalar_writer

from event_files import scalar_series


class FakeClock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_step_lines_read_like_finetunings_and_the_scalars_keep_their_steps(tmp_path):
  clock, lines = FakeClock(), []
  writer = scalar_writer(str(tmp_path / "train"))
  log = StepLog(writer, tokens_per_step=100, start_step=0, clock=clock, printer=lines.append)
  clock.now += 10.0  # 10 steps in 10 s: 100 tokens/s, 90 steps (1:30) to go
  record = log.training_step(10, 100, tf.constant(1.5), tf.constant(0.25), 1e-3)
  log.held_out_evaluation(10, 100, {"loss": 2.0, "perplexity": 7.4})
  writer.flush()
  assert lines == ["step 10/100: loss 1.5000  lr 1.00e-03  |g| 0.250  100 tokens/s  ETA 1:30",
                   "step 10/100: held-out loss 2.0000"]
  assert record["tokens_per_sec"] == 100.0 and log.held_out == [
      {"loss": 2.0, "perplexity": 7.4, "step": 10}]
  scalars = scalar_series(str(tmp_path / "train"))
  assert {tag: [step for step, _ in series] for tag, series in scalars.items()} == {
      tag: [10] for tag in ("loss", "grad_norm", "learning_rate", "tokens_per_sec",
                            "held_out_loss")}
  assert {tag: series[0][1] for tag, series in scalars.items()} == pytest.approx(
      {"loss": 1.5, "grad_norm": 0.25, "learning_rate": 1e-3, "tokens_per_sec": 100.0,
       "held_out_loss": 2.0})


def test_by_default_the_lines_go_to_stdout_without_a_prefix(capsys):
  log = StepLog(tf.summary.create_noop_writer(), 10, 0, clock=FakeClock())
  log.held_out_evaluation(5, 20, {"loss": 3.0})
  assert capsys.readouterr().out == "step 5/20: held-out loss 3.0000\n"
