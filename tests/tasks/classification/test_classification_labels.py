"""Label indices of classification examples (counted skips, regression floats) and the label
set inferred from a training file."""

import numpy as np
import pytest

from xlnet_tf.tasks.classification.labels import label_ids, training_labels
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.text.read_report import ReadReport


def test_labels_outside_the_set_are_counted_skips():
  report = ReadReport()
  examples = [TextExample("a", None, "pos", "f:2"), TextExample("b", None, "maybe", "f:3")]
  kept, values = label_ids(examples, ["neg", "pos"], report)
  assert len(kept) == 1 and values.tolist() == [1]
  assert report.skipped == {"label not in ['neg', 'pos']": ["f:3"]}
  kept, values = label_ids([TextExample("a", "b", "3.5", "f:1")], None, ReadReport())
  assert values.dtype == np.float32 and values[0] == 3.5


def test_training_labels_are_sorted_integers_by_value():
  def examples(*labels):
    return [TextExample("t", None, label, f"f:{i}") for i, label in enumerate(labels)]
  assert training_labels(examples("pos", "neg", None, "neutral", "neg"), "f") == [
      "neg", "neutral", "pos"]
  assert training_labels(examples("10", "2", "0", "-1"), "f") == ["-1", "0", "2", "10"]
  with pytest.raises(ValueError, match=r"train.csv: a classification task needs at least 2 "
                     r"labels in its training file; got \['pos'\]"):
    training_labels(examples("pos", "pos"), "train.csv")
