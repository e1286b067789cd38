"""Transformer-XL's context-length measures (pretraining.context_length): Table 5's columns,
per-token losses at an exact context length, and RECL against a hand-computed example."""

import math

import keras
import numpy as np
import pytest

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.pretraining import context_length


def test_table5_columns_pick_the_training_length_the_best_and_the_shortest_reaching_it():
  rows = [{"attention_length": length, "perplexity": ppl}
          for length, ppl in ((32, 40.0), (64, 35.0), (128, 30.02), (256, 30.0), (512, 30.1))]
  assert context_length.table5_columns(rows, 64) == {
      "ppl_init": 35.0, "ppl_best": 30.0, "attention_length_best": 128,  # within 0.1%
      "train_attention_length": 64}
  assert context_length.table5_columns(rows, 64, tolerance=0)["attention_length_best"] == 256
  assert context_length.table5_columns(rows, 100)["ppl_init"] is None


def _tiny_lm(mem_len, pos_encoding="relative", clamp_len=-1):
  keras.utils.set_random_seed(0)
  config = XLNetConfig.preset("tiny", n_token=60, attn_type="uni", mem_len=mem_len,
                              dropout=0.0, dropatt=0.0, init_std=0.3,
                              pos_encoding=pos_encoding, clamp_len=clamp_len)
  return XLNetPretrainer(XLNetModel(config), objective="clm")


@pytest.mark.parametrize("pos_encoding,clamp_len", [("relative", -1), ("shaw", 4)])
def test_token_losses_see_exactly_the_context_length(rng, pos_encoding, clamp_len):
  """Each token's loss given its C previous tokens: read in segments with memory (batch 3 of
  5 tokens) it equals one pass over the window, token by token, and a longer context changes
  it."""
  model = _tiny_lm(mem_len=8, pos_encoding=pos_encoding, clamp_len=clamp_len)
  ids = rng.integers(3, 60, size=200).astype(np.int32)
  positions = context_length.scored_positions(len(ids), 12, count=5, seed=1)
  assert len(positions) == 5 and positions.min() >= 12
  segmented = context_length.token_losses(model, ids, positions, 10, segment_length=4,
                                          batch_size=3)
  by_hand = []
  for t in positions:
    logits = model({"input_ids": ids[None, t - 10:t]})["logits"][0, -1].numpy().astype(float)
    by_hand.append(math.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[ids[t]])
  np.testing.assert_allclose(segmented, by_hand, rtol=1e-4)
  np.testing.assert_allclose(context_length.token_losses(model, ids, positions, 10), by_hand,
                             rtol=1e-4)
  longer = context_length.token_losses(model, ids, positions, 12, segment_length=4)
  assert np.abs(longer - segmented).max() > 1e-3


def test_recl_of_a_hand_computed_group():
  """Two models, lengths 1, 2, 3 (Delta 1), r = 0.5 (the 2 hardest of 4 tokens): B gains
  nothing over the baseline from 1 to 2 (RECL 1); A gains 1 - e^-0.5 from 1 to 2 and nothing
  from 2 to 3 (RECL 2)."""
  losses = {"A": {1: np.array([2.0, 3, 1, 4]), 2: np.array([1.5, 2, 1, 4]),
                  3: np.array([1.5, 2, 1, 4])},
            "B": {1: np.array([2.5, 3, 2, 3]), 2: np.array([2.5, 3, 2, 3]),
                  3: np.array([2.5, 3, 2, 3])}}
  result = context_length.relative_context(losses, r=0.5)
  assert result.recl == {"A": 2, "B": 1} and result.step == 1
  (c, c_long, unnormalised, gain), _ = result.gains["A"]
  assert (c, c_long) == (1, 2)
  assert gain == pytest.approx(1 - math.exp(-0.5))
  assert unnormalised == pytest.approx(math.exp(3) - math.exp(2.5))
  assert [row[3] for row in result.gains["B"]] == pytest.approx([0.0, 0.0])
  # Still gaining at the longest length: RECL is at least that length.
  growing = {"A": {1: np.array([3.0, 3]), 2: np.array([2.0, 2])},
             "B": {1: np.array([3.0, 3]), 2: np.array([3.0, 3])}}
  assert context_length.relative_context(growing, r=1.0).recl == {"A": 2, "B": 1}


@pytest.mark.parametrize("losses,r,says", [
    ({"A": {1: np.ones(4), 2: np.ones(4)}}, 0.1, "models must be a group of at least two"),
    ({"A": {1: np.ones(4), 2: np.ones(4)}, "B": {1: np.ones(4), 2: np.ones(4)}}, 0.0,
     "r must be in (0, 1]"),
    ({"A": {1: np.ones(4), 2: np.ones(4)}, "B": {1: np.ones(4), 2: np.ones(4)}}, 1.5,
     "r must be in (0, 1]"),
    ({"A": {1: np.ones(4), 2: np.ones(4)}, "B": {1: np.ones(3), 2: np.ones(3)}}, 0.1,
     "models must be scored on the same tokens"),
    ({"A": {1: np.ones(4), 2: np.ones(4), 4: np.ones(4)},
      "B": {1: np.ones(4), 2: np.ones(4), 4: np.ones(4)}}, 0.1,
     "context lengths must be evenly spaced")])
def test_recl_refuses_what_it_cannot_compare(losses, r, says):
  with pytest.raises(UserInputError) as raised:
    context_length.relative_context(losses, r=r)
  assert str(raised.value).startswith(says)


def test_models_of_different_vocabularies_are_refused():
  configs = {"a": XLNetConfig.preset("tiny", n_token=60), "b": XLNetConfig.preset("tiny")}
  with pytest.raises(UserInputError, match="models must be of one vocabulary"):
    context_length.check_same_vocabulary(configs)
