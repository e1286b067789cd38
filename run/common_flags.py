"""Flags the fine-tuning CLIs share: distribution, precision, seed."""

from absl import flags
import keras

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
