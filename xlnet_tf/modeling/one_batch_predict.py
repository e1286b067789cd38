"""Keras' `predict` on one batch already in memory, without building a tf.data pipeline.

At every call Keras' `predict` wraps its inputs in a tf.data pipeline and makes an iterator
over it before it runs the model's predict function on each batch: 60-120 ms a call on a
2-core CPU, a quarter to a half of a base int8 forward at 4x128 (docs/performance.md, "The
paths a user takes after quantize"). A server or a notebook calling `model.predict(batch)` on
one batch pays it at every call. `OneBatchPredict.predict` hands such a batch to the same
predict function directly, with the same callbacks and progress bar, and returns the same
arrays; the function is traced for any batch size, so calls of other sizes, and Keras' loop
after them, run the same trace.

One batch in memory: a NumPy array or a dense tf.Tensor, or a dict of them, whose rows (the
same number in each) fit in `batch_size` (Keras' default 32). Float arrays are cast to Keras'
floatx first, as Keras' array adapter does. Anything else (datasets, generators, lists or
tuples of inputs, several batches, `steps`, a distribution strategy, steps_per_execution > 1,
run_eagerly) goes through Keras' own loop.
"""

import keras
import numpy as np
import tensorflow as tf

KERAS_BATCH_SIZE = 32  # Keras' predict's default batch_size


def one_batch(x, batch_size):
  """x as a dict (or single tensor) of tf.Tensors when it is one batch in memory of at most
  `batch_size` rows (the module docstring), else None."""
  leaves = list(x.values()) if isinstance(x, dict) else [x]
  if not leaves or not all(isinstance(leaf, (np.ndarray, tf.Tensor)) for leaf in leaves):
    return None
  if any(isinstance(leaf, tf.Tensor) and not leaf.shape.is_fully_defined() for leaf in leaves):
    return None  # symbolic: not a batch in memory
  rows = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
  if len(rows) != 1 or None in rows or not 0 < rows.pop() <= (batch_size or KERAS_BATCH_SIZE):
    return None

  def tensor(leaf):
    leaf = tf.convert_to_tensor(leaf)
    if leaf.dtype.is_floating and leaf.dtype != keras.backend.floatx():
      leaf = tf.cast(leaf, keras.backend.floatx())
    return leaf
  return {name: tensor(leaf) for name, leaf in x.items()} if isinstance(x, dict) else tensor(x)


class OneBatchPredict:
  """For a Keras model on TensorFlow: `predict` on one batch in memory skips the tf.data
  pipeline (the module docstring)."""

  def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
    """Keras' predict; one batch in memory goes to the predict function directly.

    Args:
      x: what Keras' predict takes.
      batch_size: Keras' argument (default 32).
      verbose: Keras' argument ("auto", 0, 1 or 2).
      steps: Keras' argument (given: Keras' own loop).
      callbacks: Keras' argument.

    Returns:
      What Keras' predict returns: the outputs as NumPy arrays, in the model's structure.
    """
    batch = None
    if (steps is None and not self.run_eagerly and self.steps_per_execution == 1
        and not tf.distribute.has_strategy()
        and self.distribute_strategy is tf.distribute.get_strategy()):
      batch = one_batch(x, batch_size)
    if batch is None:
      return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                             callbacks=callbacks)
    if not isinstance(callbacks, keras.callbacks.CallbackList):
      callbacks = keras.callbacks.CallbackList(callbacks, add_progbar=verbose != 0,
                                               verbose=verbose, epochs=1, steps=1, model=self)
    self.make_predict_function()
    function = self.predict_function
    # Keras' loop hands the function a list of one batch each step, its batch size the
    # batch's (a retrace, relaxed to any size, at the first other size); here it is traced for
    # any batch size at once, a trace Keras' loop then runs too.
    function.get_concrete_function([keras.tree.map_structure(
        lambda tensor: tf.TensorSpec([None] + tensor.shape[1:], tensor.dtype), batch)])
    self.stop_predicting = False
    callbacks.on_predict_begin()
    callbacks.on_predict_batch_begin(0)
    outputs = function([batch])
    callbacks.on_predict_batch_end(0, {"outputs": outputs})
    callbacks.on_predict_end()
    return keras.tree.map_structure(lambda tensor: np.asarray(tensor), outputs)
