"""Pretraining (permutation LM or masked LM, see heads.pretrainer) with a custom loop under any
tf.distribute strategy.

A custom loop (strategy.run), not Model.fit: fit fails under MultiWorkerMirroredStrategy in
TF 2.21 / Keras 3, and the memory must travel from step to step per replica. Per step:

  the global number of targets (and of examples) summed over replicas -> forward/backward per
  replica of the loss divided by them (XLA when jit_compile) -> gradients summed over replicas
  -> global-norm clipping -> AdamW update.

With float16 the loss is scaled (see training.loss_scale): by a static factor, or dynamically
(a step with non-finite gradients is skipped and halves the scale; the skipped steps are
logged and written to TensorBoard).

So the loss and the update equal a single-device run on the same global batch. Memory stays
with its replica (each replica always reads the same rows of the stream). Checkpoints hold the
model, the optimizer (its step is the data position) and, per worker, the memory; a run
restarted with the same model_dir resumes from the latest complete checkpoint. Dropout draws
its masks from a seed fixed by (options.seed, step, replica) (ops.random.step_seed), so a run
killed at any point and resumed ends with the weights of an uninterrupted run.

The chief holds model_dir's run lock (training.run_lock) while it trains; a non-finite loss
(other than float16 steps that the dynamic loss scale skips) stops the run with
TrainingDivergedError before anything is saved.
"""

import dataclasses
import glob
import json
import math
import os
import re
import tempfile
import time
from typing import Dict, List, Optional, Union

from absl import logging
import numpy as np
import tensorflow as tf

from xlnet_tf.errors import UserInputError
from xlnet_tf import checkpoints
from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.config import XLNetConfig
from xlnet_tf.pretraining.records import (explain_data_loss, load_record_info,
                                          pretraining_dataset)
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.json_files import read_json, write_json
from xlnet_tf.model import XLNetModel, backbone_inputs
from xlnet_tf.ops import random as random_ops
from xlnet_tf.training import loss_scale as loss_scale_lib
from xlnet_tf.training import run_lock
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.pretraining import objectives, summaries
from xlnet_tf.training.optimization import create_optimizer, global_norm


@dataclasses.dataclass
class PretrainingOptions:
  model_dir: str
  train_data: str                     # record_info.json or its directory
  train_steps: int = 1000
  global_batch_size: Optional[int] = None  # default: the data's bsz_per_host x workers
  learning_rate: float = 1e-4
  warmup_steps: int = 0
  weight_decay: float = 0.01
  lr_layer_decay_rate: float = 1.0
  clip_norm: float = 1.0
  min_lr_ratio: float = 0.0
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
  seed: int = 0                       # dropout masks: a function of (seed, step, replica)


class TrainingDivergedError(UserInputError):
  """The training loss became non-finite (a learning rate too high, bad data): the run stops
  before saving those weights."""


# Beside the checkpoints: the model they are of, so a resume with another model is refused by
# name rather than by the shapes of the first variable that differs.
CHECKPOINT_MODEL_FILE = "checkpoint_model.json"


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
    self.info = load_record_info(options.train_data)
    workers = strategy_lib.num_workers(strategy)
    self.global_batch = options.global_batch_size or self.info["settings"]["bsz_per_host"] * workers
    _check_data(self.info, config, self.global_batch, strategy, options.train_data)
    self.objective = self.info["settings"]["objective"]
    if options.objective and options.objective != self.objective:
      raise UserInputError(f"{options.train_data}: the data were made for objective "
                           f"{self.objective!r}, this run trains {options.objective!r}; create the "
                           f"data with --objective={options.objective}")
    lm_objective = objectives.named(self.objective)
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
    self.checkpoint_dir = options.model_dir if self.chief else tempfile.mkdtemp()
    self._check_checkpoint_model()  # before anything is built or made
    os.makedirs(self.checkpoint_dir, exist_ok=True)
    with strategy.scope():
      self.model = XLNetPretrainer(XLNetModel(config, recompute_blocks=options.recompute_blocks),
                                   objective=self.objective, next_sentence=options.next_sentence)
      self.optimizer = create_optimizer(
          self.model, options.learning_rate, options.train_steps, options.warmup_steps,
          options.weight_decay, options.lr_layer_decay_rate, options.min_lr_ratio,
          clip_norm=None,  # clipped here after the all-reduce, as on one device
          adjustable_total=options.max_seconds is not None)
      self.optimizer.build(self.model.trainable_variables)
      self.loss_scale = (loss_scale_lib.DynamicLossScale(options.initial_loss_scale,
                                                         options.loss_scale_growth_steps)
                         if options.loss_scale == "dynamic" else None)
    state = {"loss_scale": self.loss_scale} if self.loss_scale is not None else {}
    self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, **state)
    self.manager = tf.train.CheckpointManager(self.checkpoint, self.checkpoint_dir,
                                              max_to_keep=options.keep_checkpoints)
    self._compute = tf.function(self._forward_backward, jit_compile=options.jit_compile)
    self._evaluate_replica = tf.function(self._forward, jit_compile=options.jit_compile)
    self.evaluation_seconds = None  # what an evaluation costs once compiled (see evaluate)

  # ---- data ------------------------------------------------------------------------------
  def _distributed_data(self, data: str, skip_batches: int = 0, repeat: bool = True):
    def dataset_fn(context):
      dataset = pretraining_dataset(data, batch_size=self.global_batch // max(
          context.num_input_pipelines, 1), input_context=context, repeat=repeat,
          skip_batches=skip_batches)
      # Successive elements go to successive local replicas: row block r -> replica r.
      return dataset.rebatch(self.per_replica_batch, drop_remainder=True)
    return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

  def _zero_mems(self):
    config = self.config
    if not config.mem_len:
      return ()

    def zeros(_):
      return tuple(tf.zeros([self.per_replica_batch, config.mem_len, config.d_model],
                            self.model.compute_dtype) for _ in range(config.n_layer))
    return self.strategy.experimental_distribute_values_from_function(zeros)

  # ---- per-replica computation -----------------------------------------------------------
  def _model_inputs(self, batch, mems):
    inputs = backbone_inputs(batch)
    if self.config.mem_len:
      inputs["mems"] = list(mems)
    return inputs

  def _forward(self, batch, mems):
    outputs = self.model(self._model_inputs(batch, mems), training=False)
    sums = tf.stack(self.model.pretraining_loss_sums(outputs, batch))
    return sums, tuple(outputs.get("new_mems", ()))

  def _forward_backward(self, batch, mems, normalizers, loss_scale, dropout_seed):
    """The replica's share of the global loss (sums over the global counts) and gradients
    (computed from the loss times `loss_scale`, unless None, and divided by it again); the
    dropout masks derive from `dropout_seed` (int64 [2])."""
    with tf.GradientTape() as tape, random_ops.seeds_derived_from(dropout_seed):
      outputs = self.model(self._model_inputs(batch, mems), training=True)
      lm_sum, _, ns_sum, _ = self.model.pretraining_loss_sums(outputs, batch)
      loss = lm_sum / normalizers[0] + ns_sum / normalizers[1]
      scaled = loss if loss_scale is None else loss * loss_scale
    variables = self.model.trainable_variables
    gradients = tape.gradient(scaled, variables)
    # Unused by the objective (masked LM has no query stream: mask_emb): a zero update.
    gradients = [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]
    if loss_scale is not None:
      gradients = [g / loss_scale for g in gradients]
    return loss, gradients, tuple(outputs.get("new_mems", ()))

  def _current_loss_scale(self):
    """This step's loss scale: the dynamic scale's value, the static one, or None."""
    if self.loss_scale is not None:
      return tf.convert_to_tensor(self.loss_scale.scale)
    if self.options.loss_scale:
      return tf.constant(self.options.loss_scale, tf.float32)
    return None

  def _replica_step(self, batch, mems):
    context = tf.distribute.get_replica_context()
    # The counts depend on the data only: summed over replicas first, each replica's loss is
    # its share of the global mean, and the summed gradients are the global mean's.
    counts = tf.stack([tf.reduce_sum(tf.cast(batch["target_mask"], tf.float32)),
                       tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)])
    normalizers = tf.maximum(context.all_reduce(tf.distribute.ReduceOp.SUM, counts), 1.0)
    dropout_seed = random_ops.step_seed(self.options.seed, self.optimizer.iterations,
                                        context.replica_id_in_sync_group,
                                        context.num_replicas_in_sync)
    loss, gradients, new_mems = self._compute(batch, mems, normalizers,
                                              self._current_loss_scale(), dropout_seed)
    loss = context.all_reduce(tf.distribute.ReduceOp.SUM, loss)
    gradients = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                   [tf.cast(g, tf.float32) for g in gradients])
    # Clip to the global norm and hand each replica its equal share (the optimizer sums over
    # replicas again), as one factor applied inside the optimizer's fused update; a non-finite
    # norm makes it 0 (a zero gradient), or, with a dynamic loss scale, skips the update.
    norm = global_norm(gradients)
    finite = tf.math.is_finite(norm)
    clip = tf.minimum(1.0, self.options.clip_norm / norm) if self.options.clip_norm else 1.0
    scale = tf.where(finite, clip / context.num_replicas_in_sync, 0.0)
    self.optimizer.apply_scaled_gradients(zip(gradients, self.model.trainable_variables), scale,
                                          apply_update=None if self.loss_scale is None else finite)
    if self.loss_scale is not None:
      self.loss_scale.update(finite)
    return loss, norm, new_mems

  @tf.function
  def _train_step(self, iterator, mems):
    loss, norm, new_mems = self.strategy.run(self._replica_step, args=(next(iterator), mems))
    return (self.strategy.experimental_local_results(loss)[0],
            self.strategy.experimental_local_results(norm)[0], new_mems)

  @tf.function
  def _eval_step(self, iterator, mems):
    sums, new_mems = self.strategy.run(self._evaluate_replica, args=(next(iterator), mems))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, sums, axis=None), new_mems

  # ---- evaluation ------------------------------------------------------------------------
  def evaluate(self, data: Optional[str] = None, batches: Optional[int] = None) -> Dict[str, float]:
    """Held-out LM loss (per target token) and perplexity, memory carried; with the
    next-sentence loss also its mean."""
    data = data or self.options.valid_data
    batches = batches or self.options.eval_batches
    iterator = self._distributed_data(data)
    mems = self._zero_mems()
    totals = np.zeros(4)
    started = time.perf_counter()
    for index in range(batches):
      sums, mems = self._eval_step(iterator, mems)
      totals += np.asarray(sums, np.float64)
      if index == 0:
        first_done = time.perf_counter()
    finished = time.perf_counter()
    # The first evaluation's first batch compiles the step; later evaluations reuse it (the
    # same traced function, the same shapes), so they cost what its later batches did.
    self.evaluation_seconds = (finished - started if batches == 1 else
                               (finished - first_done) * batches / (batches - 1))
    logging.info("Held-out evaluation: %d batches in %.1f s", batches, finished - started)
    loss = totals[0] / max(totals[1], 1.0)
    result = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "targets": totals[1]}
    if self.options.next_sentence:
      result["next_sentence_loss"] = totals[2] / max(totals[3], 1.0)
    return result

  # ---- checkpoints -----------------------------------------------------------------------
  def _mems_path(self, step: int) -> str:
    return os.path.join(self.checkpoint_dir, f"mems-{step}-worker{self.worker}.npz")

  def _save(self, step: int, mems) -> None:
    if self.config.mem_len:
      per_replica = [self.strategy.experimental_local_results(layer) for layer in mems]
      arrays = {f"layer_{i}": np.concatenate([np.asarray(t, np.float32) for t in replicas])
                for i, replicas in enumerate(per_replica)}
      temporary = self._mems_path(step) + ".tmp.npz"
      np.savez(temporary, **arrays)
      os.replace(temporary, self._mems_path(step))  # complete before the checkpoint exists
    model_file = os.path.join(self.checkpoint_dir, CHECKPOINT_MODEL_FILE)
    os.replace(write_json(model_file + ".tmp", self._checkpoint_model()), model_file)
    self.manager.save(checkpoint_number=step)
    kept = {int(re.search(r"-(\d+)$", path).group(1)) for path in self.manager.checkpoints}
    for path in glob.glob(os.path.join(self.checkpoint_dir, f"mems-*-worker{self.worker}.npz")):
      if int(re.search(r"mems-(\d+)-", os.path.basename(path)).group(1)) not in kept:
        os.remove(path)

  def _restore(self):
    """(step, mems) from the latest complete checkpoint, or (0, zero memory)."""
    latest = self.manager.latest_checkpoint
    if latest is None:
      self._initialize_from(self.options.init_checkpoint)
      return 0, self._zero_mems()
    try:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
      # Checkpoints from before CHECKPOINT_MODEL_FILE: the first variable that differs.
      raise UserInputError(f"{latest}: cannot resume from this checkpoint: "
                           f"{str(error).strip().splitlines()[0]}") from None
    step = int(self.optimizer.iterations.numpy())
    logging.info("Resumed from %s at step %d", latest, step)
    if not self.config.mem_len:
      return step, ()
    path = self._mems_path(step)
    if not os.path.exists(path):
      logging.warning("No memory saved at %s; resuming with zero memory", path)
      return step, self._zero_mems()
    with np.load(path) as saved:
      layers = [saved[f"layer_{i}"] for i in range(self.config.n_layer)]

    def replica_mems(context):
      start = context.replica_id_in_sync_group % self.local_replicas * self.per_replica_batch
      return tuple(tf.constant(layer[start:start + self.per_replica_batch],
                               self.model.compute_dtype) for layer in layers)
    return step, self.strategy.experimental_distribute_values_from_function(replica_mems)

  def _checkpoint_model(self) -> Dict[str, object]:
    """What a checkpoint's variables depend on: the model config and the head."""
    return {"config": self.config.to_dict(), "objective": self.objective,
            "next_sentence": self.options.next_sentence}

  def _check_checkpoint_model(self) -> None:
    """Refuses to resume a model that differs from the checkpoints' (one line naming both)."""
    path = os.path.join(self.checkpoint_dir, CHECKPOINT_MODEL_FILE)
    if not os.path.exists(path):
      return
    saved, current = read_json(path), json.loads(json.dumps(self._checkpoint_model()))
    saved_config, current_config = saved.get("config", {}), current["config"]
    differences = [f"{key} {saved_config.get(key)!r} (checkpoints) vs "
                   f"{current_config.get(key)!r} (this run)"
                   for key in sorted(set(saved_config) | set(current_config))
                   if saved_config.get(key) != current_config.get(key)]
    differences += [f"{key} {saved.get(key)!r} (checkpoints) vs {current[key]!r} (this run)"
                    for key in ("objective", "next_sentence") if saved.get(key) != current[key]]
    if differences:
      raise UserInputError(f"{self.checkpoint_dir}: its checkpoints are of another model: "
                           f"{'; '.join(differences)}; resume with the same model config or "
                           "train into another model directory")

  def _initialize_from(self, path: Optional[str]) -> None:
    if not path:
      return
    target = self.model if self.options.init_checkpoint_format != "own" else backbone_of(
        self.model)
    checkpoints.LOADERS[self.options.init_checkpoint_format](target, path)
    logging.info("Initialized from %s", path)

  # ---- the loop --------------------------------------------------------------------------
  def _fit_steps_to_budget(self, step, rate, seconds_left) -> None:
    """Sets train_steps (and the learning-rate schedule's end) to what `seconds_left` holds at
    `rate` steps/s, keeping a reserve for the final checkpoint and export."""
    steps = step + max(int(rate * (seconds_left - _BUDGET_RESERVE_SECONDS)), 1)
    self.options.train_steps = max(steps, step + 1)
    self.optimizer.schedule.set_total_steps(self.options.train_steps)
    logging.info("Time budget: %.0f s left at %.2f steps/s -> %d steps in all", seconds_left,
                 rate, self.options.train_steps)

  def _check_losses(self, unchecked) -> None:
    """Raises TrainingDivergedError at the first non-finite loss of `unchecked`, a list of
    (step, loss tensor) that it empties. Read in batches: a read per step would stall the
    device's queue."""
    if not unchecked:
      return
    losses = tf.stack([loss for _, loss in unchecked]).numpy()
    steps = [step for step, _ in unchecked]
    unchecked.clear()
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
      self._diverged(steps[bad[0]], f"the training loss is {losses[bad[0]]}")

  def _check_weights(self, step: int) -> None:
    """Raises TrainingDivergedError if a weight is not finite (before they are saved)."""
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v))
                            for v in self.model.trainable_variables])
    if not bool(finite):
      self._diverged(step, "the weights are no longer finite")

  def _diverged(self, step: int, what: str):
    latest = self.manager.latest_checkpoint
    kept = f"latest checkpoint: {latest}" if latest else f"no checkpoint in {self.checkpoint_dir}"
    raise TrainingDivergedError(f"step {step}: {what}; stopped without saving ({kept}); lower "
                                "the learning rate or check the data")

  def train(self, stop_after: Optional[int] = None) -> Dict[str, object]:
    """Trains to train_steps (or for `stop_after` steps, to simulate a stopped run).

    With options.max_seconds, train_steps is first a ceiling; the speed measured over the
    first steps after compilation sets the real count (and the schedule's decay to end
    there), so the run ends within the budget, counted from this call.
    """
    try:
      if not self.chief:  # the other workers write to a directory of their own
        return self._train(stop_after)
      with run_lock.hold(self.options.model_dir):
        return self._train(stop_after)
    except tf.errors.DataLossError as error:  # a corrupt record; TensorFlow names no file
      raise explain_data_loss(self.options.train_data, error) from None

  def _train(self, stop_after: Optional[int]) -> Dict[str, object]:
    options = self.options
    budget_start = time.perf_counter()
    step, mems = self._restore()
    iterator = self._distributed_data(options.train_data, skip_batches=step)
    writer = (tf.summary.create_file_writer(os.path.join(options.model_dir, "train"))
              if options.summaries and self.chief else tf.summary.create_noop_writer())
    if options.summaries and self.chief and step == 0:
      summaries.write_example_images(writer, self.model, options.train_data, step)
    history: List[Dict[str, float]] = []
    held_out: List[Dict[str, float]] = []
    start_time, start_step = time.perf_counter(), step
    last = step
    end = options.train_steps if stop_after is None else min(options.train_steps,
                                                             step + stop_after)
    calibrating = options.max_seconds is not None
    unchecked_losses = []  # (step, loss) not yet read; a dynamic loss scale skips non-finite
    while step < end:
      loss, norm, mems = self._train_step(iterator, mems)
      step += 1
      if self.loss_scale is None:
        unchecked_losses.append((step, loss))
      if calibrating and step - start_step == 1:
        float(loss)  # compiled: from here on each step costs the same
        compiled_at, compiled_step = time.perf_counter(), step
      elif calibrating and step - compiled_step == _CALIBRATION_STEPS:
        float(loss)
        now = time.perf_counter()
        self._fit_steps_to_budget(step, _CALIBRATION_STEPS / (now - compiled_at),
                                  options.max_seconds - (now - budget_start))
        end = options.train_steps if stop_after is None else min(options.train_steps, end)
        calibrating = False
      logging_now = step % options.log_steps == 0 or step == end
      evaluating_now = bool(options.eval_every and options.valid_data and (
          step % options.eval_every == 0 or step == end))
      saving_now = step % options.save_steps == 0 or step == options.train_steps
      if logging_now or evaluating_now or saving_now or len(unchecked_losses) >= 100:
        self._check_losses(unchecked_losses)
      if logging_now:
        elapsed = time.perf_counter() - start_time
        rate = (step - start_step) / max(elapsed, 1e-9)
        tokens = rate * self.global_batch * self.seq_len
        learning_rate = float(self.optimizer.learning_rate)
        record = {"step": step, "loss": float(loss), "grad_norm": float(norm),
                  "learning_rate": learning_rate, "tokens_per_sec": tokens}
        loss_scaling = ""
        if self.loss_scale is not None:
          record.update(loss_scale=float(self.loss_scale.scale.numpy()),
                        skipped_steps=int(self.loss_scale.skipped_steps.numpy()))
          loss_scaling = (f"  loss scale {record['loss_scale']:g} (skipped steps: "
                          f"{record['skipped_steps']})")
        history.append(record)
        eta = (options.train_steps - step) / max(rate, 1e-9)
        logging.info("step %d/%d  loss %.4f  lr %.2e  |g| %.3f  %.0f tokens/s  ETA %.0fs%s",
                     step, options.train_steps, record["loss"], learning_rate,
                     record["grad_norm"], tokens, eta, loss_scaling)
        with writer.as_default(step=step):
          for key, value in record.items():
            if key != "step":
              tf.summary.scalar(key, value)
      if evaluating_now:
        held_out.append(dict(self.evaluate(), step=step))
        logging.info("step %d: held-out loss %.4f", step, held_out[-1]["loss"])
        with writer.as_default(step=step):
          tf.summary.scalar("held_out_loss", held_out[-1]["loss"])
      if saving_now:
        self._check_weights(step)
        self._save(step, mems)
        last = step
    writer.flush()
    self._check_losses(unchecked_losses)
    if self.chief:
      self._check_weights(step)
      if options.summaries:
        summaries.write_example_images(writer, self.model, options.train_data, step)
      # The backbone in the own format: the starting point of fine-tuning runs.
      checkpoints.save_pretrained(self.model.backbone, os.path.join(options.model_dir,
                                                                    PRETRAINED_DIR))
      # Backbone and LM head: for run/evaluate_lm.py (and generation).
      checkpoints.save_pretrained(self.model, os.path.join(options.model_dir, LM_DIR))
    return {"step": step, "history": history, "held_out": held_out,
            "last_checkpoint": self.manager.latest_checkpoint, "saved_at": last,
            "skipped_steps": (int(self.loss_scale.skipped_steps.numpy())
                              if self.loss_scale is not None else None)}


PRETRAINED_DIR = "pretrained"  # under model_dir: the backbone (--init_checkpoint of fine-tuning)
LM_DIR = "lm"                  # under model_dir: the backbone with its LM head
_CALIBRATION_STEPS = 20
_BUDGET_RESERVE_SECONDS = 5.0


def write_run_summary(path: str, summary: Dict) -> None:
  write_json(path, summary)
