"""Progress and ETA: fine-tuning's display (rich's bar redrawn in place on a terminal, plain
lines elsewhere, one line per dev evaluation in both; nothing in mode none), the step lines
training prints, the data stage's periodic lines and a study's line per unit of work."""

import io
import re

import pytest

from xlnet_tf.utils.progress import (PeriodicProgress, ProgressDisplay, UnitProgress,
                                     format_duration, format_minutes, pace, print_line,
                                     seconds_to_go, step_line)

CONTROL_CHARACTERS = re.compile(r"[\r\b\x1b]")
TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours, cursor, erase line
BAR = "[━╸╺]{20}"  # rich's bar: done, the head, to go (in another colour)


def visible(text):
  """What a terminal shows of `text`, the carriage returns kept: without its escape codes."""
  return TERMINAL_CODES.sub("", text)


class FakeTerminal(io.StringIO):
  def isatty(self):
    return True


class FakeClock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def simulate(display, clock, steps=10, seconds_per_step=2.0, first_step_seconds=30.0,
             eval_every=4, evaluation_seconds=(6.0, 1.0, 1.0)):
  """A run of `steps` steps, loss 1/step, dev evaluation every `eval_every` steps and at the
  end (the first one slower: it compiles); accuracy 0.5, 0.7, 0.6: the best stays at the
  second evaluation."""
  accuracies, durations = iter([0.5, 0.7, 0.6]), iter(evaluation_seconds)
  best = None
  display.begin()
  for done in range(1, steps + 1):
    clock.now += first_step_seconds if done == 1 else seconds_per_step
    display.step(done, 1.0 / done)
    if done % eval_every == 0 or done == steps:
      display.evaluating()
      clock.now += next(durations)
      scores = {"accuracy": next(accuracies), "step": done, "loss": 0.25}
      best = scores if best is None or scores["accuracy"] > best["accuracy"] else best
      display.evaluation(done, scores, best, "accuracy")
  display.end()


def test_bar_on_a_terminal_shows_steps_loss_eta_and_one_line_per_evaluation():
  clock, terminal = FakeClock(), FakeTerminal()
  simulate(ProgressDisplay("auto", 10, 4, stream=terminal, clock=clock), clock)
  text = visible(terminal.getvalue())
  # After step 3: two steps of 2 s since the first (compiling) one, 7 steps left.
  assert re.search(rf"\rstep  3/10 {BAR} loss 0.3333  2.00 s/step  ETA 14s\r", text), text
  # The first evaluation (6 s) is neither in the pace nor in the steps' ETA (5 steps, 10 s),
  # but it is the time each of the two evaluations still to come is expected to take.
  assert re.search(rf"\rstep  4/10 {BAR} evaluating on dev\r", text)
  assert re.search(rf"\rstep  5/10 {BAR} loss 0.2000  2.00 s/step  ETA 22s\r", text)
  assert re.search(r"\rstep 10/10 ━{20} loss 0.1000  2.00 s/step\n", text)
  # The bar fills in proportion: 3 of 10 steps, 6 of its 20 characters.
  assert re.search(r"\rstep  3/10 ━{6}╺━{13} ", text)
  evaluations = re.findall(r"step (\d+)/10: dev accuracy ([\d.]+), loss 0.25 \(([^)]*)\)", text)
  assert evaluations == [("4", "0.5", "new best accuracy"), ("8", "0.7", "new best accuracy"),
                         ("10", "0.6", "best accuracy 0.7 at step 8")]
  # An evaluation line replaces the bar and ends the line; the bar resumes below it, no longer
  # evaluating, and stays on screen at the end.
  assert re.search(rf"\rstep 8/10: dev .*\nstep  8/10 {BAR} evaluating on dev\rstep  8/10 "
                   rf"{BAR} loss 0.1250", text)
  assert text.count("\n") == 6  # begin, 3 evaluations, the bar's last state, end
  assert text.startswith("fine-tuning: 10 steps, dev evaluation every 4 steps")
  assert text.endswith("fine-tuned 10 steps in 56s\n")
  # The cursor, hidden while the bar is drawn, is shown again.
  assert terminal.getvalue().rindex("\x1b[?25h") > terminal.getvalue().rindex("\x1b[?25l")


def test_lines_off_a_terminal_have_no_control_characters_and_are_rate_limited():
  clock, log = FakeClock(), io.StringIO()
  simulate(ProgressDisplay("auto", 10, 4, stream=log, clock=clock, line_seconds=5.0), clock)
  text = log.getvalue()
  assert not CONTROL_CHARACTERS.search(text)
  lines = text.splitlines()
  assert lines[1] == "step 1/10: loss 1.0000 (with tracing and compilation)"
  progress_steps = [int(m) for m in re.findall(r"^step (\d+)/10: loss", text, re.M)]
  # Steps every 2 s, a line at most every 5 s; an evaluation line counts as output too, so
  # none at step 10 (4 s after the evaluation at step 8).
  assert progress_steps == [1, 4, 7]
  assert len(re.findall(r"^step \d+/10: dev accuracy", text, re.M)) == 3
  assert "step 4/10: loss 0.2500  2.00 s/step  ETA 12s" in lines
  assert "step 7/10: loss 0.1429  2.00 s/step  ETA 18s" in lines
  assert "evaluating" not in text


def test_a_resumed_run_counts_its_pace_from_its_own_first_step():
  """Resumed after step 6 of 10: step 7 traces and compiles (its line says so, and it is not
  in the pace); the end line names the steps this process ran."""
  clock, log = FakeClock(), io.StringIO()
  display = ProgressDisplay("lines", 10, None, stream=log, clock=clock, line_seconds=0.0)
  display.begin(6)
  for done, seconds in ((7, 30.0), (8, 2.0), (9, 2.0), (10, 2.0)):
    clock.now += seconds
    display.step(done, 0.5)
  display.end()
  lines = log.getvalue().splitlines()
  assert lines[1:] == ["step 7/10: loss 0.5000 (with tracing and compilation)",
                       "step 8/10: loss 0.5000  2.00 s/step  ETA 4s",
                       "step 9/10: loss 0.5000  2.00 s/step  ETA 2s",
                       "step 10/10: loss 0.5000  2.00 s/step",
                       "fine-tuned steps 7-10 of 10 in 36s"]
  display = ProgressDisplay("lines", 10, None, stream=log, clock=clock)
  display.begin(10)
  display.end()
  assert log.getvalue().splitlines()[-1] == "fine-tuned: no step left after step 10 of 10"


def test_forced_bar_off_a_terminal_and_none():
  clock, log = FakeClock(), io.StringIO()
  simulate(ProgressDisplay("bar", 10, 4, stream=log, clock=clock), clock)
  assert "\rstep 10/10 ━" in visible(log.getvalue())
  clock, log = FakeClock(), FakeTerminal()
  simulate(ProgressDisplay("none", 10, 4, stream=log, clock=clock), clock)
  assert log.getvalue() == ""


def test_a_long_bar_is_cut_to_the_terminal_width(monkeypatch):
  import os
  import shutil
  monkeypatch.setattr(shutil, "get_terminal_size", lambda: os.terminal_size((40, 24)))
  clock, terminal = FakeClock(), FakeTerminal()
  simulate(ProgressDisplay("bar", 10, 4, stream=terminal, clock=clock), clock)
  bars = [part for part in re.split(r"[\r\n]", visible(terminal.getvalue()))
          if part.startswith("step") and "dev" not in part]
  # The status is cut; the counter and the whole bar stay.
  assert bars and max(len(bar) for bar in bars) == 39
  assert all(re.match(rf"step [ \d]\d/10 {BAR} ", bar) for bar in bars), bars


def test_unknown_mode_and_durations():
  with pytest.raises(ValueError, match="progress must be one of .*'fancy'"):
    ProgressDisplay("fancy", 10)
  assert [format_duration(s) for s in (42, 185, 3723)] == ["42s", "3:05", "1:02:03"]


def test_periodic_progress_is_quiet_in_short_runs_and_reports_long_ones():
  lines = []
  quiet = PeriodicProgress(lines.append, every=3600)
  quiet.update("Writing examples", 5, 10, "corpus tokens")
  assert lines == []
  loud = PeriodicProgress(lines.append, every=0)
  loud.start -= 10  # 10 s into the run
  loud.update("Writing examples", 2_500, 10_000, "corpus tokens")
  assert lines == ["Writing examples: 25% (2,500 of 10,000 corpus tokens), 250 corpus tokens/s, "
                   "ETA 0 min 30 s"]
  PeriodicProgress(None, every=0).update("Writing examples", 1, 10, "corpus tokens")  # silent


def test_unit_progress_weighs_the_remaining_units_equally():
  clock, lines = FakeClock(), []
  progress = UnitProgress(5, lines.append, clock=clock)
  clock.now += 120  # a pretraining run worth 2 units: 1 min a unit
  progress.step("pretrained perm", units=2)
  clock.now += 60
  progress.step("task / perm: dev 0.8")
  assert lines == ["[2/5] pretrained perm  (elapsed 2.0 min, ETA 3.0 min)",
                   "[3/5] task / perm: dev 0.8  (elapsed 3.0 min, ETA 2.0 min)"]


def test_pace_eta_and_minutes():
  assert pace(30, 10.0) == 3.0 and pace(5, 0.0) == 5e9  # no division by zero
  assert seconds_to_go(90, 3.0) == 30.0 and seconds_to_go(10, 0.0) == float("inf")
  assert [format_minutes(s) for s in (30, 185, 3723, float("inf"))] == [
      "0 min 30 s", "3 min 05 s", "1 h 02 min", "unknown"]


def test_a_failed_run_closes_the_bar_and_gives_the_terminal_back():
  clock, terminal = FakeClock(), FakeTerminal()
  display = ProgressDisplay("bar", 10, 4, stream=terminal, clock=clock)
  display.begin()
  clock.now += 30
  display.step(1, 0.5)
  display.close()  # what the driver does when a step raises
  display.close()  # and again: nothing more
  text = terminal.getvalue()
  assert text.endswith("\x1b[?25h") and text.count("\x1b[?25h") == 1
  assert visible(text).endswith("\rstep  1/10 ━━╺━━━━━━━━━━━━━━━━━ loss 0.5000\n")


def test_bar_lines_are_text_not_markup():
  clock, terminal = FakeClock(), FakeTerminal()
  display = ProgressDisplay("bar", 2, 1, stream=terminal, clock=clock)
  display.begin()
  display.step(1, 0.5)
  display.evaluation(1, {"[bold]f1": 0.5}, {"step": 1}, "[bold]f1")
  display.end()
  assert "step 1/2: dev [bold]f1 0.5 (new best [bold]f1)\n" in visible(terminal.getvalue())


def test_seconds_per_step_leaves_out_the_first_step_and_the_evaluations():
  clock = FakeClock()
  display = ProgressDisplay("none", 10, 2, clock=clock)
  display.begin()
  clock.now += 30
  display.step(1, 1.0)
  assert display.seconds_per_step() is None  # the first step compiles: no pace yet
  clock.now += 2
  display.step(2, 1.0)
  display.evaluating()
  clock.now += 10
  display.evaluation(2, {"accuracy": 0.5}, {"step": 2, "accuracy": 0.5}, "accuracy")
  clock.now += 4
  display.step(3, 1.0)
  assert display.seconds_per_step() == 3.0  # (2 + 4) s over two steps


def test_step_lines_print_whole_lines_without_a_prefix():
  stream = io.StringIO()
  print_line(step_line(120, 1000, "loss 0.6931"), stream)
  assert stream.getvalue() == "step 120/1000: loss 0.6931\n"
  assert format_duration(float("inf")) == "unknown"
