"""XLNetModel.quantize (Keras' Model.quantize): int8 outputs close to float, every projection in
int8, the float path unchanged, other modes refused before anything changes, .keras files.

The tiny models here are initialized with a larger init_std than the preset's 0.02, so that
each sublayer's output is as large as the residual it is added to: with 0.02 at d_model 32
the blocks barely change their input and any quantization would look exact.
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from checkpoint_files import convert_checkpoint
from layer_checks import assert_config_round_trip, assert_keras_file_round_trip
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import XLNetModel
from xlnet_tf import checkpoints
from xlnet_tf.checkpoints import naming
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.modeling.layers.attention import RelativeMultiHeadAttention
from xlnet_tf.modeling.layers.feed_forward import PositionwiseFeedForward
from xlnet_tf.modeling.ops import int8_packing, int8_products
from xlnet_tf.modeling.ops.compile import without_xla
from xlnet_tf.modeling.ops.int8_epilogues import Epilogue
from xlnet_tf.modeling.ops.int8_packing import (Int8Kernel, constant_int8_weights,
                                                onednn_available, quantize_kernel)
from xlnet_tf.modeling.ops.int8_products import (int8_matmul, int8_projection, int8_projections,
                                                 int8_two_products)
from xlnet_tf.utils import cpu_features
from xlnet_tf.utils.relative_error import relative_error

LENGTH, N_TOKEN = 12, 50
TOLERANCE = 0.02  # relative error (Frobenius norm) of an int8 output against float


def make_model(fused=True, **overrides):
  keras.utils.set_random_seed(0)
  return XLNetModel(tiny_config(n_token=N_TOKEN, init_std=0.15, **overrides), fused=fused)


def two_stream_inputs():
  """Three left-padded A <sep> B <sep> <cls> rows (padding, three segment ids) with a
  factorization order's perm_mask and three targets each."""
  inputs = padded_pair_batch(np.random.default_rng(3), 3, LENGTH, N_TOKEN, pad_lengths=[0, 3, 5])
  perm_mask = np.zeros([3, LENGTH, LENGTH], np.float32)
  target_mapping = np.zeros([3, 3, LENGTH], np.float32)
  for row, targets in enumerate(([2, 6, 9], [4, 7, 10], [6, 8, 9])):
    perm_mask[row, :, targets] = 1.0
    for rank, position in enumerate(targets):
      perm_mask[row, position, targets[:rank]] = 0.0
      target_mapping[row, rank, position] = 1.0
  return dict(inputs, perm_mask=perm_mask, target_mapping=target_mapping)


def outputs_of(model, inputs):
  outputs = model(inputs, training=False)
  return {name: outputs[name].numpy() for name in ("sequence_output", "query_output")}


@pytest.fixture(scope="module")
def quantized():
  """(float outputs, the int8 model, its outputs) of one tiny model."""
  inputs = two_stream_inputs()
  model = make_model(mem_len=4)
  expected = outputs_of(model, inputs)
  model.quantize("int8")
  return inputs, expected, model, outputs_of(model, inputs)


def test_int8_outputs_are_close_to_float(quantized):
  inputs, expected, model, got = quantized
  assert model.quantization == "int8"
  for name in expected:
    error = relative_error(expected[name], got[name])
    assert 1e-4 < error < TOLERANCE, (name, error)  # quantized, and close
  # Under XLA (how float32 runs) the same numbers as eagerly, memory included.
  compiled = tf.function(lambda features: model(features, training=False), jit_compile=True)
  outputs = compiled(inputs)
  for name in expected:
    np.testing.assert_allclose(outputs[name], got[name], atol=1e-5, err_msg=name)
  assert [memory.shape for memory in outputs["new_mems"]] == [(3, 4, 32)] * 2


def test_every_projection_holds_int8(quantized):
  model = quantized[2]
  for block in model.blocks:
    assert block.attention.quantization_mode == block.feed_forward.quantization_mode == "int8"
    kernels = [variable for variable in block.weights if variable.dtype == "int8"]
    assert sorted(variable.name for variable in kernels) == ["k", "kernel", "kernel", "o", "q",
                                                             "r", "v"]
    assert not hasattr(block.attention, "query_kernel")  # nothing reads it as float
  floating = {variable.name for variable in model.weights if variable.dtype == "float32"}
  assert {"word_embedding", "mask_emb", "r_w_bias", "seg_embed", "gamma", "bias",
          "q_scale", "kernel_scale"} <= floating


def test_plain_path_agrees_with_the_kernels():
  inputs = two_stream_inputs()
  fused, plain = make_model(), make_model(fused=False)
  plain.set_weights(fused.get_weights())
  for model in (fused, plain):
    model.quantize("int8")
  for name, value in outputs_of(fused, inputs).items():
    np.testing.assert_allclose(outputs_of(plain, inputs)[name], value, atol=1e-4, err_msg=name)


def test_quantized_model_round_trips_through_config_and_keras_file(quantized, tmp_path):
  inputs, _, model, _ = quantized
  call = lambda candidate: outputs_of(candidate, inputs)
  clone = assert_config_round_trip(model, call, atol=0)
  assert clone.get_config()["quantization"] == "int8"
  restored = assert_keras_file_round_trip(model, call, tmp_path / "int8.keras", atol=0)
  assert restored.quantization == "int8"
  assert "quantization" not in make_model().get_config()  # a float model's config as before


def test_save_pretrained_keeps_int8_and_float_formats_refuse_it(quantized, tmp_path):
  """save_pretrained writes the int8 weights and quantization.json: from_pretrained gives the
  quantized model back with the same outputs. Every reader or writer of the original's names
  (Hugging Face, TF1) and the conversion refuse rather than write or read int8 values as
  float ones."""
  inputs, _, model, _ = quantized
  directory = str(tmp_path / "model")
  model.save_pretrained(directory)
  assert checkpoints.own.stored_quantization(directory) == "int8"
  restored = XLNetModel.from_pretrained(directory)
  assert restored.quantization == "int8"
  for name, value in outputs_of(restored, inputs).items():
    np.testing.assert_array_equal(value, outputs_of(model, inputs)[name])
  with pytest.raises(AttributeError, match=r"quantized \(int8\): its float kernel query_kernel"):
    naming.original_variable_map(model)
  with pytest.raises(UserInputError, match="quantized to int8: the checkpoint formats hold"):
    convert_checkpoint(directory, "own", str(tmp_path / "hf"), "huggingface")
  assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("mode, error", [("int4", NotImplementedError),
                                         ("float8", NotImplementedError),
                                         ("gptq", ValueError)])  # Keras: gptq needs a config
def test_unsupported_modes_change_nothing(mode, error):
  inputs = two_stream_inputs()
  model = make_model()
  weights, expected = model.get_weights(), outputs_of(model, inputs)
  with pytest.raises(error, match=mode if mode != "gptq" else "GPTQ"):
    model.quantize(mode)
  assert model.quantization is None
  assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), weights))
  for name, value in outputs_of(model, inputs).items():
    np.testing.assert_array_equal(value, expected[name])


def test_custom_configs_filters_and_second_calls_are_refused(quantized):
  model = make_model()
  config = keras.quantizers.Int8QuantizationConfig(activation_quantizer=None)
  with pytest.raises(NotImplementedError, match="custom quantization config"):
    model.quantize(config=config)
  with pytest.raises(ValueError, match="filters"):
    model.quantize("int8", filters="ff")
  assert model.quantization is None
  model.quantize(config=keras.quantizers.Int8QuantizationConfig())  # the default: accepted
  with pytest.raises(ValueError, match="already quantized"):
    quantized[2].quantize("int8")


def test_feed_forward_reads_dense_layers_quantized_by_a_model_walk():
  """Keras' Model.quantize quantizes leaf layers only: a model wrapping XLNetModel leaves the
  attention float and the feed-forward's Dense layers int8, which the fused path must read as
  int8 (it read their int8 kernels as float before); a mode it does not compute raises."""
  stream = np.random.default_rng(0).normal(size=[2, 5, 32]).astype(np.float32)
  keras.utils.set_random_seed(0)
  layer = PositionwiseFeedForward(48, init_std=0.15)
  expected = layer(stream).numpy()
  layer.inner_dense.quantize("int8")
  layer.output_dense.quantize("int8")
  assert relative_error(expected, layer(stream)) < TOLERANCE
  other = PositionwiseFeedForward(48, init_std=0.15)
  other.build(stream.shape)
  other.inner_dense.quantize("int4")
  with pytest.raises(NotImplementedError, match="'int4'"):
    other(stream)


def test_constant_weights_take_onednn_and_compute_the_same():
  """constant_int8_weights: traced without XLA, the kernels become graph constants multiplied by
  oneDNN's u8 x s8 kernel, with the default path's numbers; under XLA, the default path."""
  rng = np.random.default_rng(0)
  states = tf.constant(rng.normal(size=[2, 5, 8]).astype(np.float32))
  kernels = [Int8Kernel(keras.Variable(values), keras.Variable(scale), reduces)
             for reduces in (False, True)
             for values, scale in [quantize_kernel(rng.normal(size=[8, 2, 4]),
                                                   axis=(1, 2) if reduces else 0)]]

  def project(states):
    heads = int8_projection(states, kernels[0])  # [2, 5, 2, 4]
    return heads, int8_projection(heads, kernels[1])  # [2, 5, 8]

  expected = project(states)
  with constant_int8_weights():
    traced = tf.function(project)
    operations = {operation.type
                  for operation in traced.get_concrete_function(states).graph.get_operations()}
    results = [traced(states), tf.function(project, jit_compile=True)(states)]
  if onednn_available():  # TensorFlow's x86 builds
    assert "QuantizedMatMulWithBias" in operations
  for got in results:
    for want, value in zip(expected, got):
      np.testing.assert_allclose(value, want, atol=1e-6)


def test_rows_are_seven_bit_where_onednn_sums_byte_pairs_in_int16(monkeypatch):
  """Where oneDNN's product would run without VNNI, every path quantizes rows to 0..127 (offset
  -128: -128..-1) and the row scale follows; with VNNI, or without oneDNN, to 256 levels."""
  rows = tf.constant(np.random.default_rng(0).normal(size=[3, 40]).astype(np.float32))
  for exact, onednn, top in [(False, True, 127), (True, True, 255), (False, False, 255)]:
    monkeypatch.setattr(cpu_features, "exact_u8_pairs", lambda exact=exact: exact)
    monkeypatch.setattr(int8_packing, "_onednn_int8_kernel", lambda onednn=onednn: onednn)
    assert int8_packing.row_top() == top
    for offset in (0.0, -128.0):
      quantized, row_scale, zero_point = (t.numpy() for t in
                                          int8_packing.quantized_rows(rows, offset))
      assert quantized.min() == offset and quantized.max() == offset + top
      np.testing.assert_allclose((quantized - zero_point) / row_scale, rows,
                                 atol=0.6 / row_scale.min())
    assert int8_packing.u8_rows(rows)[0].numpy().max() == top


@pytest.mark.skipif(not onednn_available(), reason="no oneDNN int8 kernel in this TensorFlow")
def test_onednn_product_of_the_quantized_rows_is_exact_on_this_cpu():
  """The rows u8_rows writes, through oneDNN's product on this machine's CPU, give the exact
  int32 product even where every pair of byte products is at its largest (rows at their top
  level, weights 127): 255 x 127 twice overflows the int16 sums of a CPU without VNNI, which
  is why such CPUs get 7-bit rows."""
  rng = np.random.default_rng(0)
  rows = np.concatenate([np.ones([2, 64]), rng.uniform(0, 1, [2, 64])]).astype(np.float32)
  kernel = np.concatenate([np.full([64, 3], 127), rng.integers(-127, 128, [64, 3])],
                          axis=1).astype(np.int8)
  quantized = int8_packing.u8_rows(tf.constant(rows))[0]
  assert quantized.numpy().max() == int8_packing.row_top()
  want = quantized.numpy().astype(np.int64) @ kernel.astype(np.int64)
  np.testing.assert_array_equal(int8_products._onednn_product(quantized, kernel), want)


def test_float_product_of_the_integers_is_the_int32_one():
  """Without oneDNN's int8 kernel the constant-weights path multiplies the uint8 rows and int8
  kernel in float32: the int32 product exactly at a base feed-forward's width (3,072), and
  within float32 rounding where partial sums pass 2^24 (every row 255, every weight 127)."""
  rng = np.random.default_rng(0)
  rows = rng.integers(0, 256, size=[5, 3072]).astype(np.uint8)
  kernel = rng.integers(-127, 128, size=[3072, 7]).astype(np.int8)
  want = rows.astype(np.int64) @ kernel.astype(np.int64)
  np.testing.assert_array_equal(int8_products._float_product(tf.constant(rows), kernel), want)
  extreme = int8_products._float_product(tf.fill([2, 3072], np.uint8(255)),
                                         np.full([3072, 3], 127, np.int8)).numpy()
  np.testing.assert_allclose(extreme, 255 * 127 * 3072, rtol=1e-6)


def test_constant_weights_model_computes_the_default_int8_numbers(quantized):
  """The whole model traced in constant_int8_weights (keys, values and queries in one product,
  transposes, biases, the activation and the residual LayerNorms inside the quantization
  regions) against the default int8 path: both streams, padding, three segments, and a second
  call over memory (the keys' product then separate)."""
  inputs, _, model, expected = quantized
  with constant_int8_weights():
    traced = tf.function(lambda features: model(features, training=False))
    first = traced(inputs)
    operations = [operation.type for operation in
                  traced.get_concrete_function(inputs).graph.get_operations()]
    with_memory = dict(inputs, mems=first["new_mems"])
    second = traced(with_memory)
  if onednn_available():
    assert "QuantizedMatMulWithBias" in operations
  for name in expected:
    np.testing.assert_allclose(first[name], expected[name], atol=2e-5, err_msg=name)
  default = model(with_memory, training=False)
  for name in expected:
    np.testing.assert_allclose(second[name], default[name], atol=2e-5, err_msg=name)


def _head_kernels(rng, count, heads=2, head_size=4, d_model=8):
  return [Int8Kernel(*(keras.Variable(array) for array in quantize_kernel(
      rng.normal(size=[d_model, heads, head_size])))) for _ in range(count)]


def test_projections_side_by_side_equal_one_at_a_time():
  """int8_projections (one product in constant_int8_weights) gives each int8_projection of
  the same states, heads first, plus its biases, in both paths."""
  rng = np.random.default_rng(1)
  states = tf.constant(rng.normal(size=[3, 5, 8]).astype(np.float32))
  kernels = _head_kernels(rng, 3)
  biases = [(), [tf.constant(rng.normal(size=[2, 4]).astype(np.float32)) for _ in range(3)],
            ()]
  want = [int8_projection(states, kernel, heads_first=True, plus=plus)
          for kernel, plus in zip(kernels, biases)]
  projected_heads = tf.transpose(int8_projection(states, kernels[0]), [0, 2, 1, 3])
  np.testing.assert_allclose(want[0], projected_heads, atol=1e-6)
  for bias, got in zip(biases[1], want[1]):
    np.testing.assert_allclose(
        got, tf.transpose(int8_projection(states, kernels[1]), [0, 2, 1, 3]) + bias[:, None],
        atol=1e-6)
  with constant_int8_weights():
    got = tf.function(lambda states: int8_projections(states, kernels, biases))(states)
  assert len(got[1]) == 3 and got[0].shape == got[2].shape == (3, 2, 5, 4)
  for group_want, group_got in zip(want, got):
    np.testing.assert_allclose(group_got, group_want, atol=1e-5)


def test_an_epilogue_runs_on_the_product_rows_in_both_paths():
  rng = np.random.default_rng(2)
  states = tf.constant(rng.normal(size=[2, 3, 8]).astype(np.float32))
  values, scale = quantize_kernel(rng.normal(size=[8, 6]))
  shift = tf.constant(rng.normal(size=[6]).astype(np.float32))
  epilogue = Epilogue(lambda rows, shift, power: (rows + shift) ** power, (shift,),
                      (("power", 2),))
  want = (int8_matmul(states, values, scale).numpy() + shift.numpy()) ** 2
  np.testing.assert_allclose(int8_matmul(states, values, scale, epilogue=epilogue), want,
                             rtol=1e-5)
  with constant_int8_weights():
    got = tf.function(lambda states: int8_matmul(states, values, scale, epilogue=epilogue))(
        states)
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_two_products_hand_quantized_rows_from_one_to_the_next():
  """int8_two_products in constant_int8_weights (the first region quantizes for the second)
  against two int8_matmul calls on the default path, both epilogues applied."""
  rng = np.random.default_rng(4)
  states = tf.constant(rng.normal(size=[2, 3, 8]).astype(np.float32))
  inner, inner_scale = quantize_kernel(rng.normal(size=[8, 12]))
  outer, outer_scale = quantize_kernel(rng.normal(size=[12, 8]))
  shift = tf.constant(rng.normal(size=[12]).astype(np.float32))
  first = Epilogue(lambda rows, shift: tf.nn.relu(rows + shift), (shift,))
  second = Epilogue(lambda rows, scale: rows * scale, (), (("scale", -2.0),))
  want = int8_matmul(int8_matmul(states, inner, inner_scale, epilogue=first), outer,
                     outer_scale, epilogue=second).numpy()
  with constant_int8_weights():
    got = tf.function(lambda states: int8_two_products(
        states, (inner, inner_scale, first), (outer, outer_scale, second)))(states)
  assert got.shape == (2, 3, 8)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  assert np.abs(want).max() > 0.1  # relu did not zero everything


def test_misplaced_biases_and_epilogues_are_refused():
  rng = np.random.default_rng(3)
  states = tf.zeros([1, 2, 8])
  kernel = _head_kernels(rng, 1)[0]
  output_kernel = kernel._replace(reduces_heads=True)
  with pytest.raises(ValueError, match="plus"):
    int8_projection(states, kernel, plus=[tf.zeros([2, 4])])  # not heads first
  with pytest.raises(ValueError, match="plus"):
    int8_projection(tf.zeros([1, 2, 2, 4]), output_kernel, heads_first=True,
                    plus=[tf.zeros([2, 4])])
  with pytest.raises(ValueError, match="epilogue"):
    int8_projection(states, kernel, epilogue=Epilogue(tf.identity))


def _integer_products(call):
  """(the types of the products of integer operands, whether any int8 or uint8 tensor flows)
  in `call` traced with the compiled regions inline (ops.compile.without_xla): their ops are
  then in the graph itself."""
  with without_xla():
    operations = tf.function(call).get_concrete_function().graph.get_operations()
  products = [operation.type for operation in operations if "MatMul" in operation.type
              and all(tensor.dtype.is_integer or tensor.dtype.is_quantized
                      for tensor in operation.inputs[:2])]
  eight_bits = {tf.int8, tf.uint8, tf.qint8, tf.quint8}
  return products, any(tensor.dtype in eight_bits
                       for operation in operations for tensor in operation.outputs)


@pytest.mark.parametrize("fused", [True, False])
def test_quantized_layers_multiply_in_int8_and_float_layers_do_not(fused):
  """Each projection of a quantized attention (q, k, v, r and o) and feed-forward (layer_1 and
  layer_2) is a product of integers in the traced graph, in both paths; with constant int8
  weights, where oneDNN runs, keys, values and queries share one. The float layers' graphs
  hold no 8-bit tensor at all."""
  rng = np.random.default_rng(5)
  content = tf.constant(rng.normal(size=[2, 4, 16]).astype(np.float32))
  encoding = tf.constant(rng.normal(size=[1, 8, 16]).astype(np.float32))
  biases = [tf.constant(rng.normal(size=[2, 8]).astype(np.float32)) for _ in range(2)]
  keras.utils.set_random_seed(0)
  attention = RelativeMultiHeadAttention(2, 8, init_std=0.25, fused=fused)
  feed_forward = PositionwiseFeedForward(24, init_std=0.25, fused=fused)
  # (layer, its call, its projections, their oneDNN products with constant weights)
  cases = [(attention, lambda: attention(content, encoding, *biases)[0], 5, 3),
           (feed_forward, lambda: feed_forward(content), 2, 2)]
  for layer, call, projections, onednn_products in cases:
    expected = call().numpy()
    assert _integer_products(call) == ([], False), layer.name
    layer.quantize("int8")
    products, eight_bits = _integer_products(call)
    assert len(products) == projections and eight_bits, (layer.name, products)
    assert 1e-4 < relative_error(expected, call()) < TOLERANCE  # and it computes the layer
    if fused and onednn_available():
      with constant_int8_weights():
        products, _ = _integer_products(call)
      assert products == ["QuantizedMatMulWithBias"] * onednn_products, (layer.name, products)


def test_quantized_layers_round_trip_through_their_configs():
  """A quantized layer's config holds its int8 dtype policy: the clone builds int8 kernels."""
  rng = np.random.default_rng(0)
  content = rng.normal(size=[2, 4, 16]).astype(np.float32)
  encoding = rng.normal(size=[1, 8, 16]).astype(np.float32)
  biases = [rng.normal(size=[2, 8]).astype(np.float32) for _ in range(2)]
  layer = RelativeMultiHeadAttention(2, 8, init_std=0.25)
  call = lambda candidate: candidate(content, encoding, *biases)[0]
  expected = call(layer).numpy()
  layer.quantize("int8")
  assert relative_error(expected, call(layer)) < TOLERANCE
  clone = assert_config_round_trip(layer, call, build_shape=content.shape, atol=0)
  assert clone.quantization_mode == "int8" and not hasattr(clone, "query_kernel")
  feed_forward = PositionwiseFeedForward(24, init_std=0.25)
  feed_forward(content)
  feed_forward.quantize("int8")
  clone = assert_config_round_trip(feed_forward, lambda candidate: candidate(content),
                                   build_shape=content.shape, atol=0)
  assert clone.inner_dense.quantization_mode == "int8"


def test_quantize_warns_where_tensorflow_loaded_without_onednn(monkeypatch):
  """An x86 TensorFlow without oneDNN's int8 product (imported before xlnet_tf could switch
  it on): quantize says so in one warning that names the switch; not where oneDNN runs, nor
  where it was switched off on purpose."""
  monkeypatch.setattr(cpu_features, "is_x86", lambda: True)
  for onednn, switch, warns in [(False, "1", True), (True, "1", False), (False, "0", False)]:
    monkeypatch.setattr(int8_packing, "onednn_available", lambda onednn=onednn: onednn)
    monkeypatch.setenv(cpu_features.ONEDNN_SWITCH, switch)
    model = XLNetModel(tiny_config(n_token=20))
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      model.quantize("int8")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == int(warns), (onednn, switch, messages)
    if warns:
      assert "TF_ENABLE_ONEDNN_OPTS=1" in messages[0] and "import xlnet_tf first" in messages[0]
