"""Position-wise feed-forward sublayer with XLNet's activations and post-LayerNorm.

Shapes: B batch, L length (T or P), D d_model, F d_inner.
"""

import math

import keras
import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.ops.bias_activation import fused_bias_activation_dropout
from xlnet_tf.modeling.ops.flat_matmul import flat_matmul
from xlnet_tf.modeling.ops.residual_layer_norm import fused_residual_layer_norm


def gelu_tanh(x):
  """The original XLNet/BERT gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

  The released checkpoints were trained with this approximation, not the erf form.
  """
  return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


def gelu_exact(x):
  return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


ACTIVATIONS = {"gelu": gelu_tanh, "gelu_exact": gelu_exact, "relu": tf.nn.relu}


@keras.saving.register_keras_serializable(package="xlnet_tf")
class PositionwiseFeedForward(keras.layers.Layer):
  """LayerNorm(x + dropout(layer_2(dropout(act(layer_1(x)))))), as the original's `ff` scope.

  [B, L, D] -> [B, L, D]. Weights: layer_1 (D -> F), layer_2 (F -> D), LayerNorm (eps 1e-12,
  computed in float32 under mixed policies). `fused=False` runs the Keras layers as written
  above; the default the compiled kernels of ops.bias_activation and ops.residual_layer_norm.
  """

  def __init__(self, d_inner: int, activation: str = "gelu", dropout: float = 0.0,
               init_std: float = 0.02, fused: bool = True, **kwargs):
    super().__init__(**kwargs)
    if activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; got {activation!r}")
    self.d_inner = d_inner
    self.activation = activation
    self.dropout = dropout
    self.init_std = init_std
    self.fused = fused
    initializer = keras.initializers.RandomNormal(stddev=init_std)
    self.inner_dense = keras.layers.Dense(d_inner, kernel_initializer=initializer,
                                          name="layer_1")
    self.output_dense = None  # built once d_model is known
    self.inner_dropout = FastDropout(dropout)
    self.output_dropout = FastDropout(dropout)
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=numerics.LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm")

  def build(self, input_shape):
    if isinstance(input_shape[0], (list, tuple)):  # called on a list of streams
      input_shape = input_shape[0]
    d_model = input_shape[-1]
    self.output_dense = keras.layers.Dense(
        d_model, kernel_initializer=keras.initializers.RandomNormal(stddev=self.init_std),
        name="layer_2")
    self.inner_dense.build((None, None, d_model))
    self.output_dense.build((None, None, self.d_inner))
    self.layer_norm.build((None, None, d_model))
    self.built = True

  def call(self, inputs, training=False):
    """[B, L, D] -> [B, L, D]; or a list of such streams -> a list, sharing one read of the
    weights (one cast to the compute dtype; their gradient is summed in it and cast back once)."""
    streams = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not self.fused:
      outputs = [self._plain(stream, training) for stream in streams]
      return outputs if isinstance(inputs, (list, tuple)) else outputs[0]
    inner_kernel, output_kernel = self.inner_dense.kernel.value, self.output_dense.kernel.value
    inner_bias, output_bias = self.inner_dense.bias.value, self.output_dense.bias.value
    gamma, beta = self.layer_norm.gamma.value, self.layer_norm.beta.value
    outputs = []
    for stream in streams:
      hidden = flat_matmul(stream, inner_kernel)  # [B, L, F]
      hidden = fused_bias_activation_dropout(
          hidden, inner_bias, activation=ACTIVATIONS[self.activation],
          **self.inner_dropout.fused_arguments(training))
      hidden = flat_matmul(hidden, output_kernel)  # [B, L, D]
      outputs.append(fused_residual_layer_norm(
          hidden, stream, gamma, beta, output_bias, epsilon=self.layer_norm.epsilon,
          keep_for_gradient=bool(training), **self.output_dropout.fused_arguments(training)))
    return outputs if isinstance(inputs, (list, tuple)) else outputs[0]

  def _plain(self, stream, training):
    hidden = self.inner_dense(stream)  # [B, L, F]
    hidden = tf.cast(ACTIVATIONS[self.activation](tf.cast(hidden, tf.float32)), hidden.dtype)
    hidden = self.output_dense(self.inner_dropout(hidden, training=training))  # [B, L, D]
    hidden = self.output_dropout(hidden, training=training)
    normalized = self.layer_norm(tf.cast(hidden, tf.float32) + tf.cast(stream, tf.float32))
    return tf.cast(normalized, stream.dtype)

  def get_config(self):
    return {**super().get_config(), "d_inner": self.d_inner, "activation": self.activation,
            "dropout": self.dropout, "init_std": self.init_std, "fused": self.fused}
