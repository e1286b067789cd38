"""Position-wise feed-forward sublayer with XLNet's activations and post-LayerNorm.

Shapes: B batch, L length (T or P), D d_model, F d_inner.
"""

import math

import keras
import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.modeling.layers import quantization
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.layers.projections import AfterProduct, dense_projection
from xlnet_tf.modeling.ops.bias_activation import (bias_activation_dropout,
                                                   fused_bias_activation_dropout)
from xlnet_tf.modeling.ops.int8_epilogues import Epilogue
from xlnet_tf.modeling.ops.residual_layer_norm import (fused_residual_layer_norm,
                                                       residual_layer_norm)


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

  The products with layer_1's and layer_2's kernels go through layers.projections
  (`dense_projection`): `quantize("int8")` (Keras' API) quantizes layer_1 and layer_2 as
  Keras' int8 Dense (kernel int8 with a scale per output unit, bias float); both paths then
  multiply them in int8 (ops.int8_products).
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
    if self.quantization_mode is not None:  # made from a quantized layer's config
      self._quantize_dense_layers(self.quantization_mode, None)
    self.layer_norm.build((None, None, d_model))
    self.built = True

  def call(self, inputs, training=False):
    """[B, L, D] -> [B, L, D]; or a list of such streams -> a list, sharing one read of the
    weights (one cast to the compute dtype; their gradient is summed in it and cast back once)."""
    streams = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not self.fused:
      outputs = [self._plain(stream, training) for stream in streams]
      return outputs if isinstance(inputs, (list, tuple)) else outputs[0]
    inner = dense_projection(self.inner_dense, self).read()  # [B, L, D] -> [B, L, F]
    output = dense_projection(self.output_dense, self).read()  # [B, L, F] -> [B, L, D]
    inner_bias, output_bias = self.inner_dense.bias.value, self.output_dense.bias.value
    gamma, beta = self.layer_norm.gamma.value, self.layer_norm.beta.value
    outputs = []
    for stream in streams:
      outputs.append(inner.two_products(stream, output, *self._after_products(
          stream, inner_bias, output_bias, gamma, beta, training)))
    return outputs if isinstance(inputs, (list, tuple)) else outputs[0]

  def _after_products(self, stream, inner_bias, output_bias, gamma, beta, training):
    """What follows the two products on `stream`: bias, activation and dropout
    (ops.bias_activation); dropout, bias, residual and LayerNorm (ops.residual_layer_norm).
    In inference, also as epilogues, which an int8 product runs in its dequantization
    region."""
    activation, epsilon = ACTIVATIONS[self.activation], self.layer_norm.epsilon

    def activate(hidden):
      return fused_bias_activation_dropout(hidden, inner_bias, activation=activation,
                                           **self.inner_dropout.fused_arguments(training))

    def layer_norm(hidden):
      return fused_residual_layer_norm(
          hidden, stream, gamma, beta, output_bias, epsilon=epsilon,
          keep_for_gradient=bool(training), **self.output_dropout.fused_arguments(training))
    if training:
      return AfterProduct(activate), AfterProduct(layer_norm)

    def activation_epilogue():
      return Epilogue(bias_activation_dropout, (inner_bias,), (("activation", activation),))

    def layer_norm_epilogue():
      residual = tf.reshape(stream, [-1, stream.shape[-1]])  # rows, as the epilogue reads them
      return Epilogue(residual_layer_norm, (residual, gamma, beta, output_bias),
                      (("epsilon", epsilon),))
    return (AfterProduct(activate, activation_epilogue),
            AfterProduct(layer_norm, layer_norm_epilogue))

  def quantize(self, mode=None, type_check=True, config=None):
    """Keras' hook: layer_1 and layer_2 become Keras int8 Dense layers (quantization.py)."""
    layers = (self, self.inner_dense, self.output_dense)
    already = [layer.quantization_mode for layer in layers if layer.quantization_mode]
    quantization.check_request(self, mode, config, quantized_mode=(already or [None])[0])
    self._quantize_dense_layers(mode, config)
    quantization.set_quantized_policy(self, mode)

  def _quantize_dense_layers(self, mode, config):
    quantization.check_request(self, mode, config)
    for dense in (self.inner_dense, self.output_dense):
      dense.quantize(mode, config=config)

  def _int8_call(self, inputs, training=False):
    return self.call(inputs, training=training)  # dense_projection: the int8 Dense layers

  def _plain(self, stream, training):
    hidden = dense_projection(self.inner_dense, self).layer(stream)  # [B, L, F]
    hidden = tf.cast(ACTIVATIONS[self.activation](tf.cast(hidden, tf.float32)), hidden.dtype)
    hidden = dense_projection(self.output_dense, self).layer(
        self.inner_dropout(hidden, training=training))
    hidden = self.output_dropout(hidden, training=training)
    normalized = self.layer_norm(tf.cast(hidden, tf.float32) + tf.cast(stream, tf.float32))
    return tf.cast(normalized, stream.dtype)

  def get_config(self):
    return {**super().get_config(), "d_inner": self.d_inner, "activation": self.activation,
            "dropout": self.dropout, "init_std": self.init_std, "fused": self.fused}
