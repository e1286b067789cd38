"""The standard model checks (layer_checks.run_model_checks: config and .keras round trips,
XLA, mixed precision, serving outputs) for the backbone and every head."""

import numpy as np
import pytest
import tensorflow as tf

from layer_checks import run_model_checks
from head_batches import (N_TOKEN, answer_batch, choices_batch, pair_batch,
                          two_stream_batch)
from model_inputs import tiny_config
from xlnet_tf import (XLNetClassifier, XLNetModel, XLNetMultipleChoice, XLNetPretrainer,
                      XLNetQuestionAnswering, XLNetTokenClassifier)

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
