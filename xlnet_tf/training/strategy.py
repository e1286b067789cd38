"""Choosing a tf.distribute strategy by name."""

from typing import Optional

import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def split_cpu(num_devices: int) -> None:
  """Makes `num_devices` logical CPU devices (to run mirrored replicas on one CPU).

  Must run before TensorFlow initialises its devices.
  """
  cpus = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(
      cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices)


def create_strategy(name: str, tpu_address: Optional[str] = None) -> tf.distribute.Strategy:
  if name == "one_device":
    device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
    return tf.distribute.OneDeviceStrategy(device)
  if name == "mirrored":
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise ValueError(f"strategy must be one of {STRATEGIES}; got {name!r}")


def worker_index(strategy: tf.distribute.Strategy) -> int:
  resolver = getattr(strategy, "cluster_resolver", None)
  return int(resolver.task_id) if resolver is not None and resolver.task_id is not None else 0


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.cluster_spec().as_dict():
    return True
  return (resolver.task_type in ("chief", None)) or (
      resolver.task_type == "worker" and resolver.task_id == 0
      and "chief" not in resolver.cluster_spec().as_dict())
