"""Every head writes and reads its weights under original-style names, losslessly."""

import keras
import numpy as np
import pytest

from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetModel, checkpoints
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier

HEADS = {
    "classifier_attn": lambda: XLNetClassifier(XLNetModel(tiny_config()), 3, "attn", "mnli"),
    "regression": lambda: XLNetClassifier(XLNetModel(tiny_config()), 1, task_name="sts-b"),
    "multiple_choice": lambda: XLNetMultipleChoice(XLNetModel(tiny_config())),
    "question_answering": lambda: XLNetQuestionAnswering(XLNetModel(tiny_config()), 3, 2),
    "token_classifier": lambda: XLNetTokenClassifier(XLNetModel(tiny_config()), 5),
    "pretrainer": lambda: XLNetPretrainer(XLNetModel(tiny_config())),
}


def inputs_for(name, rng):
  batch = padded_pair_batch(rng, 2, 8, 50, pad_lengths=[0, 2])
  if name == "multiple_choice":
    return {k: np.stack([v] * 4, axis=1) for k, v in batch.items()}
  if name == "question_answering":
    return dict(batch, p_mask=1.0 - batch["input_mask"], cls_index=np.array([7, 7]))
  if name == "pretrainer":
    mapping = np.zeros([2, 2, 8], np.float32)
    mapping[:, 0, 3] = mapping[:, 1, 5] = 1.0
    return dict(batch, perm_mask=np.zeros([2, 8, 8], np.float32), target_mapping=mapping)
  return batch


@pytest.mark.parametrize("name", sorted(HEADS))
def test_original_names_round_trip(name, tmp_path, rng):
  head = HEADS[name]()
  randomize_weights(head, 3)
  prefix = checkpoints.save_original_checkpoint(head, str(tmp_path / "head.ckpt"))
  fresh = HEADS[name]()
  report = checkpoints.load_original_checkpoint(fresh, prefix)
  assert not report.skipped
  inputs = inputs_for(name, rng)
  ours, theirs = head(inputs), fresh(inputs)
  for a, b in zip(keras.tree.flatten(ours), keras.tree.flatten(theirs)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
