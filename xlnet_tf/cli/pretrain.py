r"""XLNet pretraining (permutation LM; the masked-LM baseline; Transformer-XL's left-to-right LM)
under tf.distribute.

  python run/pretrain.py

With no data flags it runs the embedded default end to end on this machine: the Python
documentation as corpus -> SentencePiece model -> TFRecords -> a small XLNet pretrained for a
few minutes on CPU -> held-out loss before and after -> checkpoint.

From your own raw text in one command (SentencePiece model, TFRecords and training within the
time budget; leaves DIR/data/spiece.model and DIR/model/pretrained for the fine-tuning CLIs):

  python run/pretrain.py --input_glob='text/*.txt' --output_dir=DIR --objective=perm \
      --max_minutes=12

From TFRecords made by data/create_pretraining_data.py:

  python run/pretrain.py --train_data=proc_data/train --valid_data=proc_data/valid \
      --model_config=xlnet_config.json --strategy=mirrored --train_steps=100000 \
      --learning_rate=1e-4 --warmup_steps=1000 --model_dir=model

Every run records its settings, whole, in MODEL_DIR/run_config.json; --config_file=that file
(with its paths as flags) repeats the run, and flags beside it change what they set. A resumed
run may change only how long and how it runs (docs/pretraining.md).
"""

import contextlib
import dataclasses
import os
import time

from absl import app
from absl import flags
from absl import logging
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

from xlnet_tf.config import POS_ENCODINGS
from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.pretraining.data import default_data
from xlnet_tf import objectives
from xlnet_tf.pretraining import recipes
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.records import load_record_info
from xlnet_tf.pretraining.time_budget import TimeBudget
from xlnet_tf.training import resume
from xlnet_tf.training import run_config
from xlnet_tf.training import run_lock
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.pretraining.loop import LM_DIR, PRETRAINED_DIR, PretrainingRun, write_run_summary

from xlnet_tf.cli import common_flags
from xlnet_tf.cli import config_flags

config_flags.define_config_file_flag()
common_flags.define_runtime_flags()  # --strategy, --tpu, --cpu_replicas, --dtype, --seed
flags.adopt_module_key_flags(common_flags)  # listed by --help with this tool's own
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string("input_glob", None, "Raw text files (one sentence a line, a blank line "
                    "between documents): made into --output_dir/data, then pretrained on.")
flags.DEFINE_string("output_dir", None, "Where the data (data/) and the model (model/) go "
                    "when the data are made here (--input_glob or the default). Default: "
                    "pretrain_output (pretrain_output_mlm, pretrain_output_clm for the others).")
flags.DEFINE_enum("objective", "perm", objectives.NAMES, "perm: XLNet's permutation LM; mlm: "
                  "BERT's masked LM on the same backbone (80/10/10 <mask>/random/same); clm: "
                  "Transformer-XL's left-to-right LM (attn_type uni, consecutive segments with "
                  "memory, every token a target; evaluated by run/evaluate_lm.py).")
flags.DEFINE_bool("span_prediction", True, "Predict whole-word spans (False: single tokens).")
flags.DEFINE_bool("next_sentence", None, "Add the next-sentence loss (B follows A or not).")
flags.DEFINE_float("max_minutes", None, "Wall-time budget of the whole command (data "
                   "included): the step count is fitted to the measured speed.")
# Defaults None: the recipe's (recipes.MAIN_JOB, or recipes.FROM_TEXT with --input_glob;
# recipes.PretrainingRecipeOptions names each default).
flags.DEFINE_integer("vocab_size", None, "SentencePiece vocabulary when the data are made here.")
flags.DEFINE_integer("seq_len", None, "Sequence length when the data are made here.")
flags.DEFINE_integer("reuse_len", None, "Tokens reused as memory, when the data are made here.")
flags.DEFINE_integer("num_predict", None, "Predicted tokens per sequence, when the data are "
                     "made here (21 of 128 is 16%: K = 6 for perm, BERT's 15% for mlm).")
flags.DEFINE_integer("bsz_per_host", None, "Rows per batch when the data are made here.")
flags.DEFINE_bool("bi_data", None, "Forward and backward rows, when the data are made here "
                  "(default: on, off for clm).")
flags.DEFINE_string("train_data", None, "Directory (or record_info.json) of training "
                    "TFRecords. Default: build the embedded Python-docs data.")
flags.DEFINE_string("valid_data", None, "Held-out TFRecords for evaluation.")
flags.DEFINE_string("model_config", None, "xlnet_config.json (original keys accepted).")
flags.DEFINE_enum("model_size", None, sorted(SIZE_PRESETS),
                  "Size preset when no --model_config (demo: 4 layers, d_model 128, dropout "
                  "0).")
flags.DEFINE_string("model_dir", None, "Checkpoints and summaries (default: "
                    "--output_dir/model).")
flags.DEFINE_integer("train_batch_size", None, "Global batch size (default: the data's).")
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each step's batch into this many "
                     "micro-batches (each with its rows' memory), run one after another (less "
                     "memory), their gradients added up: one update, equal to the whole "
                     "batch's.")
flags.DEFINE_integer("train_steps", None, "Training steps (with --max_minutes: the most).")
flags.DEFINE_float("learning_rate", None, "Peak learning rate.")
flags.DEFINE_integer("warmup_steps", None, "Linear warmup steps.")
flags.DEFINE_float("weight_decay", None, "AdamW weight decay (not on LayerNorm or biases).")
flags.DEFINE_float("lr_layer_decay_rate", None, "Layer i's learning rate is multiplied by "
                   "rate^(n_layer - 1 - i).")
flags.DEFINE_float("clip", None, "Global gradient-norm clipping.")
flags.DEFINE_integer("save_steps", 200, "Checkpoint every this many steps.")
flags.DEFINE_integer("log_steps", 50, "Log and write summaries every this many steps.")
flags.DEFINE_integer("eval_batches", 20, "Held-out batches per evaluation.")
flags.DEFINE_integer("mem_len", None, "Memory length (default: the data's reuse_len; for clm "
                     "the segment length).")
flags.DEFINE_bool("jit_compile", None, "Compile the forward/backward pass with XLA. Default: "
                  "on, except bfloat16 on a CPU (XLA's CPU matmuls do not use AMX there).")
flags.DEFINE_string("loss_scale", "dynamic", "Loss scaling with --dtype=float16: 'dynamic' "
                    "(halved on overflow, the step skipped; doubled after 2000 good steps) or "
                    "a static scale such as 4096.")
flags.DEFINE_bool("recompute", False, "Recompute each block in the backward pass instead of "
                  "storing its activations (long sequences).")
flags.DEFINE_string("init_checkpoint", None, "Start from these weights.")
flags.DEFINE_enum("init_checkpoint_format", "own", ["own", "original", "huggingface"],
                  "Format of --init_checkpoint.")
flags.DEFINE_enum("pos_encoding", None, list(POS_ENCODINGS), "clm: how positions enter "
                  "attention (Transformer-XL's Table 5 ablation; default relative, the "
                  "original's): shaw, absolute_sinusoid or absolute_learned.")
flags.DEFINE_integer("clamp_len", None, "Relative distances (or, for absolute_learned, "
                     "positions) beyond this share the last encoding; needed by shaw and "
                     "absolute_learned (the size of their table).")
flags.DEFINE_enum("loss_positions", None, list(objectives.LOSS_POSITIONS), "clm: the loss on "
                  "every position (full) or on each segment's recent half (half); held-out "
                  "evaluation is always full.")
FLAGS = flags.FLAGS

# Which setting of the run (recipes.PretrainingRecipeOptions, its whole tree) each flag sets: a
# new setting is its field (with its help) and one line here. Defaults None: the preset's
# (recipes.MAIN_JOB, or recipes.FROM_TEXT with --input_glob), or --config_file's.
FLAG_FIELDS = {
    "strategy": "training.runtime.strategy", "tpu": "training.runtime.tpu",
    "cpu_replicas": "training.runtime.cpu_replicas", "dtype": "training.runtime.dtype",
    "seed": "training.runtime.seed",
    "input_glob": "input_glob", "output_dir": "output_dir", "max_minutes": "max_minutes",
    "objective": "data.objective", "span_prediction": "data.span_prediction",
    "next_sentence": "training.next_sentence",
    "vocab_size": "vocab_size", "seq_len": "data.seq_len", "reuse_len": "data.reuse_len",
    "num_predict": "data.num_predict", "bsz_per_host": "data.bsz_per_host",
    "bi_data": "data.bi_data",
    "train_data": "training.train_data", "valid_data": "training.valid_data",
    "model_config": "model_config_file", "model_size": "model_size",
    "model_dir": "training.model_dir",
    "train_batch_size": "training.global_batch_size",
    "gradient_accumulation_steps": "training.gradient_accumulation_steps",
    "train_steps": "training.train_steps",
    "learning_rate": "training.optimizer.learning_rate",
    "warmup_steps": "training.optimizer.warmup_steps",
    "weight_decay": "training.optimizer.weight_decay",
    "lr_layer_decay_rate": "training.optimizer.lr_layer_decay_rate",
    "clip": "training.optimizer.clip_norm",
    "save_steps": "training.save_steps", "log_steps": "training.log_steps",
    "eval_batches": "training.eval_batches",
    "mem_len": "mem_len",
    "jit_compile": "training.jit_compile", "loss_scale": "training.loss_scale",
    "recompute": "training.recompute_blocks",
    "init_checkpoint": "training.init_checkpoint",
    "init_checkpoint_format": "training.init_checkpoint_format",
    "pos_encoding": "pos_encoding", "clamp_len": "clamp_len",
    "loss_positions": "training.loss_positions",
}
# The flags naming files and directories: a config file records them, they are given as flags.
PATH_FLAGS = ("input_glob", "output_dir", "train_data", "valid_data", "model_config",
              "model_dir", "init_checkpoint")

_FINISH_SECONDS = 10  # the last checkpoint, the backbone export and the summaries

# Settings that must be > 0 and >= 0 (None: unset), named by their flags.
_POSITIVE_FLAGS = ("train_steps", "learning_rate", "save_steps", "log_steps", "eval_batches",
                   "train_batch_size", "max_minutes", "lr_layer_decay_rate",
                   "gradient_accumulation_steps")
_NON_NEGATIVE_FLAGS = ("warmup_steps", "weight_decay", "clip", "cpu_replicas", "mem_len")


def run_options() -> recipes.PretrainingRecipeOptions:
  """The run's settings, whole: --config_file's, or the preset's (`preset`), with the flags
  given over them (config_flags.options_from_flags), checked (one line naming the first
  setting out of its range, before any work is done)."""
  options = config_flags.options_from_flags(
      preset() if not FLAGS.config_file else recipes.MAIN_JOB, FLAG_FIELDS, PATH_FLAGS,
      replace=recipes.PretrainingRecipeOptions.set_fields)
  check_options(options)
  return options


def preset() -> recipes.PretrainingRecipeOptions:
  """The settings a run without --config_file starts from: the recipe for --objective (the
  one for raw text with --input_glob), with its steps left to --max_minutes's budget when that
  is given, and XLA where it is faster (`default_xla`)."""
  recipe = recipes.recipe_for(FLAGS.objective, bool(FLAGS.input_glob))
  changes = {"jit_compile": default_xla(FLAGS.dtype, FLAGS.strategy)}
  if FLAGS.max_minutes:
    changes["train_steps"] = recipes.UNTIL_THE_BUDGET
  return recipe.replace(**changes)


def default_xla(dtype: str, strategy: str) -> bool:
  """XLA compiles the forward/backward pass, except bfloat16 on a CPU (XLA's CPU matmuls do not
  use AMX there)."""
  import tensorflow as tf
  on_cpu = not tf.config.list_physical_devices("GPU") and strategy != "tpu"
  return not (dtype == "bfloat16" and on_cpu)


def check_options(options: recipes.PretrainingRecipeOptions) -> None:
  """One line naming the first setting out of its range, by its flag."""
  for names, allowed, wanted in ((_POSITIVE_FLAGS, lambda v: v > 0, "positive"),
                                 (_NON_NEGATIVE_FLAGS, lambda v: v >= 0, "zero or more")):
    for name in names:
      value = run_config.value_at(options, FLAG_FIELDS[name])
      if value is not None and not allowed(value):  # NaN fails both
        raise app.UsageError(f"--{name}={value}: must be {wanted}")
  left_to_right = options.data.objective == objectives.LEFT_TO_RIGHT_LM.name
  for name, value, default in (("pos_encoding", options.pos_encoding, "relative"),
                               ("loss_positions", options.training.loss_positions, "full")):
    if value not in (None, default) and not left_to_right:
      raise app.UsageError(f"--{name}={value}: for --objective=clm only "
                           "(Transformer-XL's ablations of a left-to-right LM)")
  if options.pos_encoding in ("shaw", "absolute_learned") and not (options.clamp_len or 0) > 0:
    raise app.UsageError(f"--pos_encoding={options.pos_encoding} needs --clamp_len > 0 (the "
                         "largest distance or position its learned table holds)")
  if options.input_glob and options.training.train_data:
    raise app.UsageError("--input_glob and --train_data exclude each other")
  loss_scale(options)  # a bad --loss_scale, before any work


def seconds_left(budget: TimeBudget, max_minutes: float, reserved=0.0):
  """What --max_minutes (`budget`) leaves for training, less `reserved` seconds and the end."""
  left = budget.left(reserved + _FINISH_SECONDS)
  if left <= 0:
    raise app.UsageError(f"--max_minutes={max_minutes}: {budget.elapsed():.0f}"
                         " s went to preparing the data and the first evaluation; nothing is "
                         "left to train")
  return left


def loss_scale(options: recipes.PretrainingRecipeOptions):
  """The run's loss scaling: --loss_scale ("dynamic" or a number) for float16, None for the
  other dtypes."""
  if options.training.runtime.dtype != "float16":
    return None
  value = options.training.loss_scale
  if not isinstance(value, str) or value == "dynamic":
    return value
  try:
    return float(value)
  except ValueError:
    raise app.UsageError(f"--loss_scale={value!r}: 'dynamic' or a number") from None


def data_batch_layout(options: recipes.PretrainingRecipeOptions, strategy
                      ) -> recipes.PretrainingRecipeOptions:
  """The settings with the data's rows per worker (bsz_per_host) and replicas per worker
  (num_core_per_host) for data made here: the ones this run trains with, --train_batch_size
  split over the workers."""
  workers = strategy_lib.num_workers(strategy)
  replicas = strategy.num_replicas_in_sync
  layout = {"data.num_core_per_host": replicas // workers}
  rows = options.data.bsz_per_host
  batch = options.training.global_batch_size
  if batch is not None:
    if FLAGS["bsz_per_host"].present and rows * workers != batch:
      raise app.UsageError(f"--train_batch_size={batch} and --bsz_per_host={rows} disagree: "
                           f"the global batch is bsz_per_host x the {workers} worker(s); give "
                           "one of them")
    rows = batch // workers
    layout["data.bsz_per_host"] = rows
  # Each replica takes an equal share of the rows, with bi_data in forward and backward halves.
  bi_data = options.data.bi_data
  share = (2 if bi_data else 1) * replicas
  global_batch = batch or rows * workers
  if global_batch % share:
    shown = "" if batch else " (the default)"
    halves = " in forward and backward halves (bi_data)" if bi_data else ""
    raise app.UsageError(f"--train_batch_size={global_batch}{shown}: must be a multiple of "
                         f"{share}, the rows of a step shared equally by the {replicas} "
                         f"replica(s){halves}")
  return options.set_fields(layout)


def with_given_data(options: recipes.PretrainingRecipeOptions
                    ) -> recipes.PretrainingRecipeOptions:
  """The settings with the data stage's as --train_data's records hold them (what the run
  trains on, recorded as such)."""
  stored = load_record_info(options.training.train_data)["settings"]
  known = {field.name for field in dataclasses.fields(PretrainingDataConfig)}
  return dataclasses.replace(options, data=PretrainingDataConfig(
      **{name: value for name, value in stored.items() if name in known}))


def output_dir(options: recipes.PretrainingRecipeOptions) -> str:
  if options.output_dir:
    return options.output_dir
  if options.data.objective == objectives.DEFAULT.name:
    return "pretrain_output"
  return f"pretrain_output_{options.data.objective}"


def model_dir_of(options: recipes.PretrainingRecipeOptions) -> str:
  return options.training.model_dir or os.path.join(output_dir(options), "model")


def prepare_data(options: recipes.PretrainingRecipeOptions, model_dir: str):
  """(train, valid) data directories: given, or made here from --input_glob / the default
  (valid None when the text is too small to hold a part out)."""
  if options.training.train_data:
    return options.training.train_data, options.training.valid_data
  directory = os.path.join(output_dir(options), "data")
  if options.input_glob:
    paths = sorted(files.glob(options.input_glob))
    if not paths:
      raise app.UsageError(f"--input_glob={options.input_glob!r} matches no file")
    source = f"--input_glob={options.input_glob}"
    if paths != [options.input_glob]:
      source += f" ({paths[0] if len(paths) == 1 else f'{len(paths)} files'})"
    documents, inputs = default_data.read_text_files(paths), default_data.text_fingerprint(paths)
  else:
    documents, source, inputs = default_data.python_docs_text()
  seed = options.training.runtime.seed
  request = default_data.data_request(options.data, options.vocab_size, seed,
                                      options.held_out_every, inputs)
  # Data a model was trained on are not made again under it. Their settings are the run's,
  # compared with its record first (check_resume); what is left to differ here is the text
  # (or, for a run from before the records, any setting).
  changed = default_data.request_differences(directory, request)
  if changed and files.exists(os.path.join(model_dir, resume.STATE_FILE)):
    names = {name: _DATA_FLAGS.get(name, f"--{name}" if name in FLAGS else name)
             for name in changed}
    raise UserInputError(
        f"{directory} holds the data {model_dir} was trained on, made for "
        f"{default_data.describe_differences(changed, names)}: resume with what made them, or "
        "give another --output_dir")
  data = default_data.prepare_pretraining_data(
      documents, directory, options.data, options.vocab_size, seed,
      held_out_every=options.held_out_every, source=source, inputs=inputs)
  print("\n".join(data["reports"]) or f"Reusing the data in {directory}")
  return data["train"], data["valid"]


# What sets each of the data's settings here, for messages (a setting not listed: its flag).
_DATA_FLAGS = {"bsz_per_host": "--train_batch_size (bsz_per_host)",
               "num_core_per_host": "replicas per worker (--strategy, --cpu_replicas)",
               "inputs": "--input_glob", "perm_size": "perm_size (follows --reuse_len)",
               "held_out_every": "held_out_every (--input_glob or none)"}


def check_resume(options: recipes.PretrainingRecipeOptions, model_dir: str) -> None:
  """Refuses, in one line naming them, settings a resumed run (model_dir holds its checkpoints)
  changes beyond what recipes.RESUMABLE allows."""
  changed = recipes.resume_differences(model_dir, options)
  if changed:
    recorded = os.path.join(model_dir, run_config.RUN_CONFIG_FILE)
    raise UserInputError(
        f"{model_dir} was trained with other settings: "
        f"{', '.join(config_flags.flag_names(FLAG_FIELDS, changed))} differ from {recorded}; "
        f"resume with them (--{config_flags.CONFIG_FILE_FLAG}={recorded}), or give another "
        "--model_dir")


def main(argv):
  del argv
  started = time.perf_counter()
  options = run_options()
  logging.set_verbosity(logging.INFO)
  strategy = options.training.runtime.start()
  model_dir = model_dir_of(options)
  # Held from before the data are made, so a second run into model_dir stops at once (the
  # other workers of a multi-worker run write elsewhere).
  with (run_lock.hold(model_dir) if strategy_lib.is_chief(strategy)
        else contextlib.nullcontext()):
    pretrain(strategy, options, model_dir, started)


def pretrain(strategy, options: recipes.PretrainingRecipeOptions, model_dir: str,
             started: float) -> None:
  """Makes or finds the data, then trains, evaluates and reports (see the module docstring)."""
  if options.training.train_data:
    options = with_given_data(options)
  else:
    options = data_batch_layout(options, strategy)
  if options.model_config_file:  # its faults are refused before the data are made
    options.model_config(options.data.to_dict(), options.vocab_size)
  check_resume(options, model_dir)
  train_data, valid_data = prepare_data(options, model_dir)
  info = load_record_info(train_data)
  config = options.model_config(info["settings"], info["tokenizer"]["vocab_size"])
  budget = TimeBudget(options.max_minutes * 60, started) if options.max_minutes else None
  max_seconds = options.training.max_seconds
  if budget:
    max_seconds = seconds_left(budget, options.max_minutes)  # provisional: set again below
  # The loop's options: the settings' with this run's paths and what the budget leaves; the
  # objective the data must have is the settings'.
  run_training = dataclasses.replace(
      options.training, model_dir=model_dir, train_data=train_data, valid_data=valid_data,
      max_seconds=max_seconds, loss_scale=loss_scale(options), objective=options.data.objective)
  run = PretrainingRun(strategy, config, run_training)
  # Recorded from here; until its first checkpoint, a run that fails takes the record back.
  with recipes.recorded(model_dir, options, strategy_lib.is_chief(strategy)):
    parameters = sum(int(v.numpy().size) for v in run.model.trainable_variables)
    print(f"Model: {config.n_layer} layers, d_model {config.d_model}, {parameters:,} "
          f"parameters, mem_len {config.mem_len}; {strategy.num_replicas_in_sync} replica(s), "
          f"global batch {run.global_batch} x seq_len {run.seq_len}.")
    evaluation_started = time.perf_counter()
    before = run.evaluate() if valid_data else None
    if budget:
      # Keep back what the final evaluation will cost: it reuses this one's compiled step.
      final_evaluation = run.evaluation_seconds or time.perf_counter() - evaluation_started
      run.options.max_seconds = seconds_left(budget, options.max_minutes, final_evaluation)
    result = run.train()
  run.export()
  after = run.evaluate() if valid_data else None
  summary = {"train_steps": result["step"], "skipped_steps": result["skipped_steps"],
             "last_checkpoint": result["last_checkpoint"],
             "final_train_loss": result["history"][-1]["loss"] if result["history"] else None,
             "held_out_before": before, "held_out_after": after,
             "seconds": time.perf_counter() - started, "config": config.to_dict()}
  write_run_summary(os.path.join(model_dir, "run_summary.json"), summary)
  lines = [f"Trained to step {result['step']} in {summary['seconds']:.0f}s; checkpoint "
           f"{result['last_checkpoint']}; backbone for fine-tuning: {model_dir}/{PRETRAINED_DIR};"
           f" with the LM head (run/evaluate_lm.py): {model_dir}/{LM_DIR}; "
           f"settings (--{config_flags.CONFIG_FILE_FLAG} repeats the run): "
           f"{model_dir}/{run_config.RUN_CONFIG_FILE}; TensorBoard: tensorboard --logdir "
           f"{model_dir}"]
  if before and after:
    name = objectives.named(run.objective).display_name
    lines.append(f"Held-out {name} loss: {before['loss']:.3f} (perplexity "
                 f"{before['perplexity']:.0f}) at the start -> {after['loss']:.3f} (perplexity "
                 f"{after['perplexity']:.0f}) now, over {after['targets']:.0f} predicted tokens.")
  print("\n".join(lines))


def entry():
  """The console script (setup.cfg) and run/pretrain.py."""
  cli.run(main, usage=__doc__)
