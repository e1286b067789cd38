"""The standard model checks (layer_checks.run_model_checks: config and .keras round trips,
XLA, mixed precision, serving outputs) for the backbone and every head."""

import numpy as np
import pytest
import tensorflow as tf

from layer_checks import run_model_checks
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import (XLNetClassifier, XLNetModel, XLNetMultipleChoice, XLNetPretrainer,
                      XLNetQuestionAnswering, XLNetTokenClassifier)

LENGTH, N_TOKEN = 10, 50


def pair_batch(rng):
  """Two left-padded A <sep> B <sep> <cls> rows: padding and three segment ids."""
  return padded_pair_batch(rng, 2, LENGTH, N_TOKEN, pad_lengths=[0, 3])


def two_stream_batch(rng):
  """A pair batch plus a factorization order's perm_mask and a target_mapping of 3 targets."""
  inputs = pair_batch(rng)
  perm_mask = np.zeros([2, LENGTH, LENGTH], np.float32)
  target_mapping = np.zeros([2, 3, LENGTH], np.float32)
  for row, targets in enumerate(([2, 5, 7], [4, 6, 8])):
    perm_mask[row, :, targets] = 1.0  # nobody sees a target ...
    for rank, position in enumerate(targets):
      perm_mask[row, position, targets[:rank]] = 0.0  # ... but the targets before it
      target_mapping[row, rank, position] = 1.0
  return dict(inputs, perm_mask=perm_mask, target_mapping=target_mapping)


def choices_batch(rng):
  """[B, C, T]: two questions of three options each."""
  rows = [pair_batch(rng) for _ in range(3)]
  return {key: np.stack([row[key] for row in rows], axis=1) for key in rows[0]}


def answer_batch(rng):
  inputs = pair_batch(rng)
  p_mask = (inputs["segment_ids"] != 0).astype(np.float32)  # answers in segment A only
  return dict(inputs, p_mask=p_mask, cls_index=np.full([2], LENGTH - 1, np.int32))


def _model(**overrides):
  return XLNetModel(tiny_config(n_token=N_TOKEN, **overrides))


MODELS = {
    "backbone": (lambda: _model(), two_stream_batch),
    "pretrainer perm": (lambda: XLNetPretrainer(_model()), two_stream_batch),
    "classifier": (lambda: XLNetClassifier(_model(), 3, summary_type="attn"), pair_batch),
    "regression": (lambda: XLNetClassifier(_model(), 1, summary_type="mean"), pair_batch),
    "multiple choice": (lambda: XLNetMultipleChoice(_model()), choices_batch),
    "question answering": (lambda: XLNetQuestionAnswering(_model(), start_n_top=2, end_n_top=2),
                           answer_batch),
    "token classifier": (lambda: XLNetTokenClassifier(_model(), 5), pair_batch),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_standard_model_checks(name, rng, tmp_path, policy):
  make_model, make_inputs = MODELS[name]
  inputs = make_inputs(rng)
  outputs = run_model_checks(make_model, inputs, tmp_path, policy)
  first = tf.nest.flatten(outputs)[0]
  assert first.shape[0] == inputs["input_ids"].shape[0]  # one result per example
  assert all(np.isfinite(np.asarray(value, np.float64)).all() for value in tf.nest.flatten(outputs))
