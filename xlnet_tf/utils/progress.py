"""Progress and ETA reporting, for every long job of the project (a leaf: imports nothing of it).

  pace, seconds_to_go    a rate of units per second and the time the remaining units take at
                         it: the one ETA rule of the pretraining loop, the data stage and the
                         studies (ProgressDisplay adds the evaluations still to come)
  PeriodicProgress       the data stage: "what: 25% (done of total unit), rate unit/s, ETA"
                         every `every` seconds, silent in shorter runs
  UnitProgress           a study: "[k/n] message  (elapsed, ETA)" per finished unit of work
  ProgressDisplay        fine-tuning's stdout, below
  step_line, print_line  "step 120/1000: ..." lines on stdout without a log prefix: fine-tuning's
                         and the pretraining loop's (pretraining.step_log)

What a person watching a fine-tuning run sees on stdout (ProgressDisplay).

  bar    on a terminal, one line kept at the bottom and redrawn in place by rich (the library
         Keras uses for its own output), cut to the terminal's width:
           step  120/1000 ━━━━╸━━━━━━━━━━━━━━━ loss 0.6931  0.21 s/step  ETA 3:05
         (and "evaluating on dev" while it does); the other lines print above it
  lines  plain lines, no control characters (logs, CI): the first step (its time includes
         tracing and compilation), then at most one line every `line_seconds`
  none   nothing
  auto   bar when the stream is a terminal, lines otherwise

Every mode but none also prints a line when training starts, one line per dev evaluation (the
scores, and the best so far by the task's metric) and one when it ends.
"""

import numbers
import shutil
import sys
import time
from typing import Callable, Dict, Optional, TextIO

import rich.console
import rich.progress
import rich.table
import rich.text

PROGRESS_MODES = ("auto", "bar", "lines", "none")
BAR_WIDTH = 20


def pace(done: float, seconds: float) -> float:
  """Units per second: `done` units in `seconds`."""
  return done / max(seconds, 1e-9)


def seconds_to_go(remaining: float, rate: float) -> float:
  """The time `remaining` units take at `rate` units per second (inf at rate 0)."""
  return remaining / rate if rate else float("inf")


def check_progress_mode(mode: str) -> str:
  if mode not in PROGRESS_MODES:
    raise ValueError(f"progress must be one of {PROGRESS_MODES}; got {mode!r}")
  return mode


def format_duration(seconds: float) -> str:
  """42s, 3:05, 1:02:03; 'unknown' for inf."""
  if seconds == float("inf"):
    return "unknown"
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds}s"
  minutes, seconds = divmod(seconds, 60)
  if minutes < 60:
    return f"{minutes}:{seconds:02d}"
  hours, minutes = divmod(minutes, 60)
  return f"{hours}:{minutes:02d}:{seconds:02d}"


def format_minutes(seconds: float) -> str:
  """'0 min 30 s', '1 h 02 min'; 'unknown' for inf."""
  if seconds == float("inf"):
    return "unknown"
  minutes, seconds = divmod(round(seconds), 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {seconds:02d} s"


def numeric_scores(scores: Dict) -> Dict[str, float]:
  """The numbers among an evaluation's `scores`, without its "step"."""
  return {name: value for name, value in scores.items()
          if name != "step" and isinstance(value, numbers.Real)}


def format_scores(scores: Dict) -> str:
  """'accuracy 0.8125, f1 0.8' (numbers only; the step is shown elsewhere)."""
  return ", ".join(f"{name} {value:.4g}" for name, value in numeric_scores(scores).items())


class PeriodicProgress:
  """Reports `done` of `total` with a rate and an ETA to `report` every `every` seconds; silent
  in runs shorter than that (and with report None)."""

  def __init__(self, report: Optional[Callable[[str], None]], every: float,
               clock: Callable[[], float] = time.perf_counter):
    self.report, self.every, self.clock = report, every, clock
    self.start = self.last = clock()

  def update(self, what: str, done: float, total: float, unit: str) -> None:
    now = self.clock()
    if self.report is None or now - self.last < self.every or not total:
      return
    self.last = now
    rate = pace(done, now - self.start)
    eta = seconds_to_go(total - done, rate)
    self.report(f"{what}: {done / total:.0%} ({done:,.0f} of {total:,.0f} {unit}), "
                f"{rate:,.0f} {unit}/s, ETA {format_minutes(eta)}")


class UnitProgress:
  """'[k/n] message  (elapsed, ETA)' lines, one per finished piece of work; the ETA weighs the
  remaining units equally."""

  def __init__(self, total_units: float, printer: Callable[[str], None] = print,
               clock: Callable[[], float] = time.perf_counter):
    self.total, self.done, self.printer, self.clock = total_units, 0.0, printer, clock
    self.start = clock()

  def step(self, message: str, units: float = 1.0) -> None:
    self.done += units
    elapsed = self.clock() - self.start
    eta = seconds_to_go(self.total - self.done, pace(self.done, elapsed)) if self.done else 0.0
    self.printer(f"[{self.done:.0f}/{self.total:.0f}] {message}  (elapsed {elapsed / 60:.1f} min,"
                 f" ETA {eta / 60:.1f} min)")


class ProgressDisplay:
  """Renders training progress to `stream` (default: sys.stdout when training begins).

  The caller reports `begin()`, `step(done, loss)` after every training step,
  `evaluating()` and `evaluation(step, scores, best, metric)` around every dev evaluation and
  `end()`, and calls `close()` however the run ends (it restores the terminal). The ETA is the
  training pace (`seconds_per_step`: without the first, compiling, step and without the
  evaluations) over the remaining steps plus the last evaluation's time per remaining one.
  """

  def __init__(self, mode: str, total_steps: int, eval_every: Optional[int] = None,
               stream: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic,
               line_seconds: float = 30.0, redraw_seconds: float = 0.1):
    self.mode = check_progress_mode(mode)
    self.total_steps, self.eval_every = total_steps, eval_every
    self.stream, self.clock = stream, clock
    self.line_seconds, self.redraw_seconds = line_seconds, redraw_seconds
    self.start = self.first_step_done = self.last_output = self.evaluation_start = None
    self.done, self.loss = 0, None
    self.first_step = 1  # the first step of this process (a resumed run starts later)
    self.evaluation_seconds = self.last_evaluation_seconds = 0.0
    self.bar = None  # the _Bar on screen in mode bar, from begin() to close()

  # ---- events --------------------------------------------------------------------------

  def begin(self, done: int = 0) -> None:
    """Training begins (a resumed run: after `done` steps)."""
    self.done, self.first_step = done, done + 1
    self.stream = self.stream or sys.stdout
    if self.mode == "auto":
      self.mode = "bar" if _is_terminal(self.stream) else "lines"
    self.start = self.clock()
    every = f", dev evaluation every {self.eval_every} steps" if self.eval_every else ""
    self._line(f"fine-tuning: {self.total_steps} steps{every}; the first step traces and "
               "compiles the model")
    if self.mode == "bar":
      self.bar = _Bar(self.stream, self.total_steps, done)

  def step(self, done: int, loss: Optional[float]) -> None:
    now = self.clock()
    self.done, self.loss = done, loss
    if self.first_step_done is None:
      self.first_step_done = now
    if self.bar is not None:
      if done >= self.total_steps or now - self.last_output >= self.redraw_seconds:
        self._draw_bar(now, self._status(now))
    elif self.mode == "lines" and (done == self.first_step
                                   or now - self.last_output >= self.line_seconds):
      first = " (with tracing and compilation)" if done == self.first_step else ""
      self._line(step_line(done, self.total_steps, self._status(now) + first))

  def evaluating(self) -> None:
    self.evaluation_start = self.clock()
    if self.bar is not None:  # the first evaluation also compiles: say why nothing moves
      self._draw_bar(self.evaluation_start, "evaluating on dev")

  def evaluation(self, step: int, scores: Dict, best: Dict, metric: str) -> None:
    """`best`: the best scores so far (with their "step"), these ones included."""
    if self.evaluation_start is not None:
      self.last_evaluation_seconds = self.clock() - self.evaluation_start
      self.evaluation_seconds += self.last_evaluation_seconds
      self.evaluation_start = None
    if best["step"] == step:
      best_text = f"new best {metric}"
    else:
      best_text = f"best {metric} {best[metric]:.4g} at step {best['step']}"
    self._line(step_line(step, self.total_steps, f"dev {format_scores(scores)} ({best_text})"))
    if self.bar is not None:  # no longer evaluating
      self._draw_bar(self.clock(), self._status(self.clock()))

  def end(self) -> None:
    self.close()
    elapsed = self.clock() - self.start
    if self.done < self.first_step:  # resumed after the last step: nothing left
      self._line(f"fine-tuned: no step left after step {self.done} of {self.total_steps}")
      return
    steps = (f"{self.done} steps" if self.first_step == 1 else
             f"steps {self.first_step}-{self.done} of {self.total_steps}")
    self._line(f"fine-tuned {steps} in {format_duration(elapsed)}")

  def close(self) -> None:
    """Leaves the bar's last state on screen and gives the terminal back (its cursor); safe
    to call again, and after a failed step."""
    if self.bar is not None:
      self.bar.close()

  # ---- the pace ------------------------------------------------------------------------

  def seconds_per_step(self, now: Optional[float] = None) -> Optional[float]:
    """Training seconds per step after the first (which traces and compiles), evaluations
    left out; None before the second step."""
    if self.done <= self.first_step:
      return None
    now = self.clock() if now is None else now
    return ((now - self.first_step_done - self.evaluation_seconds)
            / (self.done - self.first_step))

  def _status(self, now: float) -> str:
    """'loss 0.6931  0.21 s/step  ETA 3:05'."""
    parts = [] if self.loss is None else [f"loss {self.loss:.4f}"]
    per_step = self.seconds_per_step(now)
    if per_step is not None:
      parts.append(f"{per_step:.2f} s/step")
      remaining = self.total_steps - self.done
      if remaining > 0:
        evaluations = 0  # those still to come: every eval_every steps and after the last step
        if self.eval_every:
          evaluations = (self.total_steps - 1) // self.eval_every - self.done // self.eval_every + 1
        eta = per_step * remaining + evaluations * self.last_evaluation_seconds
        parts.append(f"ETA {format_duration(eta)}")
    return "  ".join(parts)

  # ---- rendering -----------------------------------------------------------------------

  def _draw_bar(self, now: float, status: str) -> None:
    self.bar.draw(self.done, status)
    self.last_output = now

  def _line(self, text: str) -> None:
    """A whole line; on a terminal above the bar, which stays at the bottom."""
    if self.mode != "none":
      if self.bar is not None:
        self.bar.print(text)
      else:
        print_line(text, self.stream)
    self.last_output = self.clock()


class _Bar:
  """The bar of a terminal, drawn by rich: "step  120/1000 ━━━━╸━━━━ loss 0.6931  0.21 s/step
  ETA 3:05", redrawn in place when asked (no thread of its own), cut to the terminal's width,
  whole lines printed above it. It owns the cursor (hidden) from creation to close()."""

  def __init__(self, stream: TextIO, total_steps: int, done: int = 0):
    self.total_steps, self.digits = total_steps, len(str(total_steps))
    # markup off: "[k/n]" and scores are text, not rich markup.
    self.console = rich.console.Console(file=stream, force_terminal=True, markup=False,
                                        highlight=False, emoji=False)
    self.progress = rich.progress.Progress(
        rich.progress.TextColumn("{task.description}", markup=False,
                                 table_column=rich.table.Column(no_wrap=True)),
        rich.progress.BarColumn(bar_width=BAR_WIDTH,
                                table_column=rich.table.Column(no_wrap=True)),
        _StatusColumn(), console=self.console, auto_refresh=False, redirect_stderr=False)
    self._fit_to_terminal()
    self.task = self.progress.add_task(self._counter(done), total=total_steps, completed=done,
                                       status="")
    self.progress.start()

  def draw(self, done: int, status: str) -> None:
    self._fit_to_terminal()
    self.progress.update(self.task, completed=done, description=self._counter(done),
                         status=status, refresh=True)

  def print(self, text: str) -> None:
    self.console.print(text, soft_wrap=True)

  def close(self) -> None:
    self.progress.stop()

  def _counter(self, done: int) -> str:
    return f"step {done:>{self.digits}}/{self.total_steps}"

  def _fit_to_terminal(self) -> None:
    # One column short of the width: a line as wide as the terminal leaves some terminals'
    # cursor on the next line.
    self.console.width = shutil.get_terminal_size().columns - 1


class _StatusColumn(rich.progress.ProgressColumn):
  """The loss, pace and ETA (or what the run is doing): cut, not wrapped, when the terminal is
  narrow, so the counter and the bar keep their width."""

  def render(self, task) -> rich.text.Text:
    return rich.text.Text(task.fields["status"], no_wrap=True, overflow="crop")


def step_line(step: int, total_steps: int, text: str) -> str:
  """'step 120/1000: TEXT': the start of every progress line of training (fine-tuning's and
  the pretraining loop's)."""
  return f"step {step}/{total_steps}: {text}"


def print_line(text: str, stream: Optional[TextIO] = None) -> None:
  """One whole line of progress to `stream` (default: sys.stdout now), flushed, with no log
  prefix: the printer of every training progress line that is not the bar's."""
  stream = stream or sys.stdout
  stream.write(text + "\n")
  stream.flush()


def _is_terminal(stream) -> bool:
  isatty = getattr(stream, "isatty", None)
  return bool(isatty and isatty())
