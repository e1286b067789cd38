"""The recurrence memory (Transformer-XL's `mems`): what it holds, how it is made and kept.

Each layer's memory is that layer's input states from the segments read before, [B, M, D] per
layer. After a segment, `next_memory` gives what the next segment sees at a layer: the first
reuse_len of the segment's states (all of them when 0) appended to the old memory, the last
mem_len positions kept, the gradient stopped there, as the original's `_cache_mem`. The
backbone applies it at every layer and returns the result as `new_mems`.

`RecurrenceMemory` owns a memory between segments: it creates it (zeros for a batch, per
layer), keeps what a step returns (`update`), starts over (`reset`), and, under a
tf.distribute strategy, holds one memory per replica (each replica always reads the same rows
of the data's stream) and hands a worker's rows to a checkpoint and back. Its state is tensors
passed in and out of a traced step (pretraining, LM evaluation), or a variable that a traced
step reads and assigns (Model.fit). Cached decoding keeps the memory in its projected form,
each layer's attention keys and values (`zero_keys_values`; inference.key_value_cache writes
it in place).

Shapes: B batch (per replica), M memory length, D d_model, L layers, N heads, H head size.
"""

from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf


def next_memory(layer_input, memory, reuse_len: int, mem_len: int):
  """The memory the next segment sees at one layer: [B, min(M + reuse, mem_len), ...].

  Args:
    layer_input: the layer's input states of this segment [B, T, ...] (or its mask [B, T]).
    memory: the layer's memory the segment saw [B, M, ...], or None.
    reuse_len: the first reuse_len positions of the segment enter the memory (all when 0).
    mem_len: the positions kept, the newest.

  Returns:
    The new memory, in layer_input's dtype, its gradient stopped.
  """
  current = layer_input[:, :reuse_len] if reuse_len > 0 else layer_input
  if memory is not None:
    current = tf.concat([tf.cast(memory, current.dtype), current], axis=1)
  return tf.stop_gradient(current[:, -mem_len:])


class RecurrenceMemory:
  """The memory of a model with `config` over batches of `batch_size` rows (module docstring).

  `state` is the memory now: a tuple of L tensors [B, M, D] (per replica under `strategy`), ()
  for a model without memory (mem_len 0); a list read from the variable after `keep_in`.

  Args:
    config: the model's XLNetConfig (n_layer, d_model, mem_len; n_head, d_head for
      zero_keys_values).
    batch_size: rows per replica (a scalar tensor too, for zero_keys_values in a traced call).
    dtype: the model's compute dtype.
    start_length: positions of a new memory: None for mem_len (zeros that the first segment
      attends to, as the original's pretraining), 0 for none (LM evaluation: the memory grows
      to mem_len over the first segments).
    strategy: a tf.distribute.Strategy whose replicas each hold their own memory, or None.
    local_replicas: the replicas of this worker under `strategy` (whose rows its checkpoint
      files hold).
  """

  def __init__(self, config, batch_size, dtype="float32", *, start_length: Optional[int] = None,
               strategy: Optional[tf.distribute.Strategy] = None, local_replicas: int = 1):
    self.config, self.batch_size, self.dtype = config, batch_size, dtype
    self.start_length = config.mem_len if start_length is None else start_length
    self.strategy, self.local_replicas = strategy, local_replicas
    self.variable = None
    self._state = None  # zeros(), made when first read

  @property
  def enabled(self) -> bool:
    """Whether the model keeps a memory (mem_len > 0)."""
    return self.config.mem_len > 0

  @property
  def stacked_shape(self):
    """The shape of the memory stacked over layers, [L, B, mem_len, D] (`keep_in`)."""
    config = self.config
    return (config.n_layer, self.batch_size, config.mem_len, config.d_model)

  def _layer_zeros(self):
    config = self.config
    return tuple(tf.zeros([self.batch_size, self.start_length, config.d_model], self.dtype)
                 for _ in range(config.n_layer))

  def zeros(self):
    """A new memory, start_length positions of zeros per layer (per replica under the strategy).

    Returns:
      A tuple of L tensors [B, start_length, D] (distributed values under the strategy), or ()
      without memory.
    """
    if not self.enabled:
      return ()
    if self.strategy is None:
      return self._layer_zeros()
    return self.strategy.experimental_distribute_values_from_function(
        lambda _: self._layer_zeros())

  def signature(self):
    """The specs of a state of any length: a traced step's input_signature for it.

    Returns:
      A tuple of L tf.TensorSpec [B, None, D], or () without memory.
    """
    if not self.enabled:
      return ()
    return tuple(tf.TensorSpec([self.batch_size, None, self.config.d_model], self.dtype)
                 for _ in range(self.config.n_layer))

  @property
  def state(self):
    """The memory now: what a step feeds the backbone as its input `mems`."""
    if self.variable is not None:
      return tf.unstack(tf.cast(self.variable, self.dtype))
    if self._state is None:
      self._state = self.zeros()
    return self._state

  def update(self, new_mems) -> None:
    """Keeps `new_mems`, what a step returned (the backbone's new_mems, per replica under the
    strategy), as the memory the next segment sees.

    Args:
      new_mems: L tensors [B, M', D] (next_memory's, already kept to mem_len), in the
        structure a traced step returned them (kept as given, so the next call reuses its
        trace).
    """
    if self.variable is not None:
      self.variable.assign(tf.cast(tf.stack(new_mems), self.variable.dtype))
    else:
      self._state = new_mems

  def reset(self) -> None:
    """Starts over: the memory becomes `zeros()` (the variable assigned zeros)."""
    if self.variable is not None:
      self.variable.assign(tf.zeros_like(self.variable))
    else:
      self._state = self.zeros()

  def keep_in(self, variable: tf.Variable) -> None:
    """Keeps the state in `variable` from now on, [L, B, mem_len, D] (stacked_shape): a traced
    step reads it (`state`) and assigns it (`update`), as Model.fit's train_step does.

    Args:
      variable: a non-trainable variable of stacked_shape, holding the memory (zeros when new).
    """
    if tuple(variable.shape) != tuple(self.stacked_shape):
      raise ValueError(f"RecurrenceMemory: a variable of shape {list(self.stacked_shape)} "
                       f"holds the memory; got {variable.shape.as_list()}")
    self.variable = variable

  # ---- a worker's rows, for its checkpoint files ------------------------------------------
  def local_rows(self) -> List[np.ndarray]:
    """This worker's memory as NumPy: each layer's rows of its replicas, in replica order.

    Returns:
      L float32 arrays [local_replicas * B, M, D] ([] without memory).
    """
    if not self.enabled:
      return []
    if self.strategy is None:
      return [np.asarray(layer, np.float32) for layer in self.state]
    return [np.concatenate([np.asarray(replica, np.float32)
                            for replica in self.strategy.experimental_local_results(layer)])
            for layer in self.state]

  def load_rows(self, layers: Sequence[np.ndarray]) -> None:
    """Makes the memory `layers`, what `local_rows` gave: each replica takes its rows.

    Args:
      layers: L arrays [local_replicas * B, M, D].
    """
    if len(layers) != self.config.n_layer:
      raise ValueError(f"RecurrenceMemory: {self.config.n_layer} layers of memory; got "
                       f"{len(layers)}")

    def replica_rows(replica: int):
      start = replica % self.local_replicas * self.batch_size
      return tuple(tf.constant(layer[start:start + self.batch_size], self.dtype)
                   for layer in layers)

    if self.strategy is None:
      rows = replica_rows(0)
    else:
      rows = self.strategy.experimental_distribute_values_from_function(
          lambda context: replica_rows(context.replica_id_in_sync_group))
    self.update(rows)

  # ---- the projected form (cached decoding) -----------------------------------------------
  def zero_keys_values(self, length):
    """The memory as each layer's attention reads it, `length` zero slots: what a key/value
    cache starts from (XLNetModel's memory_keys_values).

    Args:
      length: slots per layer (an int, or a scalar tensor in a traced call).

    Returns:
      A list of L (keys, values), each [B, N, length, H] of zeros (one tensor shared: tensors
      are not written in place).
    """
    config = self.config
    shape = [self.batch_size, config.n_head, length, config.d_head]
    if any(isinstance(size, tf.Tensor) for size in shape):
      shape = tf.stack(shape)
    zeros = tf.zeros(shape, self.dtype)
    return [(zeros, zeros)] * config.n_layer
