"""Mask semantics checked against the definition, over random settings (hypothesis)."""

import numpy as np
from hypothesis import given, settings, strategies as st

from model_inputs import perm_mask_from_ranks
from xlnet_tf.objectives.permutation import expand_factorization, factorization_ranks


@st.composite
def factorizations(draw):
  perm_size = draw(st.integers(1, 6))
  reuse_len = perm_size * draw(st.integers(0, 3))
  new_len = perm_size * draw(st.integers(1, 3))
  length = reuse_len + new_len
  seed = draw(st.integers(0, 2 ** 32 - 1))
  rng = np.random.default_rng(seed)
  selected = rng.random(length) < draw(st.floats(0.0, 1.0))
  functional = rng.random(length) < 0.15
  ranks = np.concatenate([
      factorization_ranks(rng, selected[:reuse_len], functional[:reuse_len], perm_size),
      factorization_ranks(rng, selected[reuse_len:], functional[reuse_len:], perm_size)])
  return ranks, selected & ~functional, functional, reuse_len


@settings(max_examples=80, deadline=None)
@given(factorizations())
def test_perm_mask_follows_the_definition(case):
  ranks, is_target, functional, reuse_len = case
  length = len(ranks)
  mask = perm_mask_from_ranks(ranks, is_target, reuse_len)
  context = ranks < 0
  assert not (context & (is_target | functional)).any()
  part = np.arange(length) >= reuse_len
  for i in range(length):
    for j in range(length):
      sees = mask[i, j] == 0
      if part[i] != part[j]:
        assert sees == (part[i] and not part[j]), "reuse never sees new; new sees all reuse"
      elif context[j]:
        assert sees, "everybody sees the context"
      elif context[i]:
        assert not sees, "context never sees selected or functional tokens"
      elif i == j:
        assert sees == bool(functional[i]), "a target does not see itself"
      else:
        assert sees == (ranks[j] < ranks[i]), "earlier in the order only"


@settings(max_examples=80, deadline=None)
@given(factorizations())
def test_order_is_one_permutation_per_part(case):
  ranks, _, _, reuse_len = case
  for part in (ranks[:reuse_len], ranks[reuse_len:]):
    ordered = part[part >= 0]
    assert len(set(ordered.tolist())) == len(ordered), "ranks are distinct: acyclic"
    assert ((ordered >= 0) & (ordered < len(part))).all()


@settings(max_examples=40, deadline=None)
@given(factorizations(), st.integers(0, 4))
def test_tf_expansion_equals_numpy(case, extra_slots):
  ranks, is_target, _, reuse_len = case
  length = len(ranks)
  rng = np.random.default_rng(0)
  input_ids = rng.integers(10, 100, size=[2, length]).astype(np.int32)
  targets = np.flatnonzero(is_target)
  positions = np.full([2, len(targets) + extra_slots], -1, np.int32)
  positions[:, :len(targets)] = targets
  out = expand_factorization(input_ids, np.stack([ranks, ranks]).astype(np.int32), positions,
                             reuse_len)
  expected = perm_mask_from_ranks(ranks, is_target, reuse_len)
  np.testing.assert_array_equal(out["perm_mask"].numpy()[1], expected)
  mapping = out["target_mapping"].numpy()
  assert mapping.sum() == 2 * len(targets)
  np.testing.assert_array_equal(mapping[0].argmax(-1)[:len(targets)], targets)
  np.testing.assert_array_equal(out["target"].numpy()[0, :len(targets)], input_ids[0, targets])
  np.testing.assert_array_equal(out["target_mask"].numpy()[0],
                                [1] * len(targets) + [0] * extra_slots)
  np.testing.assert_array_equal(out["input_q"].numpy()[0], is_target.astype(np.float32))


def test_docstring_example():
  mask = perm_mask_from_ranks(np.array([1, -1, 0, 2]), np.array([1, 0, 1, 0], bool), 0)
  np.testing.assert_array_equal(mask, [[1, 0, 0, 1], [1, 0, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]])
