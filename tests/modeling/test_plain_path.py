"""The plain path (fused=False: the attention score as the paper writes it, Keras dropout and
LayerNorm) equals the fused path of the compiled kernels: outputs and gradients, float32,
batch > 1, padding, three segment ids, memory, both streams, 'bi' and 'uni'."""

import numpy as np
import pytest
import tensorflow as tf

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetModel, XLNetPretrainer
from xlnet_tf.modeling.layers.attention import relative_attention_probabilities
from xlnet_tf.modeling.ops.attention_probabilities import fused_attention_probabilities

LENGTH, MEMORY, BATCH = 8, 3, 3


def twin_models(**overrides):
  """The same weights in a fused and a plain pretrainer (LM head included)."""
  config = tiny_config(mem_len=MEMORY, **overrides)
  fused = XLNetPretrainer(XLNetModel(config))
  plain = XLNetPretrainer(XLNetModel(config, fused=False))
  randomize_weights(fused.backbone, 11)
  fused.lm_bias.assign(np.linspace(-1, 1, config.n_token).astype(np.float32))
  for source, target in zip(fused.weights, plain.weights):
    assert source.path == target.path
    target.assign(source)
  return fused, plain


def two_stream_inputs(rng):
  inputs = padded_pair_batch(rng, BATCH, LENGTH, 50, pad_lengths=[0, 1, 3])
  perm_mask, targets, _ = factorization_perm_mask(rng, BATCH, LENGTH, num_targets=3)
  inputs.update(perm_mask=perm_mask,
                target_mapping=target_mapping_for(targets, LENGTH, padded_slots=1),
                mems=[rng.standard_normal([BATCH, MEMORY, 32]).astype(np.float32)
                      for _ in range(2)])
  return inputs


def outputs_and_gradients(model, inputs):
  with tf.GradientTape() as tape:
    outputs = model(inputs, training=True)  # dropout is 0: training only exercises that path
    backbone = model.backbone(inputs, training=True)
    loss = (tf.reduce_sum(outputs["logits"] * 0.01) + tf.reduce_sum(backbone["sequence_output"])
            + tf.reduce_sum(tf.sin(backbone["query_output"])))
  gradients = tape.gradient(loss, model.trainable_variables)
  return ([outputs["logits"], backbone["sequence_output"], backbone["query_output"],
           *backbone["new_mems"]], gradients)


@pytest.mark.parametrize("attn_type", ["bi", "uni"])
def test_plain_path_equals_fused_path(rng, attn_type):
  fused, plain = twin_models(attn_type=attn_type)
  inputs = two_stream_inputs(rng)
  fused_outputs, fused_gradients = outputs_and_gradients(fused, inputs)
  plain_outputs, plain_gradients = outputs_and_gradients(plain, inputs)
  for expected, got in zip(fused_outputs, plain_outputs):
    # Two summation orders in float32: apart by a few ulps of the largest terms summed (1.7e-5
    # on outputs up to ~10, measured on a CPU without AVX-512, whose vector width orders the
    # sums otherwise); a term dropped moves them by ~1 (test_paths_differ_when_a_term_is_dropped).
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5,
                               atol=4e-6 * np.abs(expected.numpy()).max())
  assert len(fused_gradients) == len(plain_gradients) > 20
  for variable, expected, got in zip(fused.trainable_variables, fused_gradients,
                                     plain_gradients):
    expected, got = tf.convert_to_tensor(expected).numpy(), tf.convert_to_tensor(got).numpy()
    assert np.abs(expected).max() > 0, variable.path  # every weight is reached
    np.testing.assert_allclose(got, expected, atol=4e-6 * np.abs(expected).max(), rtol=1e-4,
                               err_msg=variable.path)  # as the outputs: to the largest term


def test_paths_differ_when_a_term_is_dropped(rng):
  """The comparison can fail: without the segment term the outputs move."""
  fused, plain = twin_models()
  inputs = two_stream_inputs(rng)
  without_segments = {k: v for k, v in inputs.items() if k != "segment_ids"}
  moved = np.abs(plain.backbone(without_segments)["sequence_output"].numpy()
                 - fused.backbone(inputs)["sequence_output"].numpy()).max()
  assert moved > 1e-3


def test_score_function_equals_the_kernel_with_rows_fully_masked(rng):
  batch, heads, length, memory, size = 2, 3, 5, 2, 4
  keys_length = memory + length
  queries = tf.constant(rng.standard_normal([batch, heads, length, size]), tf.float32)
  keys = tf.constant(rng.standard_normal([batch, heads, keys_length, size]), tf.float32)
  position_keys = tf.constant(rng.standard_normal([1, heads, keys_length + length, size]),
                              tf.float32)
  biases = [tf.constant(rng.standard_normal([heads, size]), tf.float32) for _ in range(3)]
  seg_embed = tf.constant(rng.standard_normal([2, heads, size]), tf.float32)
  mismatch = tf.constant(rng.random([batch, length, keys_length]) < 0.5)
  mask = rng.random([batch, length, keys_length]) < 0.3
  mask[1, 2] = True  # a row with every key blocked attends uniformly
  mask = tf.constant(mask)
  plain = relative_attention_probabilities(
      queries, keys, position_keys, biases[0], biases[1], scale=0.5, mask=mask,
      segment_mismatch=mismatch, r_s_bias=biases[2], seg_embed=seg_embed)
  segment_keys = tf.transpose(seg_embed, [1, 0, 2])[None]
  fused = fused_attention_probabilities(
      tf.matmul(queries + biases[0][:, None], keys, transpose_b=True),
      tf.matmul(queries + biases[1][:, None], position_keys, transpose_b=True)[:, :, None],
      tf.matmul(queries + biases[2][:, None], segment_keys, transpose_b=True),
      key_length=keys_length, content_length=length, scale=0.5, mismatch=mismatch, mask=mask)
  np.testing.assert_allclose(plain.numpy(), fused.numpy(), atol=1e-6)
  np.testing.assert_allclose(plain.numpy()[1, :, 2], 1.0 / keys_length, atol=1e-6)
  blocked = np.broadcast_to(mask.numpy()[:, None], plain.shape).copy()
  blocked[1, :, 2] = False
  assert np.abs(plain.numpy()[blocked]).max() < 1e-20


@pytest.mark.parametrize("fused", [True, False])
def test_return_attention_gives_each_layers_probabilities(rng, fused):
  config = tiny_config()
  model = XLNetModel(config, fused=fused)
  randomize_weights(model, 5)
  inputs = padded_pair_batch(rng, BATCH, LENGTH, 50, pad_lengths=[0, 2, 4])
  outputs = tf.function(lambda x: model(x, return_attention=True))(inputs)  # also in a graph
  maps = [m.numpy() for m in outputs["attention"]]
  assert len(maps) == config.n_layer
  for probabilities in maps:
    assert probabilities.shape == (BATCH, config.n_head, LENGTH, LENGTH)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    real = inputs["input_mask"] == 1  # no real token attends a padded key
    blocked = real[:, None, :, None] & ~real[:, None, None, :]
    assert probabilities[np.broadcast_to(blocked, probabilities.shape)].max() < 1e-20
  np.testing.assert_allclose(outputs["sequence_output"].numpy(),
                             model(inputs)["sequence_output"].numpy(), atol=1e-5)
