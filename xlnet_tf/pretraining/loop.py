"""Pretraining (permutation LM or masked LM, see heads.pretrainer) with a custom loop under any
tf.distribute strategy.

A custom loop (strategy.run), not Model.fit: fit fails under MultiWorkerMirroredStrategy in
TF 2.21 / Keras 3, and the memory must travel from step to step per replica. PretrainingRun
builds the run and trains it; its parts, one module each:

  replica_steps     a step per replica (training.distributed_steps): the loss and the update
                    equal a single-device run on the same global batch, with or without
                    gradient accumulation (float16: loss scaling, see training.loss_scale)
  run_checkpoints   model, optimizer (its step is the data position) and, per worker, the
                    memory; a run restarted with the same model_dir resumes from the latest
                    checkpoint that reads whole (training.resume)
  step_log          progress lines (printed as fine-tuning's), TensorBoard scalars
                    (training.summaries) and the records of the steps (the dynamic loss
                    scale's skipped steps included) and held-out evaluations
  time_budget       with max_seconds: the step count that fits, from the measured speed
  training.divergence   a non-finite loss (other than float16 steps that the dynamic loss
                    scale skips) stops the run with TrainingDivergedError before anything is
                    saved

Memory stays with its replica (each replica always reads the same rows of the stream; the run's
`memory`, a modeling.memory.RecurrenceMemory).
Dropout draws its masks from a seed fixed by (options.runtime.seed, step, replica)
(ops.random.step_seed), so a run killed at any point and resumed ends with the weights of an
uninterrupted run. SIGTERM or SIGINT while it trains (training.preemption) saves the step it
reached and raises errors.StoppedBySignal. The chief holds model_dir's run lock
(training.run_lock) while it trains; the caller then writes the backbone and the LM for what
follows with `export()`.
"""

import dataclasses
import hashlib
import math
import os
import time
from typing import Dict, Optional, Union

import numpy as np
import tensorflow as tf

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf import checkpoints
from xlnet_tf.config import XLNetConfig
from xlnet_tf.pretraining.data.records import (explain_data_loss, load_record_info,
                                               pretraining_dataset)
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.utils.progress import print_line
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.memory import RecurrenceMemory
from xlnet_tf.training import loss_scale as loss_scale_lib
from xlnet_tf.training import preemption
from xlnet_tf.training import run_lock
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.training.distributed_steps import check_accumulation, step_optimizer
from xlnet_tf.training.divergence import DivergenceCheck, TrainingDivergedError
from xlnet_tf import objectives
from xlnet_tf.pretraining import summaries
from xlnet_tf.pretraining.replica_steps import PretrainingSteps
from xlnet_tf.pretraining.run_checkpoints import RunCheckpoints, check_checkpoint_model
from xlnet_tf.pretraining.step_log import StepLog
from xlnet_tf.pretraining.time_budget import StepBudget
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.training.options import (OptimizerOptions, RuntimeOptions, accepts_group_fields,
                                       group_field)

# TrainingDivergedError (training.divergence) is raised by train() and importable from here.
__all__ = ["LM_DIR", "PRETRAINED_DIR", "PretrainingOptions", "PretrainingRun",
           "TrainingDivergedError", "write_run_summary"]


@accepts_group_fields
@dataclasses.dataclass
class PretrainingOptions:
  """How a pretraining run runs. Its optimizer (OptimizerOptions) and runtime (RuntimeOptions:
  the seed) are groups whose fields it also takes by name (training.options). model_dir and
  train_data are the run's own: a recipe (recipes.PretrainingRecipeOptions) leaves them None."""
  model_dir: Optional[str] = None
  train_data: Optional[str] = None    # record_info.json or its directory
  train_steps: int = 1000
  global_batch_size: Optional[int] = None  # default: the data's bsz_per_host x workers
  optimizer: OptimizerOptions = group_field(OptimizerOptions)
  save_steps: int = 1000
  keep_checkpoints: int = 3
  log_steps: int = 100
  jit_compile: bool = True
  valid_data: Optional[str] = None
  eval_batches: int = 20
  eval_every: Optional[int] = None    # held-out evaluation every this many steps (curves)
  # float16: "dynamic" (training.loss_scale: starts at initial_loss_scale, doubles after
  # loss_scale_growth_steps finite steps) or a static scale; None: no loss scaling.
  loss_scale: Union[None, float, str] = None
  initial_loss_scale: float = loss_scale_lib.INITIAL_SCALE
  loss_scale_growth_steps: int = loss_scale_lib.GROWTH_STEPS
  summaries: bool = True
  init_checkpoint: Optional[str] = None
  init_checkpoint_format: str = "own"
  recompute_blocks: bool = False      # per-block recomputation (memory for long sequences)
  max_seconds: Optional[float] = None  # time budget: train_steps becomes what fits (see train)
  objective: Optional[str] = None     # checked against the data's (None: the data's)
  next_sentence: bool = False         # add the next-sentence loss (the A/B label)
  # Dropout masks are a function of (runtime.seed, step, replica).
  runtime: RuntimeOptions = group_field(RuntimeOptions)
  # Micro-batches per step, one after another, gradients added up: one update equal to the
  # whole batch's (training.distributed_steps).
  gradient_accumulation_steps: int = 1
  # clm: "full" (every position's loss) or "half" (each segment's recent half only: the
  # positions that see a context at least half a segment long; Transformer-XL's Table 5).
  # Held-out evaluation is always over every position.
  loss_positions: str = "full"


def _check_data(info, config: XLNetConfig, global_batch: int, strategy, source: str):
  settings = info["settings"]
  workers = strategy_lib.num_workers(strategy)
  replicas = strategy.num_replicas_in_sync
  local_replicas = replicas // workers
  problems = []
  if info["tokenizer"]["vocab_size"] > config.n_token:
    problems.append(f"the data's vocabulary ({info['tokenizer']['vocab_size']}) exceeds the "
                    f"model's n_token ({config.n_token})")
  if global_batch != settings["bsz_per_host"] * workers:
    problems.append(f"global batch {global_batch} must be the data's bsz_per_host "
                    f"({settings['bsz_per_host']}) x workers ({workers}): the rows of the "
                    "stream carry the memory from step to step")
  if global_batch % replicas:
    problems.append(f"global batch {global_batch} is not divisible by the {replicas} replicas")
  if settings["bi_data"] != config.bi_data:
    problems.append(f"bi_data: data {settings['bi_data']}, model {config.bi_data}")
  if config.bi_data:
    if (global_batch // replicas) % 2:
      problems.append(f"with bi_data each replica needs an even batch; got "
                      f"{global_batch // replicas}")
    if settings["num_core_per_host"] != local_replicas:
      problems.append(f"the data were laid out for num_core_per_host="
                      f"{settings['num_core_per_host']} (forward/backward halves per core), "
                      f"this run has {local_replicas} replicas per worker")
  objective = objectives.named(settings["objective"])
  if config.attn_type != objective.attn_type:
    problems.append(f"objective {objective.name} needs attn_type {objective.attn_type}; the "
                    f"model has {config.attn_type!r}")
  if config.mem_len and config.reuse_len != settings["reuse_len"]:
    problems.append(f"reuse_len: data {settings['reuse_len']}, model {config.reuse_len}")
  if problems:
    raise UserInputError(f"{source}: cannot train on these data:\n  " + "\n  ".join(problems))


class PretrainingRun:
  """Builds the model, optimizer, data and checkpointing; `train()` runs to train_steps."""

  def __init__(self, strategy: tf.distribute.Strategy, config: XLNetConfig,
               options: PretrainingOptions):
    self.strategy = strategy
    self.config = config
    self.options = options
    if not (options.model_dir and options.train_data):
      raise ValueError("PretrainingOptions: a run needs model_dir and train_data")
    self.info = load_record_info(options.train_data)
    workers = strategy_lib.num_workers(strategy)
    self.global_batch = options.global_batch_size or self.info["settings"]["bsz_per_host"] * workers
    _check_data(self.info, config, self.global_batch, strategy, options.train_data)
    check_accumulation(options.gradient_accumulation_steps, self.global_batch,
                       strategy.num_replicas_in_sync, 2 if config.bi_data else 1)
    self.objective = self.info["settings"]["objective"]
    if options.objective and options.objective != self.objective:
      raise UserInputError(f"{options.train_data}: the data were made for objective "
                           f"{self.objective!r}, this run trains {options.objective!r}; create the "
                           f"data with --objective={options.objective}")
    lm_objective = objectives.named(self.objective)
    objectives.check_loss_positions(options.loss_positions, lm_objective)
    if options.next_sentence and not lm_objective.has_pairs:
      raise UserInputError(f"next_sentence: {lm_objective.display_name} data (objective "
                           f"{lm_objective.name}) hold no A/B pairs")
    self.seq_len = self.info["settings"]["seq_len"]
    self.local_replicas = strategy.num_replicas_in_sync // workers
    self.per_replica_batch = self.global_batch // strategy.num_replicas_in_sync
    if options.valid_data:
      valid_info = load_record_info(options.valid_data)
      _check_data(valid_info, config, self.global_batch, strategy, options.valid_data)
      if valid_info["settings"]["objective"] != self.objective:
        raise UserInputError(f"{options.valid_data}: objective "
                             f"{valid_info['settings']['objective']!r} differs from the "
                             f"training data's {self.objective!r}")
    self.chief = strategy_lib.is_chief(strategy)
    self.worker = strategy_lib.worker_index(strategy)
    # Every worker reads the checkpoints in model_dir; only the chief writes them there
    # (run_checkpoints, training.resume).
    self.checkpoint_dir = options.model_dir
    self._check_checkpoint_model()  # before anything is built or made
    if self.chief:
      files.makedirs(self.checkpoint_dir)
    with strategy.scope():
      self.model = XLNetPretrainer(XLNetModel(config, recompute_blocks=options.recompute_blocks),
                                   objective=self.objective, next_sentence=options.next_sentence)
      self.optimizer = step_optimizer(self.model, options.optimizer, options.train_steps,
                                      adjustable_total=options.max_seconds is not None)
      self.loss_scale = (loss_scale_lib.DynamicLossScale(options.initial_loss_scale,
                                                         options.loss_scale_growth_steps)
                         if options.loss_scale == "dynamic" else None)
    # Each replica's memory of its rows of the stream, carried from step to step.
    self.memory = RecurrenceMemory(config, self.per_replica_batch, self.model.compute_dtype,
                                   strategy=strategy, local_replicas=self.local_replicas)
    state = {"loss_scale": self.loss_scale} if self.loss_scale is not None else {}
    self.checkpoints = RunCheckpoints(
        tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, **state),
        self.checkpoint_dir, options.keep_checkpoints, self.worker, self._checkpoint_model(),
        self.memory, chief=self.chief)
    self.steps = PretrainingSteps(strategy, self.model, self.optimizer, self.loss_scale, options)
    self.evaluation_seconds = None  # what an evaluation costs once compiled (see evaluate)

  # ---- data ------------------------------------------------------------------------------
  def _distributed_data(self, data: str, skip_batches: int = 0, repeat: bool = True,
                        loss_positions: str = "full"):
    def dataset_fn(context):
      dataset = pretraining_dataset(data, batch_size=self.global_batch // max(
          context.num_input_pipelines, 1), input_context=context, repeat=repeat,
          skip_batches=skip_batches)
      if loss_positions == "half":
        dataset = dataset.map(objectives.recent_half_targets)
      # Successive elements go to successive local replicas: row block r -> replica r.
      return dataset.rebatch(self.per_replica_batch, drop_remainder=True)
    return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

  # ---- evaluation ------------------------------------------------------------------------
  def evaluate(self, data: Optional[str] = None, batches: Optional[int] = None) -> Dict[str, float]:
    """Held-out LM loss (per target token) and perplexity, memory carried; with the
    next-sentence loss also its mean."""
    data = data or self.options.valid_data
    batches = batches or self.options.eval_batches
    iterator = self._distributed_data(data)
    mems = self.memory.zeros()  # a memory of its own: the training memory stays as it is
    totals = np.zeros(4)
    started = time.perf_counter()
    for index in range(batches):
      sums, mems = self.steps.eval_step(iterator, mems)
      totals += np.asarray(sums, np.float64)
      if index == 0:
        first_done = time.perf_counter()
    finished = time.perf_counter()
    # The first evaluation's first batch compiles the step; later evaluations reuse it (the
    # same traced function, the same shapes), so they cost what its later batches did.
    self.evaluation_seconds = (finished - started if batches == 1 else
                               (finished - first_done) * batches / (batches - 1))
    print_line(f"Held-out evaluation: {batches} batches in {finished - started:.1f} s")
    loss = totals[0] / max(totals[1], 1.0)
    result = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "targets": totals[1]}
    if self.options.next_sentence:
      result["next_sentence_loss"] = totals[2] / max(totals[3], 1.0)
    return result

  # ---- checkpoints (see run_checkpoints) ----------------------------------------------------
  def _checkpoint_model(self) -> Dict[str, object]:
    """What a checkpoint's variables depend on: the model config and the head."""
    return {"config": self.config.to_dict(), "objective": self.objective,
            "next_sentence": self.options.next_sentence}

  def _check_checkpoint_model(self) -> None:
    """Refuses to resume a model that differs from the checkpoints' (one line naming both)."""
    check_checkpoint_model(self.checkpoint_dir, self._checkpoint_model())

  # ---- the loop ----------------------------------------------------------------------------
  def train(self, stop_after: Optional[int] = None, until: Optional[int] = None
            ) -> Dict[str, object]:
    """Trains to train_steps (or for `stop_after` steps, to simulate a stopped run, or to step
    `until`, a snapshot along the run: the schedule still ends at train_steps); the
    caller then writes what follows pretraining with `export()`.

    With options.max_seconds, train_steps is first a ceiling; the speed measured over the
    first steps after compilation sets the real count (and the schedule's decay to end
    there), so the run ends within the budget, counted from this call (time_budget).
    """
    try:
      if not self.chief:  # the other workers write to a directory of their own
        return self._train(stop_after, until)
      with run_lock.hold(self.options.model_dir):
        return self._train(stop_after, until)
    except tf.errors.DataLossError as error:  # a corrupt record; TensorFlow names no file
      raise explain_data_loss(self.options.train_data, error) from None

  def _train(self, stop_after: Optional[int], until: Optional[int]) -> Dict[str, object]:
    options = self.options
    budget_start = time.perf_counter()
    step = self.checkpoints.restore(options.init_checkpoint, options.init_checkpoint_format,
                                    options.train_steps)  # with self.memory's state
    budget = (None if options.max_seconds is None else
              StepBudget(options.max_seconds, step, started=budget_start,
                         most_steps=options.train_steps))
    iterator = self._distributed_data(options.train_data, skip_batches=step,
                                      loss_positions=options.loss_positions)
    writer = summaries.run_writer(options.model_dir, options.summaries and self.chief,
                                  self.model, options.train_data, step)
    log = StepLog(writer, self.global_batch * self.seq_len, step, self.loss_scale)
    divergence = DivergenceCheck(self.model.trainable_variables, self.checkpoints.kept)
    saved_at = step
    end = options.train_steps if stop_after is None else min(options.train_steps,
                                                             step + stop_after)
    if until is not None:
      end = min(end, until)
    with preemption.watch():
      while step < end:
        loss, norm, new_mems = self.steps.train_step(iterator, self.memory.state)
        self.memory.update(new_mems)
        step += 1
        if self.loss_scale is None:  # a dynamic loss scale skips the non-finite steps itself
          divergence.add_loss(step, loss)
        fitted = budget.after_step(step, loss) if budget else None
        if fitted:
          options.train_steps = fitted
          self.optimizer.schedule.set_total_steps(fitted)
          end = fitted if stop_after is None else min(fitted, end)
        if self._after_step(step, end, loss, norm, log, divergence):
          saved_at = step
        signal_number = preemption.requested(self.strategy)
        if signal_number:
          writer.flush()
          if saved_at != step:  # what _after_step checks before it saves
            divergence.check_losses()
            divergence.check_weights(step)
            self.checkpoints.save(step)
          raise preemption.stopped(signal_number, step, self.checkpoints.files.prefix(step))
    writer.flush()
    divergence.check_losses()
    if self.chief:
      divergence.check_weights(step)
      if options.summaries:
        summaries.write_example_images(writer, self.model, options.train_data, step)
    return {"step": step, "history": log.history, "held_out": log.held_out,
            "last_checkpoint": self.checkpoints.latest(), "saved_at": saved_at,
            "skipped_steps": (int(self.loss_scale.skipped_steps.numpy())
                              if self.loss_scale is not None else None)}

  def _after_step(self, step: int, end: int, loss, norm, log: StepLog,
                  divergence: DivergenceCheck) -> bool:
    """Logs, evaluates on held-out data and saves after `step` as the options say (and at
    `end`); returns whether it saved."""
    options = self.options
    logging_now = step % options.log_steps == 0 or step == end
    evaluating_now = bool(options.eval_every and options.valid_data and (
        step % options.eval_every == 0 or step == end))
    saving_now = step % options.save_steps == 0 or step == options.train_steps
    if logging_now or evaluating_now or saving_now or divergence.due:
      divergence.check_losses()
    if logging_now:
      log.training_step(step, options.train_steps, loss, norm,
                        float(self.optimizer.learning_rate))
    if evaluating_now:
      log.held_out_evaluation(step, options.train_steps, self.evaluate())
    if saving_now:
      divergence.check_weights(step)
      self.checkpoints.save(step)
    return saving_now

  def export(self) -> Dict[str, str]:
    """Writes the trained model for what follows pretraining, on the chief (the other workers
    write nothing and get {}): model_dir/PRETRAINED_DIR, the backbone in the own format (the
    starting point of fine-tuning runs), and model_dir/LM_DIR, the backbone with its LM head
    (run/evaluate_lm.py, generation); each with the data's tokenizer (`data_tokenizer`).
    Returns those two directories by name."""
    if not self.chief:
      return {}
    directories = {name: os.path.join(self.options.model_dir, name)
                   for name in (PRETRAINED_DIR, LM_DIR)}
    # Saved with the weights, so the directories open with their tokenizer (from_pretrained,
    # the fine-tuning tools' --init_checkpoint) and the heads take text.
    self.model.backbone.tokenizer = data_tokenizer(self.info, self.options.train_data)
    with run_lock.hold(self.options.model_dir):
      checkpoints.save_pretrained(self.model.backbone, directories[PRETRAINED_DIR])
      checkpoints.save_pretrained(self.model, directories[LM_DIR])
    return directories


def data_tokenizer(info: Dict, source: str) -> Optional[XLNetTokenizer]:
  """The tokenizer the data (record info `info`, of `source`) were made with: the SentencePiece
  model the record info names, if it is still there unchanged (its hash), lower-casing as the
  data did; else None, with a line saying the exports will lack it."""
  recorded = info["tokenizer"]
  sp_path = recorded.get("sp_path")
  if sp_path and files.exists(sp_path) and (hashlib.sha256(files.read_bytes(sp_path))
                                            .hexdigest() == recorded.get("sp_sha256")):
    return XLNetTokenizer(sp_path, lower=bool(info["settings"].get("uncased", False)))
  print_line(f"{source}: the data's SentencePiece model {sp_path} is gone or changed: the "
             "exported model has no tokenizer (give fine-tuning --sp_path)")
  return None


PRETRAINED_DIR = "pretrained"  # under model_dir: the backbone (--init_checkpoint of fine-tuning)
LM_DIR = "lm"                  # under model_dir: the backbone with its LM head


def write_run_summary(path: str, summary: Dict) -> None:
  write_json(path, summary)
