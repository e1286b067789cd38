"""Flags the fine-tuning CLIs share: distribution, precision, seed, model, optimisation."""

import os

from absl import flags
import keras

from xlnet_tf import XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.progress import PROGRESS_MODES
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.training import strategy as strategy_lib


def define_runtime_flags():
  flags.DEFINE_enum("strategy", "one_device", ["one_device", "mirrored"],
                    "Distribution (Model.fit: one machine).")
  flags.DEFINE_integer("cpu_replicas", 0, "Logical CPU devices for --strategy=mirrored.")
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"], "Compute dtype.")
  flags.DEFINE_integer("seed", 0, "Random seed.")


def runtime_strategy():
  """Seeds, precision policy and the strategy, from the flags above."""
  values = flags.FLAGS
  keras.utils.set_random_seed(values.seed)
  if values.cpu_replicas:
    strategy_lib.split_cpu(values.cpu_replicas)
  if values.dtype != "float32":
    keras.mixed_precision.set_global_policy(f"mixed_{values.dtype}")
  return strategy_lib.create_strategy(values.strategy)


def define_finetuning_flags(max_seq_length=128, train_batch_size=32, train_steps=1000,
                            learning_rate=2e-5, warmup_steps=0, lr_layer_decay_rate=1.0):
  """Model, checkpoint, optimisation and what-to-do flags; defaults per task."""
  flags.DEFINE_string("sp_path", None, "SentencePiece model.")
  flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
  flags.DEFINE_string("model_config", None, "xlnet_config.json (original keys accepted).")
  flags.DEFINE_string("init_checkpoint", None, "Pretrained weights of the backbone.")
  flags.DEFINE_enum("init_checkpoint_format", "own", ["own", "original", "huggingface"],
                    "Format of --init_checkpoint.")
  flags.DEFINE_integer("max_seq_length", max_seq_length, "Tokens per sequence.")
  flags.DEFINE_integer("train_batch_size", train_batch_size, "Batch size.")
  flags.DEFINE_integer("train_steps", train_steps, "Training steps.")
  flags.DEFINE_integer("eval_every", None, "Evaluate on dev every this many steps; the best "
                       "checkpoint is kept.")
  flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.")
  flags.DEFINE_integer("warmup_steps", warmup_steps, "Linear warmup steps.")
  flags.DEFINE_float("lr_layer_decay_rate", lr_layer_decay_rate, "Layer i's learning rate is "
                     "multiplied by rate^(n_layer - 1 - i).")
  flags.DEFINE_bool("do_train", False, "Train.")
  flags.DEFINE_bool("do_eval", False, "Evaluate on dev.")
  flags.DEFINE_bool("do_predict", False, "Write test predictions.")
  flags.DEFINE_string("output_dir", None, "Best weights, metrics, predictions.")
  define_runtime_flags()
  flags.DEFINE_enum("progress", "auto", list(PROGRESS_MODES),
                    "Training progress on stdout: a bar redrawn in place (steps, loss, ETA), "
                    "plain lines, or none; auto = the bar on a terminal, lines otherwise. "
                    "Every mode but none prints one line per dev evaluation.")


def pretrained_backbone(config):
  """An XLNetModel, loaded from --init_checkpoint when given."""
  values = flags.FLAGS
  backbone = XLNetModel(config)
  if values.init_checkpoint:
    checkpoints.LOADERS[values.init_checkpoint_format](backbone, values.init_checkpoint)
  return backbone


def finetuning_setup():
  """(strategy, tokenizer, backbone config) of a fine-tuning run; creates --output_dir."""
  values = flags.FLAGS
  strategy = runtime_strategy()
  os.makedirs(values.output_dir, exist_ok=True)
  tokenizer = XLNetTokenizer(values.sp_path, lower=values.uncased)
  config = XLNetConfig.from_json_file(values.model_config, mem_len=0, reuse_len=0, bi_data=False)
  return strategy, tokenizer, config


def finetuning_options(jit_compile="auto") -> finetuning.FinetuningOptions:
  values = flags.FLAGS
  return finetuning.FinetuningOptions(
      train_steps=values.train_steps, batch_size=values.train_batch_size,
      learning_rate=values.learning_rate, warmup_steps=values.warmup_steps,
      weight_decay=getattr(values, "weight_decay", 0.0),
      lr_layer_decay_rate=values.lr_layer_decay_rate, eval_every=values.eval_every,
      seed=values.seed, jit_compile=jit_compile, progress=values.progress)


def best_dir() -> str:
  """Where the fine-tuning loop keeps the best weights: --output_dir/best."""
  return os.path.join(flags.FLAGS.output_dir, finetuning.BEST_DIR)
