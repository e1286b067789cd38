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


def _cluster(strategy) -> dict:
  resolver = getattr(strategy, "cluster_resolver", None)
  return resolver.cluster_spec().as_dict() if resolver is not None else {}


def num_workers(strategy: tf.distribute.Strategy) -> int:
  """Input pipelines: TPU hosts, or chief + workers of a multi-worker cluster, else 1."""
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return strategy.extended.num_hosts
  cluster = _cluster(strategy)
  return max(1, sum(len(cluster.get(job, [])) for job in ("chief", "worker")))


def worker_index(strategy: tf.distribute.Strategy) -> int:
  resolver = getattr(strategy, "cluster_resolver", None)
  return int(resolver.task_id) if resolver is not None and resolver.task_id is not None else 0


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """The task that writes checkpoints and summaries: the chief, else worker 0."""
  cluster = _cluster(strategy)
  if not cluster:
    return True
  resolver = strategy.cluster_resolver
  if "chief" in cluster:
    return resolver.task_type == "chief"
  return resolver.task_type == "worker" and resolver.task_id == 0
