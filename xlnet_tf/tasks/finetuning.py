"""The one fine-tuning loop of every task: training steps under any tf.distribute strategy
(tasks.finetuning_steps, on the loop pretraining uses), evaluation on dev every `eval_every`
steps, the best weights kept (by the task's metric, higher is better) and reloaded at the end,
progress shown as it goes (xlnet_tf.utils.progress: a bar on a terminal, plain lines in logs)
and written as TensorBoard scalars (training.summaries, as pretraining writes them).

A task supplies its model (a head over XLNetModel), its training batches, its loss (or the
head's own, `loss_sums`) and an `evaluate()` returning its dev scores; the task modules
(classification, squad, race, tagging) and the CLIs in run/ are thin over this.
Any strategy: one device, mirrored replicas, multi-worker, TPU (Keras 3's Model.fit does not
run under MultiWorkerMirroredStrategy; user code may still fit the heads).

With a checkpoint directory (the CLIs: --output_dir/checkpoints) the run saves every save_steps
and on SIGTERM or SIGINT (training.preemption) what resumes it (tasks.finetuning_checkpoints);
the same call again resumes there and ends as an uninterrupted run would: the same weights,
best/ and dev history.
"""

import contextlib
import dataclasses
import math
import os
from typing import Callable, Dict, Optional, Sequence, TextIO, Union

from absl import logging
import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.checkpoints import own, pretrained
from xlnet_tf.checkpoints.labels import saved_labels
from xlnet_tf.config import ARCHITECTURE_KEYS
from xlnet_tf.text.preprocessor import XLNetPreprocessor
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import StoppedBySignal, UserInputError
from xlnet_tf.modeling.backbone import backbone_inputs
from xlnet_tf.utils.progress import (ProgressDisplay, check_progress_mode, numeric_scores,
                                     print_line)
from xlnet_tf.tasks.finetuning_checkpoints import (FINISHED_FILE, FinetuningCheckpoints,
                                                   run_record)
from xlnet_tf.tasks.finetuning_steps import distributed_batches, finetuning_steps
from xlnet_tf.training import preemption
from xlnet_tf.training import run_lock
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.training import summaries
from xlnet_tf.training.distributed_steps import check_accumulation
from xlnet_tf.training.options import (OptimizerOptions, RuntimeOptions, accepts_group_fields,
                                       group_field)

BEST_DIR = "best"  # under the output directory: the kept weights (own format)


class NonFiniteTrainingError(UserInputError):
  """The training loss or the weights became NaN or infinite (too high a learning rate, bad
  data): a run ends with it, one line, and keeps none of its weights."""


@accepts_group_fields
@dataclasses.dataclass
class FinetuningOptions:
  """How a fine-tuning run runs. Its optimizer (OptimizerOptions; fine-tuning's default: no
  weight decay) and runtime (RuntimeOptions: the seed of the shuffling and the dropout masks)
  are groups whose fields it also takes by name (training.options). The checks name the
  CLIs' flags.

  The training length is train_steps, or num_train_epochs passes over the training examples
  (None and None: DEFAULT_EPOCHS of them): `training_length` turns epochs into steps once the
  examples are counted; finetune takes steps."""
  train_steps: Optional[int] = None
  batch_size: int = 32               # global: over all replicas and micro-batches
  optimizer: OptimizerOptions = group_field(OptimizerOptions, weight_decay=0.0)
  eval_every: Optional[int] = None   # default: once, at the end
  runtime: RuntimeOptions = group_field(RuntimeOptions)
  jit_compile: Union[bool, str] = "auto"
  progress: str = "auto"             # progress.PROGRESS_MODES: bar on a terminal, else lines
  # TensorBoard event files (the CLIs: --output_dir/train); each run replaces the last one's.
  # None: none.
  summary_dir: Optional[str] = None
  # Micro-batches per step (gradients added up, one update equal to the whole batch's).
  gradient_accumulation_steps: int = 1
  # What resumes the run (tasks.finetuning_checkpoints; the CLIs: --output_dir/checkpoints),
  # saved every save_steps and when SIGTERM or SIGINT stops it. None: no checkpoints (and the
  # signals act as they do outside a run).
  checkpoint_dir: Optional[str] = None
  save_steps: int = 500
  num_train_epochs: Optional[float] = None  # instead of train_steps (training_length)

  def __post_init__(self):
    check_progress_mode(self.progress)
    check_accumulation(self.gradient_accumulation_steps, self.batch_size)
    epochs = self.num_train_epochs
    if epochs is not None and not (math.isfinite(epochs) and epochs > 0):
      raise UserInputError(f"--num_train_epochs={epochs:g}: must be a positive number")
    if self.train_steps is not None and epochs is not None:
      raise UserInputError(f"--train_steps={self.train_steps} and --num_train_epochs="
                           f"{epochs:g} both set the training length; give one")
    # Named as the CLIs' flags (train_batch_size is batch_size here).
    steps = 1 if self.train_steps is None else self.train_steps  # None: from epochs
    for flag, value, smallest in (("train_steps", steps, 1),
                                  ("train_batch_size", self.batch_size, 1),
                                  ("warmup_steps", self.optimizer.warmup_steps, 0),
                                  ("eval_every", self.eval_every or 1, 1),
                                  ("save_steps", self.save_steps, 1)):
      if value < smallest:
        raise UserInputError(f"--{flag}={value}: must be at least {smallest}")
    learning_rate = self.optimizer.learning_rate
    if not (math.isfinite(learning_rate) and learning_rate > 0):
      raise UserInputError(f"--learning_rate={learning_rate}: must be a positive number")


# TensorFlow's kernels index a tensor with 32-bit integers in places (a reshape of the attention
# scores fails with an overflow past this).
MAX_TENSOR_ELEMENTS = 2**31 - 1


def check_sequence_length(config, max_seq_length: int, batch_size: int) -> None:
  """Refuses a --max_seq_length whose attention scores of one batch [B, N, T, T] would hold more
  values than TensorFlow can index (the run would fail inside the model)."""
  scores = batch_size * config.n_head * max_seq_length ** 2
  if scores > MAX_TENSOR_ELEMENTS:
    raise UserInputError(
        f"--max_seq_length={max_seq_length}: the attention scores of a batch (batch "
        f"{batch_size} x n_head {config.n_head} x {max_seq_length}^2 = {scores:.3g} values) "
        "exceed 2^31 - 1, the most one tensor can index; use a shorter --max_seq_length or a "
        "smaller batch")


# Passes over the training data when neither train_steps nor num_train_epochs is given (Hugging
# Face's Trainer's default), so a small file is not trained for a fixed 1000 steps.
DEFAULT_EPOCHS = 3.0


def training_length(options: FinetuningOptions, train_examples: int,
                    examples: str = "examples") -> FinetuningOptions:
  """`options` with its train_steps: its own, else num_train_epochs (default DEFAULT_EPOCHS)
  over the `train_examples` at its batch size, rounded up, said in one line (`examples`: what
  a training row is, e.g. windows)."""
  if options.train_steps is not None:
    return options
  given = options.num_train_epochs is not None
  epochs = options.num_train_epochs if given else DEFAULT_EPOCHS
  steps = max(1, math.ceil(epochs * train_examples / options.batch_size))
  print(f"Training {steps} step{'s' * (steps != 1)}: {epochs:g} epochs of {train_examples} "
        f"{examples} at --train_batch_size={options.batch_size}"
        + ("" if given else " (the default; --num_train_epochs or --train_steps sets it)"))
  return dataclasses.replace(options, train_steps=steps, num_train_epochs=None)


def feature_dataset(features: Dict[str, np.ndarray], batch_size: int, *,
                    extra_keys: Sequence[str] = (), label_key: Optional[str] = None,
                    shuffle: bool = False, seed: int = 0, repeat: bool = False) -> tf.data.Dataset:
  """Batches of the backbone's inputs in `features` (plus `extra_keys`), with
  `features[label_key]` as the target when given. Training batches (repeat) drop the
  remainder, so every step has the same shape."""
  inputs = {**backbone_inputs(features), **{key: features[key] for key in extra_keys}}
  elements = inputs if label_key is None else (inputs, features[label_key])
  dataset = tf.data.Dataset.from_tensor_slices(elements)
  if shuffle:
    size = len(next(iter(inputs.values())))
    dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
  if repeat:
    dataset = dataset.repeat()
  return dataset.batch(batch_size, drop_remainder=repeat).prefetch(tf.data.AUTOTUNE)


def predict(model, features: Dict[str, np.ndarray], batch_size: int,
            extra_keys: Sequence[str] = ()):
  """The model's outputs (NumPy) on every example of `features`, in order."""
  return model.predict(feature_dataset(features, batch_size, extra_keys=extra_keys), verbose=0)


class _Finetuning:
  """Drives the steps: train_steps of them (the last period may be shorter than eval_every);
  after every period evaluates on dev and saves the weights when the metric improves (without
  an evaluation, saves the latest weights); reports each step and evaluation to `display` and
  to `writer` (TensorBoard: each step's loss, gradient norm, learning rate and examples/s at
  the display's pace, each evaluation's scores as dev/NAME)."""

  def __init__(self, model, steps, evaluate, metric, directory, every, display, writer,
               batch_size: int, checkpoints: Optional[FinetuningCheckpoints] = None,
               save_steps: int = 0, made_best_dir: bool = False):
    self.model, self.steps, self.evaluate, self.metric = model, steps, evaluate, metric
    self.directory, self.every, self.display = directory, every, display
    self.writer, self.batch_size = writer, batch_size
    self.checkpoints, self.save_steps, self.made_best_dir = checkpoints, save_steps, made_best_dir
    self.best, self.history = None, []
    self.period_losses = []  # the training losses of the evaluation period under way

  def resume_from(self, state: Dict) -> int:
    """Takes the loop's state from a checkpoint (FinetuningCheckpoints); returns its step."""
    self.history, self.best = state["history"], state["best"]
    self.period_losses = state["period_losses"]
    self.made_best_dir = state["made_best_dir"]
    return state["step"]

  def train(self, batches, train_steps: int, start: int = 0) -> None:
    """Steps start+1 ... train_steps (`batches`: the training batches from step start+1 on)."""
    self.display.begin(start)
    try:
      for step in range(start + 1, train_steps + 1):
        loss, grad_norm, _ = self.steps.train_step(batches)
        loss = float(loss)
        if not math.isfinite(loss):
          raise NonFiniteTrainingError(f"fine-tuning stopped at step {step}: the training loss "
                                       f"is {loss}; no weights of this run are kept (a lower "
                                       "--learning_rate may help)")
        self.period_losses.append(loss)
        # The period's mean so far, as Model.fit showed it.
        self.display.step(step, float(np.mean(self.period_losses)))
        self._write_step(step, loss, float(grad_norm))
        if step % self.every == 0 or step == train_steps:
          self._end_of_period(step, float(np.mean(self.period_losses)))
          self.period_losses = []
        self._save_or_stop(step, train_steps)
    finally:  # however the run ends, the terminal is given back
      self.display.close()
    self.display.end()

  def _save_or_stop(self, step: int, train_steps: int) -> None:
    """Saves the checkpoint every save_steps (not after the last step: the run then
    finishes); on SIGTERM or SIGINT saves this step's and stops (training.preemption)."""
    if self.checkpoints is None:
      return
    saved = None
    if step % self.save_steps == 0 and step < train_steps:
      saved = self._save_checkpoint(step)
    signal_number = preemption.requested(self.steps.strategy)
    if signal_number:
      self.writer.flush()
      raise preemption.stopped(signal_number, step, saved or self._save_checkpoint(step))

  def _save_checkpoint(self, step: int) -> str:
    self._check_weights(step)
    return self.checkpoints.save(step, {
        "history": self.history, "best": self.best, "period_losses": self.period_losses,
        "made_best_dir": self.made_best_dir})

  def _write_step(self, step: int, loss: float, grad_norm: float) -> None:
    values = {"loss": loss, "grad_norm": grad_norm,
              "learning_rate": float(self.steps.optimizer.learning_rate)}
    seconds_per_step = self.display.seconds_per_step()
    if seconds_per_step:  # from the second step: the first one compiles
      values["examples_per_sec"] = self.batch_size / seconds_per_step
    summaries.write_scalars(self.writer, step, values)

  def _end_of_period(self, step: int, loss: float) -> None:
    if self.evaluate is None:
      logging.debug("step %d: loss %s", step, loss)
      self._save(step)
      return
    self.display.evaluating()
    result = dict(self.evaluate(), step=step, loss=loss)
    self.history.append(result)
    # (its "loss" is the period's training loss, already in the curves)
    summaries.write_scalars(self.writer, step, {
        f"dev/{name}": value for name, value in numeric_scores(result).items() if name != "loss"})
    self.writer.flush()  # an evaluation is what one watches for
    # The display shows it (a log line on stderr would cut into the bar); the history keeps it.
    logging.debug("dev at step %d: %s", step, result)
    if self.best is None or result[self.metric] > self.best[self.metric]:
      self.best = result
      self._save(step)
    self.display.evaluation(step, result, self.best, self.metric)

  def _save(self, step: int) -> None:
    if not self.directory:
      return
    self._check_weights(step)
    checkpoints.save_pretrained(self.model, self.directory)

  def _check_weights(self, step: int) -> None:
    # A finite loss can still leave non-finite weights behind (the last update of the period).
    if not all(np.isfinite(weight).all() for weight in self.model.get_weights()):
      raise NonFiniteTrainingError(f"fine-tuning stopped at step {step}: the weights are no "
                                   "longer finite; no weights of this run are kept (a lower "
                                   "--learning_rate may help)")


def finetune(model, train_dataset: tf.data.Dataset, options: FinetuningOptions, *,
             evaluate: Optional[Callable[[], Dict[str, float]]] = None,
             metric: Optional[str] = None, best_dir: Optional[str] = None,
             loss=None, progress_stream: Optional[TextIO] = None) -> Dict:
  """Fine-tunes `model`, keeping the weights with the best dev score.

  Trains for options.train_steps on the (repeated) training batches of options.batch_size
  rows (global) under the strategy whose scope built it (none: one device). Every eval_every
  steps (and after the last step) `evaluate()` scores dev; the weights with the best `metric`
  are saved to `best_dir` (with the tokenizer and packing the head carries: attach_tokenizer)
  and loaded back into `model` at the end (without `evaluate`, the last weights). A non-finite
  loss or weights end the run with NonFiniteTrainingError naming the step; a run that fails
  removes the `best_dir` it created, unless it can resume (it saved a checkpoint).
  Steps run on training.distributed_steps (tasks.finetuning_steps): the same update on any
  strategy, options.gradient_accumulation_steps micro-batches a step. Only the chief of a
  multi-worker run writes `best_dir` and options.summary_dir (TensorBoard scalars) and shows
  progress, to `progress_stream` (default stdout) as options.progress says
  (progress.ProgressDisplay).

  With options.checkpoint_dir the run saves a checkpoint every options.save_steps and, on
  SIGTERM or SIGINT, of the step it reached, then raises errors.StoppedBySignal; called again
  the same way it resumes from the newest checkpoint that reads whole (`train_dataset` must be
  the same deterministic batches: they are skipped to the checkpoint's step) and ends as an
  uninterrupted run; called again after it finished, it trains no more and returns the
  finished run's result (tasks.finetuning_checkpoints).

  Args:
    model: the head to train, built under the strategy's scope (if any).
    train_dataset: the training batches, repeated (a run takes options.train_steps of them).
    options: the FinetuningOptions (steps, batch size, optimizer, evaluation, checkpoints).
    evaluate: called after each evaluation period; returns the dev scores {name: value}.
      None: no evaluation, the last weights are kept.
    metric: the dev score (higher is better) that chooses the best weights; needed with
      `evaluate`.
    best_dir: where the best weights are saved (own format); None: not saved.
    loss: a Keras loss of (labels, outputs), or None when the head has its own (loss_sums).
    progress_stream: where progress is shown (default stdout).

  Returns:
    {"history": [each evaluation's dev scores with its step and loss], "best": the best
    evaluation's (None without `evaluate`), "metric": `metric`}.

  Raises:
    ValueError: for `evaluate` without `metric`, or options without train_steps (their epochs
      not yet turned into steps: training_length).
    NonFiniteTrainingError: when the loss or the weights become NaN or infinite.
    StoppedBySignal: on SIGTERM or SIGINT with options.checkpoint_dir, after saving the step.
    UserInputError: when best_dir holds the model of another run.
  """
  if evaluate is not None and not metric:
    raise ValueError("finetune: `metric` names the dev score to keep the best weights by")
  if options.train_steps is None:
    raise ValueError("finetune: options.train_steps is None; training_length gives the steps "
                     "of options.num_train_epochs")
  strategy = tf.distribute.get_strategy()
  check_accumulation(options.gradient_accumulation_steps, options.batch_size,
                     strategy.num_replicas_in_sync)
  chief = strategy_lib.is_chief(strategy)
  best_dir = best_dir if chief else None
  every = min(options.eval_every or options.train_steps, options.train_steps)
  steps = finetuning_steps(strategy, model, options, loss)
  display = ProgressDisplay(options.progress if chief else "none", options.train_steps,
                            every if evaluate is not None else None, progress_stream)
  saved_run = (FinetuningCheckpoints(options.checkpoint_dir, model, steps,
                                     run_record(model, options, metric), chief)
               if options.checkpoint_dir else None)
  if best_dir:
    check_best_dir_kind(model, best_dir)
  new_best_dir = bool(best_dir) and not files.exists(best_dir)
  locked = best_dir or (options.checkpoint_dir if chief else None)
  # One run at a time writes best_dir and the checkpoints (training.run_lock).
  with run_lock.hold(locked) if locked else contextlib.nullcontext():
    finished = saved_run.finished() if saved_run else None
    if finished is not None:
      if restore_best(model, best_dir):
        print_line(_finished_line(finished, options, saved_run.directory, best_dir))
        return finished
      saved_run.forget_finished()  # its weights were best/'s, now gone: it trains anew
    state = saved_run.restore(options.train_steps) if saved_run else None
    writer = summaries.scalar_writer(options.summary_dir if chief else None,
                                     replace=state is None)
    driver = _Finetuning(model, steps, evaluate, metric, best_dir, every, display, writer,
                         options.batch_size, saved_run, options.save_steps,
                         made_best_dir=new_best_dir)
    start = driver.resume_from(state) if state else 0
    batches = train_dataset.skip(start) if start else train_dataset
    try:
      with preemption.watch() if saved_run else contextlib.nullcontext():
        driver.train(distributed_batches(strategy, batches, options.batch_size),
                     options.train_steps, start)
    except StoppedBySignal:
      raise  # the checkpoint it saved resumes the run, with best/ as it is
    except BaseException as error:
      # No weights of a failed run are left behind (a directory that was there before is the
      # user's), unless its checkpoints resume it; its curves stay: they show how it failed.
      resumable = (saved_run is not None and saved_run.saved_any()
                   and not isinstance(error, NonFiniteTrainingError))
      if saved_run is not None and not resumable:
        saved_run.discard()
      if driver.made_best_dir and not resumable and files.exists(best_dir):
        files.rmtree(best_dir)
      raise
    finally:
      writer.close()
    restore_best(model, best_dir)
    result = {"history": driver.history, "best": driver.best, "metric": metric}
    if saved_run is not None:
      saved_run.finish(result)
  return result


def _finished_line(result: Dict, options: FinetuningOptions, directory: str,
                   best_dir: Optional[str]) -> str:
  """What a call of a run that finished says: that it trains no more, and what it left."""
  best, metric = result.get("best"), result.get("metric")
  left = (f"best dev {metric} {best[metric]:.4g} at step {best['step']}" if best and metric
          else "the last weights")
  where = f" in {best_dir}" if best_dir else ""
  return (f"Fine-tuning finished earlier ({options.train_steps} steps, {directory}"
          f"/{FINISHED_FILE}): not training again; {left}{where}")


def attach_tokenizer(model, tokenizer, max_seq_length: int) -> None:
  """Gives the head `model` the tokenizer a run reads its text with and the packing of its
  `max_seq_length` (`.tokenizer`, `.preprocessor`; a long-document classifier's segments too):
  every save of best/ then holds them beside the weights (spiece.model, tokenizer_config.json,
  preprocessor.json), so an export or from_pretrained of best/ reads text as the run did,
  without --sp_path."""
  model.tokenizer = tokenizer
  model.preprocessor = XLNetPreprocessor(tokenizer, max_seq_length,
                                         num_segments=getattr(model, "max_segments", 1))


def load_pretrained_weights(backbone, path: str, checkpoint_format: str = "own"):
  """Loads a pretrained checkpoint (--init_checkpoint: a directory of `checkpoint_format`
  holding a backbone or any head, or an original checkpoint prefix) into `backbone`, as
  XLNetModel.from_pretrained does; returns the loader's report. A damaged file is a user error
  naming it, not a reader's traceback. A quantized model's directory is refused: its int8
  weights are for inference."""
  if checkpoint_format == "own" and checkpoints.own.stored_quantization(path):
    raise UserInputError(f"--init_checkpoint={path}: holds a model quantized to "
                         f"{checkpoints.own.stored_quantization(path)} (for inference); "
                         "fine-tuning starts from float weights")
  try:
    return pretrained.load_backbone(backbone, pretrained.Pretrained(path, path, checkpoint_format))
  except (UserInputError, FileNotFoundError):
    raise
  except (OSError, ValueError) as error:  # h5py, safetensors, TensorFlow's checkpoint reader
    where = (os.path.join(path, checkpoints.own.WEIGHTS_FILE) if checkpoint_format == "own"
             else path)
    raise UserInputError(f"{where}: not a readable checkpoint (--init_checkpoint, format "
                         f"{checkpoint_format}): {error}") from None


def check_best_dir_kind(model, best_dir: str) -> None:
  """A run directory holds one run's kind: best_dir, when it holds a model, must hold this
  model's kind (the head's class and settings, the architecture, the labels), or the run is
  refused with one line naming what differs; it would otherwise replace a model of another
  task, or (resumed) mix with it."""
  if not files.exists(os.path.join(best_dir, own.CONFIG_FILE)):
    return  # new, or holding no model yet
  stored_head = own.read_head_file(best_dir)
  stored_class, stored_arguments = stored_head or ("XLNetModel", {})
  differences = []
  if stored_class != type(model).__name__:
    differences.append(f"an {stored_class}, not an {type(model).__name__}")
  else:
    arguments = model.head_config() if hasattr(model, "head_config") else {}
    run_time = getattr(type(model), "RUN_TIME_ARGUMENTS", ())
    differences += [f"{key} {stored_arguments.get(key)!r}, not {arguments.get(key)!r}"
                    for key in sorted(set(arguments) | set(stored_arguments))
                    if key not in run_time and stored_arguments.get(key) != arguments.get(key)]
  stored_config = own.stored_config(best_dir, {})
  config = checkpoints.backbone_of(model).config
  differences += [f"{key} {getattr(stored_config, key)!r}, not {getattr(config, key)!r}"
                  for key in ARCHITECTURE_KEYS
                  if getattr(stored_config, key) != getattr(config, key)]
  stored_labels = saved_labels(best_dir)
  labels = getattr(model, "labels", None)
  if stored_labels is not None and labels is not None and list(labels) != stored_labels:
    differences.append(f"labels {stored_labels}, not {list(labels)}")
  if differences:
    raise UserInputError(f"{best_dir}: holds the model of another run ({'; '.join(differences)});"
                         " use another --output_dir, or remove it to train this one there")


def restore_best(model, best_dir: Optional[str]) -> bool:
  """Loads the weights kept in `best_dir` into `model`, if any were saved there."""
  if not best_dir or not files.exists(os.path.join(best_dir, checkpoints.own.WEIGHTS_FILE)):
    return False
  checkpoints.load_own_checkpoint(model, best_dir)
  return True
