"""Flags the training CLIs share: distribution, precision and seed (run/pretrain.py too), and
the fine-tuning CLIs' model and optimisation."""

import dataclasses
import math
import os

from absl import app
from absl import flags

from xlnet_tf.cli.pretrained_flags import PretrainedModel, pretrained_model
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.freezing import check_frozen_layers
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.finetuning_checkpoints import CHECKPOINTS_DIR
from xlnet_tf.utils.progress import PROGRESS_MODES
from xlnet_tf.training import strategy as strategy_lib
from xlnet_tf.training.distributed_steps import check_accumulation
from xlnet_tf.training.options import DTYPES, RuntimeOptions
from xlnet_tf.training.summaries import SUMMARY_DIR
from xlnet_tf.utils.errors import UserInputError

HELP_GROUP = "Model, training and run (the training tools' shared flags)"  # in --help
# The training length without --train_steps or --num_train_epochs: passes over the training
# data (Hugging Face's Trainer's default), so a small file is not trained for a fixed 1000 steps.
DEFAULT_EPOCHS = 3.0
# What FinetuningOptions holds until the training examples are counted (training_length).
_STEPS_FROM_EPOCHS = 1
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
                      "(checkpoints/: the same command again resumes a killed or stopped run).")
  flags.DEFINE_integer("save_steps", 500, "Save what resumes training (--output_dir/"
                       "checkpoints) every this many steps; SIGTERM or SIGINT also saves the "
                       "step reached, then stops (exit status 143 or 130).")
  define_runtime_flags()
  flags.DEFINE_enum("progress", "auto", list(PROGRESS_MODES),
                    "Training progress on stdout: a bar redrawn in place (steps, loss, ETA), "
                    "plain lines, or none; auto = the bar on a terminal, lines otherwise. "
                    "Every mode but none prints one line per dev evaluation.")


def pretrained_backbone(config, model: PretrainedModel):
  """An XLNetModel of `config`, loaded from `model`'s checkpoint when there is one."""
  backbone = XLNetModel(config)
  if model.checkpoint:
    finetuning.load_pretrained_weights(backbone, model.checkpoint, model.checkpoint_format)
  return apply_memory_flags(backbone)


def apply_memory_flags(backbone):
  """--recompute and --freeze_layers on `backbone` (before the optimizer is built)."""
  backbone.recompute_blocks = flags.FLAGS.recompute
  if flags.FLAGS.freeze_layers is not None:
    backbone.freeze_layers(flags.FLAGS.freeze_layers)
  return backbone


def finetuning_setup(examples_per_row=1, **config_overrides):
  """(strategy, tokenizer, backbone config, options, the pretrained model) of a fine-tuning run.

  Every flag a run could not use is refused first, before anything is read or written: no
  --do_* flag, the optimisation flags (FinetuningOptions), a --max_seq_length too long for the
  batch (`examples_per_row`: sequences per example, e.g. a multiple-choice question's
  options), a SentencePiece model larger than the config's vocabulary.
  The backbone config is --init_checkpoint's or --model_config's (pretrained_flags), with
  `config_overrides`.
  """
  values = flags.FLAGS
  if not (values.do_train or values.do_eval or values.do_predict):
    raise app.UsageError("nothing to do: pass --do_train, --do_eval and/or --do_predict")
  check_training_length_flags()
  runtime = runtime_options()
  options = finetuning_options(runtime)
  model = pretrained_model(**config_overrides)
  config = model.config.for_finetuning()
  if values.freeze_layers is not None:
    check_frozen_layers(values.freeze_layers, config.n_layer, "--freeze_layers")
  finetuning.check_sequence_length(
      config, values.max_seq_length,
      values.train_batch_size // values.gradient_accumulation_steps * examples_per_row)
  strategy = runtime.start()
  check_accumulation(options.gradient_accumulation_steps, options.batch_size,
                     strategy.num_replicas_in_sync)
  # --output_dir is made by what writes there first: a run that fails before leaves nothing.
  return strategy, model.tokenizer, config, options, model


def imply_actions() -> None:
  """Without any --do_* flag, the actions the file flags given ask for (define_finetuning_flags'
  `implying_files`): --train_file alone trains. A --do_* flag given, the others stay off."""
  values = flags.FLAGS
  if any(values[action].present for action in ACTIONS):
    return
  for action, file_flag in _IMPLYING_FILES.items():
    if values[file_flag].value:
      values[action].value = True


def check_training_length_flags() -> None:
  """--train_steps or --num_train_epochs, not both; epochs a positive number."""
  values = flags.FLAGS
  epochs = values.num_train_epochs
  if epochs is not None and not (math.isfinite(epochs) and epochs > 0):
    raise UserInputError(f"--num_train_epochs={epochs:g}: must be a positive number")
  if values.train_steps is not None and epochs is not None:
    raise UserInputError(f"--train_steps={values.train_steps} and --num_train_epochs="
                         f"{epochs:g} both set the training length; give one")


def training_length(options: finetuning.FinetuningOptions, train_examples: int,
                    examples: str = "examples") -> finetuning.FinetuningOptions:
  """`options` with its train_steps: --train_steps, else --num_train_epochs (default
  DEFAULT_EPOCHS) over the `train_examples` at --train_batch_size, rounded up, said in one
  line (`examples`: what a training row is, e.g. windows)."""
  values = flags.FLAGS
  if values.train_steps is not None:
    return options
  given = values.num_train_epochs is not None
  epochs = values.num_train_epochs if given else DEFAULT_EPOCHS
  steps = max(1, math.ceil(epochs * train_examples / options.batch_size))
  print(f"Training {steps} step{'s' * (steps != 1)}: {epochs:g} epochs of {train_examples} "
        f"{examples} at --train_batch_size={options.batch_size}"
        + ("" if given else " (the default; --num_train_epochs or --train_steps sets it)"))
  return dataclasses.replace(options, train_steps=steps)


def require_files(file_of_action) -> None:
  """Each --do_* flag given needs its file flag: {"do_train": "train_file", ...}."""
  values = flags.FLAGS
  for action, file_flag in file_of_action.items():
    if values[action].value and not values[file_flag].value:
      raise app.UsageError(f"--{action} needs --{file_flag}")


# The OptimizerOptions fields a fine-tuning CLI may have flags for (by the same names); the
# others keep FinetuningOptions' defaults.
_OPTIMIZER_FLAGS = ("learning_rate", "warmup_steps", "weight_decay", "lr_layer_decay_rate")


def finetuning_options(runtime: RuntimeOptions) -> finetuning.FinetuningOptions:
  """The optimisation flags (checked by FinetuningOptions) and `runtime`; without
  --train_steps, the steps are training_length's, once the training examples are counted. XLA
  as --jit_compile says where a CLI has that flag; TensorBoard scalars in --output_dir/train,
  checkpoints in --output_dir/checkpoints every --save_steps."""
  values = flags.FLAGS
  optimizer = {name: values[name].value for name in _OPTIMIZER_FLAGS if name in values}
  train_steps = values.train_steps if values.train_steps is not None else _STEPS_FROM_EPOCHS
  return finetuning.FinetuningOptions(
      train_steps=train_steps, batch_size=values.train_batch_size,
      eval_every=values.eval_every, runtime=runtime,
      jit_compile=getattr(values, "jit_compile", "auto"), progress=values.progress,
      summary_dir=values.output_dir and os.path.join(values.output_dir, SUMMARY_DIR),
      gradient_accumulation_steps=values.gradient_accumulation_steps,
      checkpoint_dir=values.output_dir and os.path.join(values.output_dir, CHECKPOINTS_DIR),
      save_steps=values.save_steps, **optimizer)


def best_dir() -> str:
  """Where the fine-tuning loop keeps the best weights: --output_dir/best."""
  return os.path.join(flags.FLAGS.output_dir, finetuning.BEST_DIR)
