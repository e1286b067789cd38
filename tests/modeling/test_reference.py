"""XLNetModel against the independent NumPy implementation of the original (tests/xlnet_reference).

Every case: batch > 1, left padding, three segment ids, float32 model vs float64 reference.
"""

import numpy as np
import pytest

from model_inputs import (factorization_perm_mask, padded_pair_batch, target_mapping_for,
                          tiny_config)
from xlnet_reference import model_weights_by_original_name, randomize_weights, xlnet_forward
from xlnet_tf import XLNetModel

TOLERANCE = 1e-5
LENGTH = 8


def build(seed=0, **overrides):
  config = tiny_config(**overrides)
  model = XLNetModel(config)
  randomize_weights(model, seed)
  return config, model, model_weights_by_original_name(model)


def compare(model, config, weights, inputs):
  outputs = model(inputs, training=False)
  reference = xlnet_forward(weights, config, **inputs)
  np.testing.assert_allclose(outputs["sequence_output"].numpy(), reference["sequence_output"],
                             atol=TOLERANCE, rtol=0)
  if "target_mapping" in inputs:
    np.testing.assert_allclose(outputs["query_output"].numpy(), reference["query_output"],
                               atol=TOLERANCE, rtol=0)
  if config.mem_len > 0:
    for ours, theirs in zip(outputs["new_mems"], reference["new_mems"]):
      np.testing.assert_allclose(ours.numpy(), theirs, atol=TOLERANCE, rtol=0)
  return outputs, reference


def pretraining_inputs(rng, batch, config, pad_lengths, num_targets=3, padded_slots=1):
  inputs = padded_pair_batch(rng, batch, LENGTH, config.n_token, pad_lengths)
  perm_mask, targets, _ = factorization_perm_mask(rng, batch, LENGTH, num_targets)
  inputs["perm_mask"] = perm_mask
  inputs["target_mapping"] = target_mapping_for(targets, LENGTH, padded_slots)
  return inputs


CASES = {
    "content_stream": dict(),
    "untie_r_false": dict(untie_r=False),
    "clamp_len": dict(clamp_len=3),
    "relu": dict(ff_activation="relu"),
    "gelu_exact": dict(ff_activation="gelu_exact"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_content_stream_matches_reference(case, rng):
  config, model, weights = build(**CASES[case])
  inputs = padded_pair_batch(rng, 3, LENGTH, config.n_token, pad_lengths=[0, 2, 3])
  compare(model, config, weights, inputs)


@pytest.mark.parametrize("untie_r", [True, False])
def test_query_stream_matches_reference(untie_r, rng):
  config, model, weights = build(untie_r=untie_r)
  inputs = pretraining_inputs(rng, 3, config, pad_lengths=[0, 1, 0])
  outputs, _ = compare(model, config, weights, inputs)
  assert outputs["query_output"].shape == (3, 4, config.d_model)


def test_bi_data_matches_reference(rng):
  config, model, weights = build(bi_data=True, clamp_len=5)
  inputs = pretraining_inputs(rng, 4, config, pad_lengths=[0, 2, 0, 1])
  compare(model, config, weights, inputs)


@pytest.mark.parametrize("attn_type,same_length", [("bi", False), ("uni", False), ("uni", True)])
@pytest.mark.parametrize("reuse_len", [0, 5])
def test_mems_across_two_segments_match_reference(attn_type, same_length, reuse_len, rng):
  config, model, weights = build(mem_len=6, reuse_len=reuse_len, attn_type=attn_type,
                                 same_length=same_length)
  first = pretraining_inputs(rng, 2, config, pad_lengths=[2, 0])
  first_out, first_ref = compare(model, config, weights, first)
  second = pretraining_inputs(rng, 2, config, pad_lengths=[0, 0])
  second["mems"] = [m.numpy() for m in first_out["new_mems"]]
  compare(model, config, weights, second)
  cached = min(reuse_len or LENGTH, config.mem_len)  # the first segment has no old memory
  assert first_out["new_mems"][0].shape == (2, cached, config.d_model)


def test_uni_same_length_without_memory_matches_reference(rng):
  config, model, weights = build(attn_type="uni", same_length=True)
  inputs = padded_pair_batch(rng, 2, LENGTH, config.n_token, pad_lengths=[1, 0])
  compare(model, config, weights, inputs)


def test_without_segment_ids_equals_all_zero_segments(rng):
  """Without segment_ids there is no segment term; all-zero ids add a row constant."""
  config, model, weights = build(mem_len=4)
  inputs = padded_pair_batch(rng, 2, LENGTH, config.n_token, pad_lengths=[0, 3])
  del inputs["segment_ids"]
  first = model(inputs)
  reference = xlnet_forward(weights, config, **inputs)
  np.testing.assert_allclose(first["sequence_output"].numpy(), reference["sequence_output"],
                             atol=TOLERANCE, rtol=0)
  zeros = dict(inputs, segment_ids=np.zeros_like(inputs["input_ids"]))
  np.testing.assert_allclose(model(zeros)["sequence_output"].numpy(),
                             first["sequence_output"].numpy(), atol=TOLERANCE, rtol=0)


def test_tolerance_detects_a_wrong_activation(rng):
  """The comparisons above can fail: the erf gelu against the tanh reference is off by more."""
  config, model, weights = build(ff_activation="gelu_exact")
  inputs = padded_pair_batch(rng, 2, LENGTH, config.n_token, pad_lengths=[0, 2])
  ours = model(inputs)["sequence_output"].numpy()
  tanh_reference = xlnet_forward(weights, tiny_config(), **inputs)["sequence_output"]
  assert np.max(np.abs(ours - tanh_reference)) > 10 * TOLERANCE


@pytest.mark.parametrize("pos_encoding,clamp_len", [
    ("shaw", 3), ("absolute_sinusoid", -1), ("absolute_sinusoid", 5),
    ("absolute_learned", 5)])
def test_ablation_encodings_match_reference_across_two_segments(pos_encoding, clamp_len, rng):
  """Transformer-XL's Table 5 encodings (left-to-right, memory of 6 over segments of 8, left
  padding, segments): distances past clamp_len share Shaw's last key; absolute positions
  restart at 0 in each segment, the memory keeping the states it was computed with."""
  config, model, weights = build(mem_len=6, attn_type="uni", pos_encoding=pos_encoding,
                                 clamp_len=clamp_len)
  first = padded_pair_batch(rng, 2, LENGTH, config.n_token, pad_lengths=[2, 0])
  first_out, _ = compare(model, config, weights, first)
  second = padded_pair_batch(rng, 2, LENGTH, config.n_token, pad_lengths=[0, 0])
  second["mems"] = [m.numpy() for m in first_out["new_mems"]]
  compare(model, config, weights, second)
  # Each encoding changes the output: the reference computed without it differs.
  relative = xlnet_forward(weights, tiny_config(mem_len=6, attn_type="uni"), **second)
  assert np.abs(relative["sequence_output"] - model(second)["sequence_output"].numpy()).max() > 0.1
