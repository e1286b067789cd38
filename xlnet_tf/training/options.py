"""The options every training run shares, and how a run's options hold them.

Two suffixes name configuration: `...Config` for what a file stores (XLNetConfig,
pretraining.data.PretrainingDataConfig) and `...Options` for how a run runs. The groups below are
defined once and held, not copied, by the run options of pretraining
(pretraining.PretrainingOptions) and fine-tuning (tasks.FinetuningOptions):

  OptimizerOptions  the optimizer and its schedule: learning rate, warmup, decay, weight decay,
                    per-layer rates, clipping (training.optimization.create_optimizer)
  RuntimeOptions    the process: distribution strategy, precision, seed (`start()`)

A field holding a group is declared with `group_field`; options decorated with
`accepts_group_fields` also take a group's fields by name, so
PretrainingOptions(learning_rate=1e-3) is PretrainingOptions(optimizer=OptimizerOptions(
learning_rate=1e-3)) and dataclasses.replace(options, seed=3) replaces the runtime's seed. Each
name leads to one field: options whose groups (or own fields) share a name cannot take their
fields by name (a TypeError when the class is defined). A whole run's settings, with their
dotted names, are training.run_config's.
"""

import dataclasses
import functools
from typing import FrozenSet, Optional

import keras
import tensorflow as tf

from xlnet_tf.training import strategy as strategy_lib

__all__ = ["DTYPES", "OptimizerOptions", "RuntimeOptions", "accepts_group_fields",
           "accepted_names", "group_field"]

DTYPES = ("float32", "bfloat16", "float16")  # compute dtypes (float16: with loss scaling)


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
  """XLNet's optimizer (AdamW, eps 1e-6, no weight decay on LayerNorm or biases) and its
  schedule (linear warmup, then linear decay to learning_rate * min_lr_ratio at the run's last
  step). The fields keep create_optimizer's order of arguments."""
  learning_rate: float = 1e-4        # the peak
  warmup_steps: int = 0
  weight_decay: float = 0.01
  lr_layer_decay_rate: float = 1.0   # layer i's rate is multiplied by rate^(n_layer - 1 - i)
  min_lr_ratio: float = 0.0
  clip_norm: Optional[float] = 1.0   # global-norm clipping (None: none)


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
  """How the process runs: the tf.distribute strategy (training.strategy.STRATEGIES; tpu: the
  TPU's address; cpu_replicas: logical CPU devices for mirrored replicas on one CPU), the
  compute dtype (DTYPES; not float32: Keras' mixed precision policy) and the seed (Python,
  NumPy and TensorFlow; the dropout masks of a step derive from it)."""
  strategy: str = "one_device"
  tpu: Optional[str] = None
  cpu_replicas: int = 0
  dtype: str = "float32"
  seed: int = 0

  def start(self) -> tf.distribute.Strategy:
    """Seeds, splits the CPU, sets the precision policy and makes the strategy; the CPU is split
    before TensorFlow initialises its devices, so this comes first."""
    keras.utils.set_random_seed(self.seed)
    if self.cpu_replicas:
      strategy_lib.split_cpu(self.cpu_replicas)
    if self.dtype != "float32":
      keras.mixed_precision.set_global_policy(f"mixed_{self.dtype}")
    return strategy_lib.create_strategy(self.strategy, self.tpu)


_GROUP = "xlnet_tf.options_group"  # the field metadata naming a group's class


def group_field(group: type, **defaults):
  """A dataclass field holding options of class `group`, by default `group(**defaults)`."""
  return dataclasses.field(default_factory=functools.partial(group, **defaults),
                           metadata={_GROUP: group})


def _init_names(cls) -> list:
  return [field.name for field in dataclasses.fields(cls) if field.init]


def _groups(cls) -> list:
  return [field for field in dataclasses.fields(cls) if _GROUP in field.metadata]


@functools.lru_cache(maxsize=None)
def accepted_names(cls) -> FrozenSet[str]:
  """The names `cls`'s constructor takes: its fields and those of its groups (recursively)."""
  names = set(_init_names(cls))
  for field in _groups(cls):
    names |= accepted_names(field.metadata[_GROUP])
  return frozenset(names)


def accepts_group_fields(cls):
  """Class decorator (over @dataclass): the constructor, and so dataclasses.replace, also takes
  the fields of each group (group_field) by name, set on the group given or the field's
  default. A name that two of the fields (the class's own and its groups') take is a
  TypeError here: no name is routed to one of two fields."""
  init = cls.__init__
  own = _init_names(cls)
  taken = {name: cls.__name__ for name in own}
  for field in _groups(cls):
    for name in sorted(accepted_names(field.metadata[_GROUP])):
      if name in taken:
        raise TypeError(f"{cls.__name__}: {name!r} is a field of {taken[name]} and of "
                        f"{field.name}; its groups' fields cannot be taken by name")
      taken[name] = field.name

  @functools.wraps(init)
  def __init__(self, *args, **values):
    positional = own[:len(args)]
    twice = [name for name in positional if name in values]
    if len(args) > len(own) or twice:
      raise TypeError(f"{cls.__name__}() got {len(args)} positional arguments"
                      + (f" and {twice[0]!r} again by name" if twice else ""))
    values.update(zip(positional, args))
    for field in _groups(cls):
      given = {name: values.pop(name) for name in list(values)
               if name not in own and name in accepted_names(field.metadata[_GROUP])}
      if given:
        group = values[field.name] if field.name in values else field.default_factory()
        values[field.name] = dataclasses.replace(group, **given)
    init(self, **values)

  cls.__init__ = __init__
  return cls
