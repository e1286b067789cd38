"""What `quantize(mode)` accepts, and the int8 storage of attention kernels [D, N, H].

XLNetModel.quantize("int8") and the heads' quantize (Keras' `Model.quantize` API) store every
projection of the blocks and heads in int8 (ops.int8_packing, ops.int8_products): the attention's
q, k, v, r and o kernels (`Int8HeadKernels` below), the feed-forward's and the heads' Dense layers
(stored as Keras' int8 Dense). Embeddings, biases, LayerNorms, the relative-attention biases
and segment embeddings stay float. Other modes are refused by `check_request` before anything
changes; so is a model or layer already quantized.
"""

import contextlib
import gc

import keras

from xlnet_tf.modeling.layers.projections import FloatHeadProjection, Int8HeadProjection
from xlnet_tf.modeling.ops.int8_packing import quantize_kernel

SUPPORTED_MODES = ("int8",)


def _is_default_int8_config(config) -> bool:
  """No config, or Keras' Int8QuantizationConfig() as quantize("int8") resolves it: the
  default, which these layers compute their own way (ops.int8_products). Any custom
  weight or activation quantizer is refused rather than ignored."""
  if config is None:
    return True
  quantizers = keras.quantizers
  activation = getattr(config, "activation_quantizer", None)
  return (type(config) is quantizers.Int8QuantizationConfig
          and config.weight_quantizer is None
          and type(activation) is quantizers.AbsMaxQuantizer
          and activation.axis in (None, (-1,))
          and tuple(activation.value_range) == (-127, 127))


def check_request(owner, mode, config=None, filters=None, quantized_mode=None) -> None:
  """Raises before anything changes unless `owner` (a layer or model) can be quantized as
  asked: NotImplementedError for a mode or config these layers do not implement, ValueError
  when `owner` is already quantized (`quantized_mode`) or for `filters`."""
  name = f"{type(owner).__name__} '{owner.name}'"
  if mode not in SUPPORTED_MODES:
    raise NotImplementedError(
        f"{name}: quantize(mode={mode!r}) is not supported; supported: "
        f"{', '.join(SUPPORTED_MODES)} (int8 weights per output channel, int8 activations per "
        "token). Nothing was changed")
  if not _is_default_int8_config(config):
    raise NotImplementedError(
        f"{name}: quantize(mode={mode!r}) takes no custom quantization config (got "
        f"{type(config).__name__}); these layers compute per-channel int8 weights and per-row "
        "int8 activations only. Nothing was changed")
  if filters is not None:
    raise ValueError(f"{name}: quantize(filters=...) is not supported; every projection of "
                     "the model is quantized. Nothing was changed")
  if quantized_mode is not None:
    raise ValueError(f"{name} is already quantized ({quantized_mode}); quantize a float "
                     "model. Nothing was changed")


@contextlib.contextmanager
def one_garbage_collection():
  """gc.collect() once, at the end, instead of at every Keras Dense.quantize: Keras' Layer
  deletes the float kernel with a collection each time, 0.3 s with TensorFlow loaded (7 of the
  8 s a base model took to quantize)."""
  collect = gc.collect
  gc.collect = lambda generation=2: 0
  try:
    yield
  finally:
    gc.collect = collect
    collect()


def set_quantized_policy(layer, mode) -> None:
  """The layer's dtype policy becomes Keras' `{mode}_from_{policy}`: its `quantization_mode`,
  and Layer.__call__ then runs `_int8_call`."""
  layer._is_quantized = True  # before the policy: its setter would quantize again
  layer.dtype_policy = keras.dtype_policies.get(f"{mode}_from_{layer.dtype_policy.name}")


class Int8HeadKernels:
  """For a Keras layer with kernels [D, N, H] held in attributes (`HEAD_KERNELS`: {short
  name: (attribute, reduces_heads)}; reduces_heads: an output projection [.., N, H] -> [.., D]):
  Keras' quantization hooks for int8.

  `quantize("int8")` replaces each float kernel by an int8 variable of the same shape and name
  (values in -127..127) and a float32 scale per output channel (`{name}_scale`: [N, H], or [D]
  for an output projection), and sets the layer's dtype policy to int8; the float attributes
  are then gone, so nothing reads a quantized kernel as float. `head_projection(name)` gives
  what the layer multiplies by: a layers.projections.FloatHeadProjection, or once quantized an
  Int8HeadProjection (its class chosen by `_int8_build`, the one place that stores int8 kernels).
  """

  HEAD_KERNELS = {}
  _head_projection_type = FloatHeadProjection  # Int8HeadProjection once the kernels are int8

  def quantize(self, mode=None, type_check=True, config=None):
    check_request(self, mode, config, quantized_mode=self.quantization_mode)
    quantized = {}
    for name, (attribute, reduces_heads) in self.HEAD_KERNELS.items():
      kernel = getattr(self, attribute).numpy()
      quantized[name] = quantize_kernel(kernel, axis=(1, 2) if reduces_heads else 0)
    shapes = {name: values.shape for name, (values, _) in quantized.items()}
    self.quantized_build(shapes, mode, config)
    for name, (values, scale) in quantized.items():
      self.int8_kernels[name].assign(values)
      self.int8_scales[name].assign(scale)
    set_quantized_policy(self, mode)

  def quantized_build(self, kernel_shapes, mode, config=None):
    if mode != "int8":
      raise self._quantization_mode_error(mode)
    self._int8_build(kernel_shapes)

  def _int8_build(self, kernel_shapes):
    """Replaces the float kernels by int8 ones and their scales (zeros and ones until
    `quantize` assigns them)."""
    kernels, scales = {}, {}
    for name, (attribute, reduces_heads) in self.HEAD_KERNELS.items():
      if hasattr(self, attribute):
        self._untrack_variable(getattr(self, attribute))
        object.__delattr__(self, attribute)  # Layer.__delattr__ would gc.collect() each time
      shape = tuple(kernel_shapes[name])
      kernels[name] = self.add_weight(name=name, shape=shape, initializer="zeros",
                                      dtype="int8", trainable=False)
      scale_shape = shape[:1] if reduces_heads else shape[1:]
      scales[name] = self.add_weight(name=f"{name}_scale", shape=scale_shape,
                                     initializer="ones", dtype="float32", trainable=False,
                                     autocast=False)  # float32 under mixed precision too
    self.int8_kernels, self.int8_scales = kernels, scales
    self._head_projection_type = Int8HeadProjection

  def build_quantized_kernels(self, kernel_shape):
    """For `build`: a layer made with an int8 dtype policy (from a quantized layer's config)
    replaces its new float kernels [D, N, H] by int8 ones, which its weights then load into."""
    if self.quantization_mode == "int8" and not getattr(self, "_is_quantized", False):
      self._int8_build({name: kernel_shape for name in self.HEAD_KERNELS})
      self._is_quantized = True
    elif self.quantization_mode not in (None, "int8"):
      raise self._quantization_mode_error(self.quantization_mode)

  def _int8_call(self, *args, **kwargs):
    return self.call(*args, **kwargs)  # the projections are head_projection(...)

  def __getattr__(self, name):
    """Only for attributes not found: a quantized layer's float kernel, asked for by name (the
    checkpoint formats' variable maps), is refused with the reason."""
    if (name in {attribute for attribute, _ in type(self).HEAD_KERNELS.values()}
        and self.__dict__.get("_is_quantized")):
      raise AttributeError(
          f"{type(self).__name__} '{self.name}' is quantized (int8): its float kernel {name} "
          "is gone (int8_kernels and int8_scales hold it). Checkpoints and conversions take "
          "float models: load or convert the float model, and quantize after")
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

  def head_projection(self, name, value=False):
    """The projection through kernel `name` (layers.projections): the float variable (its
    `.value` with `value`: read now, once for every use), or once quantized the int8 one."""
    return self._head_projection_type.of_layer(self, name, value)
