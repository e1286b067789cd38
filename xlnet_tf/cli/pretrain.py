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

from xlnet_tf.config import XLNetConfig
from xlnet_tf.config import POS_ENCODINGS
from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.pretraining.data import default_data
from xlnet_tf import objectives
from xlnet_tf.pretraining import recipes
from xlnet_tf.pretraining.model_config import config_for_data
from xlnet_tf.pretraining.data.records import load_record_info
from xlnet_tf.pretraining.time_budget import TimeBudget
from xlnet_tf.training import resume
from xlnet_tf.training import run_lock
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.pretraining.loop import LM_DIR, PRETRAINED_DIR, PretrainingRun, write_run_summary
from xlnet_tf.training.options import RuntimeOptions

from xlnet_tf.cli import common_flags

common_flags.define_runtime_flags()  # --strategy, --tpu, --cpu_replicas, --dtype, --seed
flags.adopt_module_key_flags(common_flags)  # listed by --help with this tool's own
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


_FINISH_SECONDS = 10  # the last checkpoint, the backbone export and the summaries

# Flags that must be > 0 and >= 0 when given (None: the recipe's value).
_POSITIVE_FLAGS = ("train_steps", "learning_rate", "save_steps", "log_steps", "eval_batches",
                   "train_batch_size", "max_minutes", "lr_layer_decay_rate",
                   "gradient_accumulation_steps")
_NON_NEGATIVE_FLAGS = ("warmup_steps", "weight_decay", "clip", "cpu_replicas", "mem_len")


def check_flags() -> None:
  """One line naming the first numeric flag out of its range (before any work is done)."""
  for names, allowed, wanted in ((_POSITIVE_FLAGS, lambda v: v > 0, "positive"),
                                 (_NON_NEGATIVE_FLAGS, lambda v: v >= 0, "zero or more")):
    for name in names:
      value = FLAGS[name].value
      if value is not None and not allowed(value):  # NaN fails both
        raise app.UsageError(f"--{name}={value}: must be {wanted}")
  left_to_right = FLAGS.objective == objectives.LEFT_TO_RIGHT_LM.name
  for name, default in (("pos_encoding", "relative"), ("loss_positions", "full")):
    if FLAGS[name].value not in (None, default) and not left_to_right:
      raise app.UsageError(f"--{name}={FLAGS[name].value}: for --objective=clm only "
                           "(Transformer-XL's ablations of a left-to-right LM)")
  if FLAGS.pos_encoding in ("shaw", "absolute_learned") and not (FLAGS.clamp_len or 0) > 0:
    raise app.UsageError(f"--pos_encoding={FLAGS.pos_encoding} needs --clamp_len > 0 (the "
                         "largest distance or position its learned table holds)")


def seconds_left(budget: TimeBudget, reserved=0.0):
  """What --max_minutes (`budget`) leaves for training, less `reserved` seconds and the end."""
  left = budget.left(reserved + _FINISH_SECONDS)
  if left <= 0:
    raise app.UsageError(f"--max_minutes={FLAGS.max_minutes}: {budget.elapsed():.0f}"
                         " s went to preparing the data and the first evaluation; nothing is "
                         "left to train")
  return left


def model_config(info, run_recipe: recipes.PretrainingRecipeOptions) -> XLNetConfig:
  # A --model_config file keeps its own encoding unless the flags name one.
  overrides = {name: value for name, value in run_recipe.model_overrides().items()
               if not FLAGS.model_config or FLAGS[name].value is not None}
  return config_for_data(info["settings"], info["tokenizer"]["vocab_size"],
                         model_size=run_recipe.model_size, model_config_file=FLAGS.model_config,
                         mem_len=run_recipe.mem_len, **overrides)


def use_xla(runtime: RuntimeOptions) -> bool:
  if FLAGS.jit_compile is not None:
    return FLAGS.jit_compile
  import tensorflow as tf
  on_cpu = not tf.config.list_physical_devices("GPU") and runtime.strategy != "tpu"
  return not (runtime.dtype == "bfloat16" and on_cpu)


def loss_scale(runtime: RuntimeOptions):
  """--loss_scale for float16 runs: "dynamic" or a number; None for the other dtypes."""
  if runtime.dtype != "float16":
    return None
  if FLAGS.loss_scale == "dynamic":
    return "dynamic"
  try:
    return float(FLAGS.loss_scale)
  except ValueError:
    raise app.UsageError(f"--loss_scale={FLAGS.loss_scale!r}: 'dynamic' or a number") from None


# The recipe's fields (its data's and its loop's among them) set by flags of the same name
# (--clip sets clip_norm).
_RECIPE_FLAGS = ("model_size", "mem_len", "vocab_size", "seq_len", "reuse_len", "num_predict",
                 "bsz_per_host", "bi_data", "span_prediction", "learning_rate", "warmup_steps",
                 "weight_decay", "lr_layer_decay_rate", "next_sentence", "train_steps",
                 "pos_encoding", "clamp_len", "loss_positions")


def recipe(strategy=None) -> recipes.PretrainingRecipeOptions:
  """The run's configuration: the preset for --objective (and --input_glob), with what the
  flags give; with the run's `strategy`, data made here are laid out for its batch
  (`data_batch_layout`)."""
  preset = recipes.recipe_for(FLAGS.objective, bool(FLAGS.input_glob))
  given = {name: FLAGS[name].value for name in _RECIPE_FLAGS if FLAGS[name].value is not None}
  if FLAGS.clip is not None:
    given["clip_norm"] = FLAGS.clip
  if FLAGS.seq_len is not None and FLAGS.reuse_len is None and preset.data.reuse_len:
    if FLAGS.seq_len % 2:
      raise app.UsageError(f"--seq_len={FLAGS.seq_len}: without --reuse_len, half of it is "
                           "reused as memory, so it must be even (or give --reuse_len)")
  if strategy is not None and not FLAGS.train_data:
    given.update(data_batch_layout(strategy, given.get("bi_data", preset.data.bi_data),
                                   preset.data.bsz_per_host))
  return preset.replace(**given)


def data_batch_layout(strategy, bi_data: bool, preset_rows: int) -> dict:
  """The data's rows per worker (bsz_per_host) and replicas per worker (num_core_per_host) for
  data made here: the ones this run trains with, --train_batch_size split over the workers."""
  workers = strategy_lib.num_workers(strategy)
  replicas = strategy.num_replicas_in_sync
  layout = {"num_core_per_host": replicas // workers}
  rows = FLAGS.bsz_per_host or preset_rows
  if FLAGS.train_batch_size is not None:
    if FLAGS.bsz_per_host is not None and FLAGS.bsz_per_host * workers != FLAGS.train_batch_size:
      raise app.UsageError(f"--train_batch_size={FLAGS.train_batch_size} and --bsz_per_host="
                           f"{FLAGS.bsz_per_host} disagree: the global batch is bsz_per_host x "
                           f"the {workers} worker(s); give one of them")
    rows = FLAGS.train_batch_size // workers
    layout["bsz_per_host"] = rows
  # Each replica takes an equal share of the rows, with bi_data in forward and backward halves.
  share = (2 if bi_data else 1) * replicas
  global_batch = FLAGS.train_batch_size or rows * workers
  if global_batch % share:
    shown = "" if FLAGS.train_batch_size else " (the default)"
    halves = " in forward and backward halves (bi_data)" if bi_data else ""
    raise app.UsageError(f"--train_batch_size={global_batch}{shown}: must be a multiple of "
                         f"{share}, the rows of a step shared equally by the {replicas} "
                         f"replica(s){halves}")
  return layout


def output_dir() -> str:
  if FLAGS.output_dir:
    return FLAGS.output_dir
  if FLAGS.objective == objectives.DEFAULT.name:
    return "pretrain_output"
  return f"pretrain_output_{FLAGS.objective}"


def prepare_data(run_recipe: recipes.PretrainingRecipeOptions, seed: int, model_dir: str):
  """(train, valid) data directories: given, or made here from --input_glob / the default
  (valid None when the text is too small to hold a part out)."""
  if FLAGS.train_data:
    if FLAGS.input_glob:
      raise app.UsageError("--input_glob and --train_data exclude each other")
    return FLAGS.train_data, FLAGS.valid_data
  directory = os.path.join(output_dir(), "data")
  if FLAGS.input_glob:
    paths = sorted(files.glob(FLAGS.input_glob))
    if not paths:
      raise app.UsageError(f"--input_glob={FLAGS.input_glob!r} matches no file")
    source = f"--input_glob={FLAGS.input_glob}"
    if paths != [FLAGS.input_glob]:
      source += f" ({paths[0] if len(paths) == 1 else f'{len(paths)} files'})"
    documents, inputs = default_data.read_text_files(paths), default_data.text_fingerprint(paths)
  else:
    documents, source, inputs = default_data.python_docs_text()
  request = default_data.data_request(run_recipe.data, run_recipe.vocab_size, seed,
                                      run_recipe.held_out_every, inputs)
  changed = default_data.request_differences(directory, request)
  if changed and files.exists(os.path.join(model_dir, resume.STATE_FILE)):
    names = {name: _DATA_FLAGS.get(name, f"--{name}" if name in FLAGS else name)
             for name in changed}
    raise UserInputError(
        f"{directory} holds the data {model_dir} was trained on, made for "
        f"{default_data.describe_differences(changed, names)}: resume with what made them, or "
        "give another --output_dir")
  data = default_data.prepare_pretraining_data(
      documents, directory, run_recipe.data, run_recipe.vocab_size, seed,
      held_out_every=run_recipe.held_out_every, source=source, inputs=inputs)
  print("\n".join(data["reports"]) or f"Reusing the data in {directory}")
  return data["train"], data["valid"]


# What sets each of the data's settings here, for messages (a setting not listed: its flag).
_DATA_FLAGS = {"bsz_per_host": "--train_batch_size (bsz_per_host)",
               "num_core_per_host": "replicas per worker (--strategy, --cpu_replicas)",
               "inputs": "--input_glob", "perm_size": "perm_size (follows --reuse_len)",
               "held_out_every": "held_out_every (--input_glob or none)"}


def main(argv):
  del argv
  started = time.perf_counter()
  check_flags()
  logging.set_verbosity(logging.INFO)
  runtime = common_flags.runtime_options()
  strategy = runtime.start()
  model_dir = FLAGS.model_dir or os.path.join(output_dir(), "model")
  # Held from before the data are made, so a second run into model_dir stops at once (the
  # other workers of a multi-worker run write elsewhere).
  with (run_lock.hold(model_dir) if strategy_lib.is_chief(strategy)
        else contextlib.nullcontext()):
    pretrain(strategy, runtime, model_dir, started)


def pretrain(strategy, runtime: RuntimeOptions, model_dir: str, started: float) -> None:
  """Makes or finds the data, then trains, evaluates and reports (see the module docstring)."""
  run_recipe = recipe(strategy)
  if FLAGS.model_config:  # its faults are refused before the data are made
    model_config({"settings": run_recipe.data.to_dict(),
                  "tokenizer": {"vocab_size": run_recipe.vocab_size}}, run_recipe)
  train_data, valid_data = prepare_data(run_recipe, runtime.seed, model_dir)
  config = model_config(load_record_info(train_data), run_recipe)
  budget = TimeBudget(FLAGS.max_minutes * 60, started) if FLAGS.max_minutes else None
  max_seconds = None
  if budget:
    max_seconds = seconds_left(budget)  # provisional: set again after the first evaluation
    if FLAGS.train_steps is None:
      run_recipe = run_recipe.replace(train_steps=10 ** 9)  # the budget decides
  # The recipe's loop options with this run's paths and operational choices; the objective
  # the data must have is the recipe's.
  options = dataclasses.replace(
      run_recipe.training, model_dir=model_dir, train_data=train_data, valid_data=valid_data,
      max_seconds=max_seconds, global_batch_size=FLAGS.train_batch_size,
      save_steps=FLAGS.save_steps, log_steps=FLAGS.log_steps, jit_compile=use_xla(runtime),
      eval_batches=FLAGS.eval_batches, loss_scale=loss_scale(runtime),
      init_checkpoint=FLAGS.init_checkpoint, init_checkpoint_format=FLAGS.init_checkpoint_format,
      recompute_blocks=FLAGS.recompute, runtime=runtime, objective=run_recipe.data.objective,
      gradient_accumulation_steps=FLAGS.gradient_accumulation_steps)
  run = PretrainingRun(strategy, config, options)
  parameters = sum(int(v.numpy().size) for v in run.model.trainable_variables)
  print(f"Model: {config.n_layer} layers, d_model {config.d_model}, {parameters:,} parameters, "
        f"mem_len {config.mem_len}; {strategy.num_replicas_in_sync} replica(s), global batch "
        f"{run.global_batch} x seq_len {run.seq_len}.")
  evaluation_started = time.perf_counter()
  before = run.evaluate() if valid_data else None
  if budget:
    # Keep back what the final evaluation will cost: it reuses this one's compiled step.
    final_evaluation = run.evaluation_seconds or time.perf_counter() - evaluation_started
    run.options.max_seconds = seconds_left(budget, final_evaluation)
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
           f"TensorBoard: tensorboard --logdir {model_dir}"]
  if before and after:
    name = objectives.named(run.objective).display_name
    lines.append(f"Held-out {name} loss: {before['loss']:.3f} (perplexity "
                 f"{before['perplexity']:.0f}) at the start -> {after['loss']:.3f} (perplexity "
                 f"{after['perplexity']:.0f}) now, over {after['targets']:.0f} predicted tokens.")
  print("\n".join(lines))


def entry():
  """The console script (setup.cfg) and run/pretrain.py."""
  cli.run(main, usage=__doc__)
