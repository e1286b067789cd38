"""flat_matmul equals the einsum it replaces (outputs and gradients), and its gradient graph
never writes out a tensor larger than its operands (the ellipsis einsum's did, and
made training 2.2x slower)."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.modeling.ops.flat_matmul import flat_matmul


@pytest.mark.parametrize("leading", [[3], [2, 5], [2, 3, 4]])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_equals_einsum_with_gradients(leading, transpose_kernel):
  rng = np.random.default_rng(0)
  inputs = tf.constant(rng.normal(size=leading + [6]), tf.float64)
  kernel = tf.Variable(rng.normal(size=[7, 6] if transpose_kernel else [6, 7]))
  equation = "...i,oi->...o" if transpose_kernel else "...i,io->...o"
  weights = tf.constant(rng.normal(size=leading + [7]))
  results = []
  for product in (lambda x, k: flat_matmul(x, k, transpose_kernel=transpose_kernel),
                  lambda x, k: tf.einsum(equation, x, k)):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      output = product(inputs, kernel)
      loss = tf.reduce_sum(output * weights)
    results.append([output, *tape.gradient(loss, [inputs, kernel])])
  assert results[0][0].shape == leading + [7]
  for ours, reference in zip(*results):
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-12, atol=1e-12)


def test_mixed_precision_casts_the_kernel_and_keeps_static_shape():
  kernel = tf.Variable(tf.ones([5, 4]))  # float32 variable, bfloat16 compute
  inputs = tf.ones([2, 3, 4], tf.bfloat16)

  @tf.function(input_signature=[tf.TensorSpec([None, 3, 4], tf.bfloat16)])
  def project(x):
    output = flat_matmul(x, kernel, transpose_kernel=True)
    assert output.shape.as_list() == [None, 3, 5]
    return output
  output = project(inputs)
  assert output.dtype == tf.bfloat16
  np.testing.assert_array_equal(tf.cast(output, tf.float32).numpy(), np.full([2, 3, 5], 4.0))


def test_gradient_graph_has_no_tensor_larger_than_operands():
  """The tied-projection shape in miniature: [B, P, D] x [V, D]. The ellipsis einsum's kernel
  gradient writes out [V, D, B, P]; ours must stay within max(operand, output) sizes."""
  batch, predictions, width, vocab = 4, 5, 8, 50
  inputs = tf.ones([batch, predictions, width])
  kernel = tf.Variable(tf.ones([vocab, width]))

  def largest_tensor(product):
    @tf.function
    def step(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(product(x) ** 2)
      return tape.gradient(loss, [x, kernel])
    graph = step.get_concrete_function(inputs).graph
    return max(output.shape.num_elements() or 0 for op in graph.get_operations()
               for output in op.outputs if output.shape.is_fully_defined())

  largest_operand = max(batch * predictions * vocab, vocab * width)
  assert largest_tensor(lambda x: flat_matmul(x, kernel, transpose_kernel=True)) \
      <= largest_operand
  # The invariant can fail: the einsum it replaces breaks it.
  assert largest_tensor(lambda x: tf.einsum("...d,vd->...v", x, kernel)) > largest_operand
