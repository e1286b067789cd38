"""Dimensions as the trace knows them.

A trace for any batch size (Keras' predict, a SavedModel's signature [None, T]) knows every
dimension but the batch. Computations from known sizes stay constants of the graph, which its
optimizer folds: T's position encoding (and with int8 constant weights its keys) is computed
once, and a reshape whose only unknown dimension is -1 takes a constant shape instead of
Shape, StridedSlice and ConcatV2 ops at every call (a base int8 forward of 4x128 traced for
any batch size: 60 oneDNN products and ~200 shape ops more than the same trace of a fixed
batch, 6.8% slower; 2.3% with the lengths known, docs/performance.md).
"""

import tensorflow as tf


def static_or_dynamic_dim(tensor, axis: int):
  """tensor's size along `axis`: a Python int where the trace knows it, else a scalar tensor."""
  size = tensor.shape[axis]
  return size if size is not None else tf.shape(tensor)[axis]


def reshape_target(tensor, axes, trailing=()):
  """A shape for tf.reshape: tensor's sizes along `axes`, then `trailing` (ints).

  A list of ints when at most one of those sizes is unknown (-1 there), else a tensor.
  """
  if None in trailing:
    raise ValueError(f"reshape_target: trailing sizes must be known; got {list(trailing)}")
  sizes = [tensor.shape[axis] for axis in axes]
  if sizes.count(None) <= 1:
    return [-1 if size is None else size for size in sizes] + list(trailing)
  return tf.concat([tf.stack([tf.shape(tensor)[axis] for axis in axes]), list(trailing)], 0)


def rows_target(tensor, width: int):
  """A shape for tf.reshape: tensor's sizes but the last, then `width` ([..., In] ->
  [..., width]), as reshape_target."""
  if tensor.shape.rank is None:
    return tf.concat([tf.shape(tensor)[:-1], [width]], 0)
  return reshape_target(tensor, range(tensor.shape.rank - 1), [width])
