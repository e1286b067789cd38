"""Position-wise feed-forward sublayer with XLNet's activations and post-LayerNorm.

Shapes: B batch, L length (T or P), D d_model, F d_inner.
"""

import math
from typing import Any, NamedTuple

import keras
import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.modeling.layers import quantization
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.ops.bias_activation import (bias_activation_dropout,
                                                   fused_bias_activation_dropout)
from xlnet_tf.modeling.ops.flat_matmul import flat_matmul
from xlnet_tf.modeling.ops.quantized_matmul import Epilogue, int8_matmul, int8_two_products
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


class _Int8Dense(NamedTuple):
  """An int8 Dense layer's kernel [In, Out] and its scale per output channel [Out]."""
  kernel: Any
  scale: Any


def _product(inputs, kernel):
  """[..., In] x kernel: a float kernel [In, Out] (flat_matmul) or an _Int8Dense (int8)."""
  if isinstance(kernel, _Int8Dense):
    return int8_matmul(inputs, kernel.kernel, kernel.scale)
  return flat_matmul(inputs, kernel)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class PositionwiseFeedForward(keras.layers.Layer):
  """LayerNorm(x + dropout(layer_2(dropout(act(layer_1(x)))))), as the original's `ff` scope.

  [B, L, D] -> [B, L, D]. Weights: layer_1 (D -> F), layer_2 (F -> D), LayerNorm (eps 1e-12,
  computed in float32 under mixed policies). `fused=False` runs the Keras layers as written
  above; the default the compiled kernels of ops.bias_activation and ops.residual_layer_norm.

  `quantize("int8")` (Keras' API) quantizes layer_1 and layer_2 as Keras' int8 Dense (kernel
  int8 with a scale per output unit, bias float); both paths then multiply them in int8
  (ops.quantized_matmul).
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
    inner_kernel, output_kernel = self._kernel(self.inner_dense), self._kernel(self.output_dense)
    inner_bias, output_bias = self.inner_dense.bias.value, self.output_dense.bias.value
    gamma, beta = self.layer_norm.gamma.value, self.layer_norm.beta.value
    outputs = []
    for stream in streams:
      if isinstance(inner_kernel, _Int8Dense) and not training:
        outputs.append(self._int8_inference(stream, inner_kernel, output_kernel))
        continue
      hidden = _product(stream, inner_kernel)  # [B, L, F]
      hidden = fused_bias_activation_dropout(
          hidden, inner_bias, activation=ACTIVATIONS[self.activation],
          **self.inner_dropout.fused_arguments(training))
      hidden = _product(hidden, output_kernel)  # [B, L, D]
      outputs.append(fused_residual_layer_norm(
          hidden, stream, gamma, beta, output_bias, epsilon=self.layer_norm.epsilon,
          keep_for_gradient=bool(training), **self.output_dropout.fused_arguments(training)))
    return outputs if isinstance(inputs, (list, tuple)) else outputs[0]

  def _int8_inference(self, stream, inner_kernel, output_kernel):
    """The fused path of an int8 layer without dropout: each product's dequantization region
    also runs what follows it (ops.quantized_matmul.Epilogue)."""
    activation = Epilogue(bias_activation_dropout, (self.inner_dense.bias.value,),
                          (("activation", ACTIVATIONS[self.activation]),))
    residual = tf.reshape(stream, [-1, stream.shape[-1]])  # rows, as the epilogue reads them
    layer_norm = Epilogue(
        residual_layer_norm, (residual, self.layer_norm.gamma.value, self.layer_norm.beta.value,
                              self.output_dense.bias.value),
        (("epsilon", self.layer_norm.epsilon),))
    return int8_two_products(stream, (*inner_kernel, activation),
                             (*output_kernel, layer_norm))

  def _kernel(self, dense):
    """What the fused path multiplies by: the Dense layer's float kernel, read once; once it
    is quantized in int8 (by `quantize`, or by a Model.quantize walking the layers), its
    _Int8Dense. Modes this path does not compute raise rather than read a kernel wrongly."""
    mode = dense.quantization_mode
    if mode is None:
      return dense.kernel.value
    if mode != "int8" or getattr(dense, "lora_enabled", False):
      raise NotImplementedError(
          f"{type(self).__name__} '{self.name}': its Dense '{dense.name}' is quantized as "
          f"{mode!r}{' with LoRA' if mode == 'int8' else ''}; this layer computes float or "
          "int8 (XLNetModel.quantize('int8'))")
    return _Int8Dense(dense.kernel, dense.kernel_scale)  # variables: int8_matmul reads them

  def _dense(self, dense, inputs):
    """The plain path's Dense layer: called, or when quantized the fused path's int8 product
    (the zero point of ops.quantized_matmul, which Keras' int8 Dense does not have) + bias."""
    if dense.quantization_mode is None:
      return dense(inputs)
    return _product(inputs, self._kernel(dense)) + tf.cast(dense.bias, inputs.dtype)

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
    return self.call(inputs, training=training)  # _kernel reads the int8 Dense layers

  def _plain(self, stream, training):
    hidden = self._dense(self.inner_dense, stream)  # [B, L, F]
    hidden = tf.cast(ACTIVATIONS[self.activation](tf.cast(hidden, tf.float32)), hidden.dtype)
    hidden = self._dense(self.output_dense, self.inner_dropout(hidden, training=training))
    hidden = self.output_dropout(hidden, training=training)
    normalized = self.layer_norm(tf.cast(hidden, tf.float32) + tf.cast(stream, tf.float32))
    return tf.cast(normalized, stream.dtype)

  def get_config(self):
    return {**super().get_config(), "d_inner": self.d_inner, "activation": self.activation,
            "dropout": self.dropout, "init_std": self.init_std, "fused": self.fused}
