import numpy as np
import pytest

from xlnet_tf.tasks.classification import metrics as metrics


def test_hand_computed_values():
  labels = [1, 0, 1, 1, 0, 0]
  predictions = [1, 0, 0, 1, 1, 0]
  # tp 2, tn 2, fp 1, fn 1
  assert metrics.accuracy(labels, predictions) == pytest.approx(4 / 6)
  assert metrics.binary_f1(labels, predictions) == pytest.approx(2 / 3)
  assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx((4 - 1) / 9)
  assert metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
  assert metrics.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
  # Spearman with ties: ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4]
  expected = np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1]
  assert metrics.spearman([10, 20, 20, 30], [1, 2, 3, 4]) == pytest.approx(expected)


def test_classification_metrics_by_task():
  logits = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
  result = metrics.classification_metrics([0, 1, 1], logits, "mcc")
  assert result["accuracy"] == pytest.approx(2 / 3) and "mcc" in result
  regression = metrics.classification_metrics([1.0, 2.0, 3.0], np.array([1.1, 1.9, 3.2]),
                                              "pearson")
  assert set(regression) == {"pearson", "spearman"} and regression["spearman"] == 1.0
