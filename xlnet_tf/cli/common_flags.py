"""Flags the training CLIs share: distribution, precision and seed (run/pretrain.py too), and
the fine-tuning CLIs' model, optimisation and run: mapped, each to the field of the task's
options tree it sets (config_flags: --config_file, the flags given overriding it), then run by
the library's one driver (tasks.run_finetuning)."""

import dataclasses
import os
from typing import Dict, Iterable, Mapping

from absl import flags

from xlnet_tf.cli import config_flags
from xlnet_tf.tasks.finetuning import DEFAULT_EPOCHS, FinetuningOptions
from xlnet_tf.tasks.finetuning_checkpoints import CHECKPOINTS_DIR
from xlnet_tf.tasks.finetuning_run import run_finetuning
from xlnet_tf.tasks.task import FinetuningTask, TaskOptions
from xlnet_tf.utils.progress import PROGRESS_MODES
from xlnet_tf.training import run_config
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.training.options import DTYPES, RuntimeOptions
from xlnet_tf.training.summaries import SUMMARY_DIR

HELP_GROUP = "Model, training and run (the training tools' shared flags)"  # in --help
# The --do_* flags of a fine-tuning tool, and what each does.
ACTIONS = {"do_train": "Train", "do_eval": "Evaluate on dev",
           "do_predict": "Write test predictions"}
# {--do_* flag: the file flag that switches it on when no --do_* flag is given}: the tool's.
_IMPLYING_FILES = {}


def define_runtime_flags():
  """The flags of RuntimeOptions (every training CLI's: pretraining and fine-tuning)."""
  flags.DEFINE_enum("strategy", "one_device", strategy_lib.STRATEGIES,
                    "Distribution: one device, mirrored (the GPUs or --cpu_replicas of one "
                    "machine), multi_worker_mirrored (machines named by TF_CONFIG) or tpu; the "
                    "same update as one device on the same global batch.")
  flags.DEFINE_string("tpu", None, "TPU address (with --strategy=tpu).")
  flags.DEFINE_integer("cpu_replicas", 0, "Split the CPU into this many logical devices (to "
                       "run --strategy=mirrored on one CPU).")
  flags.DEFINE_enum("dtype", "float32", list(DTYPES), "Compute dtype: bfloat16 for TPU/CPU, "
                    "float16 (with loss scaling) for GPU.")
  flags.DEFINE_integer("seed", 0, "Random seed.")


def runtime_options() -> RuntimeOptions:
  """The flags above; `.start()` seeds, sets the precision policy and makes the strategy."""
  values = flags.FLAGS
  return RuntimeOptions(strategy=values.strategy, tpu=values.tpu,
                        cpu_replicas=values.cpu_replicas, dtype=values.dtype, seed=values.seed)


def define_finetuning_flags(max_seq_length=128, train_batch_size=32, learning_rate=2e-5,
                            warmup_steps=0, lr_layer_decay_rate=1.0, implying_files=None):
  """Model, checkpoint, optimisation and what-to-do flags; defaults per task.
  `implying_files`: {"do_train": "train_file", ...}, the --do_* flags a file flag switches on when
  no --do_* flag is given (imply_actions)."""
  _IMPLYING_FILES.update(implying_files or {})
  flags.DEFINE_string("init_checkpoint", None, "The pretrained model: a directory (xlnet_tf's, "
                      "Hugging Face's or the original's; or a TF1 checkpoint prefix) or a "
                      "Hugging Face hub id. Its config, format and tokenizer (spiece.model, "
                      "tokenizer_config.json) are read from it; the four flags below override "
                      "them, and may not contradict it.")
  flags.DEFINE_string("sp_path", None, "SentencePiece model (default: --init_checkpoint's).")
  flags.DEFINE_bool("uncased", False, "Lower-case the text (default: as --init_checkpoint's "
                    "tokenizer_config.json says).")
  flags.DEFINE_string("model_config", None, "xlnet_config.json (original keys accepted; "
                      "default: --init_checkpoint's config).")
  flags.DEFINE_enum("init_checkpoint_format", "own", ["own", "original", "huggingface"],
                    "Format of --init_checkpoint (default: what its files are).")
  flags.DEFINE_integer("max_seq_length", max_seq_length, "Tokens per sequence.")
  flags.DEFINE_integer("train_batch_size", train_batch_size, "Batch size (global: over all "
                       "replicas and micro-batches).")
  flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each step's batch into this "
                       "many micro-batches, run one after another (less memory), their "
                       "gradients added up: one update, equal to the whole batch's.")
  flags.DEFINE_integer("train_steps", None, "Training steps (default: --num_train_epochs' "
                       "worth).")
  flags.DEFINE_float("num_train_epochs", None, "Passes over the training data, instead of "
                     "--train_steps: epochs x training examples / --train_batch_size steps, "
                     f"rounded up (default: {DEFAULT_EPOCHS:g}, unless --train_steps is given).")
  flags.DEFINE_integer("eval_every", None, "Evaluate on dev every this many steps; the best "
                       "checkpoint is kept.")
  flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.")
  flags.DEFINE_integer("warmup_steps", warmup_steps, "Linear warmup steps.")
  flags.DEFINE_float("lr_layer_decay_rate", lr_layer_decay_rate, "Layer i's learning rate is "
                     "multiplied by rate^(n_layer - 1 - i).")
  flags.DEFINE_bool("recompute", False, "Recompute each block in the backward pass instead of "
                    "keeping its activations: less memory, about a third more compute "
                    "(docs/benchmarks.md, Fine-tuning memory).")
  flags.DEFINE_integer("freeze_layers", None, "Do not train the embedding and the first N "
                       "blocks (0: the embedding only); default: train everything.")
  for action, does in ACTIONS.items():
    implied = (f"; implied by --{_IMPLYING_FILES[action]} when no --do_* flag is given"
               if action in _IMPLYING_FILES else "")
    flags.DEFINE_bool(action, False, does + implied + ".")
  flags.DEFINE_string("output_dir", None, "Best weights (best/), metrics, predictions, "
                      "TensorBoard scalars of training (train/), what resumes training "
                      "(checkpoints/: the same command again resumes a killed or stopped run), "
                      f"the run's settings ({run_config.RUN_CONFIG_FILE}: --config_file "
                      "repeats the run).")
  flags.DEFINE_integer("save_steps", 500, "Save what resumes training (--output_dir/"
                       "checkpoints) every this many steps; SIGTERM or SIGINT also saves the "
                       "step reached, then stops (exit status 143 or 130).")
  define_runtime_flags()
  flags.DEFINE_enum("progress", "auto", list(PROGRESS_MODES),
                    "Training progress on stdout: a bar redrawn in place (steps, loss, ETA), "
                    "plain lines, or none; auto = the bar on a terminal, lines otherwise. "
                    "Every mode but none prints one line per dev evaluation.")
  config_flags.define_config_file_flag()


# {flag: the field of the task's options (TaskOptions) it sets}, every fine-tuning tool's.
FINETUNING_FLAGS = {
    "init_checkpoint": "model.init_checkpoint", "sp_path": "model.sp_path",
    "uncased": "model.uncased", "model_config": "model.model_config",
    "init_checkpoint_format": "model.init_checkpoint_format",
    "max_seq_length": "max_seq_length", "train_batch_size": "finetuning.batch_size",
    "gradient_accumulation_steps": "finetuning.gradient_accumulation_steps",
    "train_steps": "finetuning.train_steps", "num_train_epochs": "finetuning.num_train_epochs",
    "eval_every": "finetuning.eval_every", "learning_rate": "finetuning.optimizer.learning_rate",
    "warmup_steps": "finetuning.optimizer.warmup_steps",
    "lr_layer_decay_rate": "finetuning.optimizer.lr_layer_decay_rate",
    "recompute": "recompute", "freeze_layers": "freeze_layers", "do_train": "do_train",
    "do_eval": "do_eval", "do_predict": "do_predict", "output_dir": "output_dir",
    "save_steps": "finetuning.save_steps", "strategy": "finetuning.runtime.strategy",
    "tpu": "finetuning.runtime.tpu", "cpu_replicas": "finetuning.runtime.cpu_replicas",
    "dtype": "finetuning.runtime.dtype", "seed": "finetuning.runtime.seed",
    "progress": "finetuning.progress"}
# The flags naming files or directories: a config file records them, they are given as flags.
FINETUNING_PATH_FLAGS = ("init_checkpoint", "sp_path", "model_config", "output_dir")
# Flags whose default means "not given" (the pretrained directory's, or the training run's,
# value): they set their field only when given on the command line.
FINETUNING_PRESENT_ONLY = ("uncased", "init_checkpoint_format")


def imply_actions() -> None:
  """Without any --do_* flag, the actions the file flags given ask for (define_finetuning_flags'
  `implying_files`): --train_file alone trains. A --do_* flag given, the others stay off."""
  values = flags.FLAGS
  if any(values[action].present for action in ACTIONS):
    return
  for action, file_flag in _IMPLYING_FILES.items():
    if values[file_flag].value:
      values[action].value = True


def task_options(options_class, mapping: Mapping[str, str], paths: Iterable[str] = (),
                 present_only: Iterable[str] = (), **required) -> TaskOptions:
  """The task's options tree (of `options_class`, a TaskOptions) from the flags: every
  fine-tuning tool's (FINETUNING_FLAGS) and the tool's own (`mapping`: {flag: field}; `paths`:
  those naming files; `present_only`: those whose default means "not given"), over
  --config_file's tree when given (config_flags.options_from_flags), else over a preset with
  `required` (the class's fields without a default that a required flag sets). Checked as the
  options are built: one line for a setting no run can use. TensorBoard scalars in
  --output_dir/train, checkpoints in --output_dir/checkpoints."""
  values = flags.FLAGS
  mapping = {**FINETUNING_FLAGS, **mapping}
  present_only = set(FINETUNING_PRESENT_ONLY) | set(present_only)
  preset = options_class(finetuning=FinetuningOptions(), output_dir="", **required)
  options = config_flags.options_from_flags(
      preset, {name: field for name, field in mapping.items() if name not in present_only},
      (*FINETUNING_PATH_FLAGS, *paths))
  given = {mapping[name]: values[name].value for name in sorted(present_only)
           if values[name].present}
  options = run_config.replace(options, given, {mapping[name]: f"--{name}"
                                                for name in present_only})
  output_dir = options.output_dir
  return dataclasses.replace(options, finetuning=dataclasses.replace(
      options.finetuning, summary_dir=output_dir and os.path.join(output_dir, SUMMARY_DIR),
      checkpoint_dir=output_dir and os.path.join(output_dir, CHECKPOINTS_DIR)))


def run(task: FinetuningTask, mapping: Mapping[str, str]) -> Dict:
  """Runs `task` (tasks.run_finetuning), its messages naming settings by their flags (every
  fine-tuning tool's and the tool's own `mapping`)."""
  names = {**FINETUNING_FLAGS, **mapping}
  return run_finetuning(task, setting_names=lambda paths: config_flags.flag_names(names, paths))
