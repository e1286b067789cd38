"""Sequence-classification metrics (GLUE: accuracy, F1, MCC, Pearson, Spearman), in NumPy."""

import numpy as np


def accuracy(labels, predictions) -> float:
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  return float(np.mean(labels == predictions)) if labels.size else float("nan")


def binary_f1(labels, predictions, positive: int = 1) -> float:
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  true_positive = np.sum((predictions == positive) & (labels == positive))
  predicted, actual = np.sum(predictions == positive), np.sum(labels == positive)
  if true_positive == 0:
    return 0.0
  precision, recall = true_positive / predicted, true_positive / actual
  return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(labels, predictions) -> float:
  labels, predictions = np.asarray(labels) == 1, np.asarray(predictions) == 1
  tp = float(np.sum(labels & predictions))
  tn = float(np.sum(~labels & ~predictions))
  fp = float(np.sum(~labels & predictions))
  fn = float(np.sum(labels & ~predictions))
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  x, y = x - x.mean(), y - y.mean()
  denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
  return float(np.sum(x * y) / denominator) if denominator else 0.0


def _ranks(values):
  """1-based ranks, ties sharing their average rank."""
  values = np.asarray(values, np.float64)
  positional = np.empty(len(values))
  positional[np.argsort(values, kind="mergesort")] = np.arange(1, len(values) + 1)
  _, tie_group = np.unique(values, return_inverse=True)
  return (np.bincount(tie_group, positional) / np.bincount(tie_group))[tie_group]


def spearman(x, y) -> float:
  return pearson(_ranks(x), _ranks(y))


def classification_metrics(labels, logits, metric: str):
  """The task's metrics from labels and logits ([N, C], or [N] for regression)."""
  logits = np.asarray(logits)
  if logits.ndim == 1:
    return {"pearson": pearson(logits, labels), "spearman": spearman(logits, labels)}
  predictions = logits.argmax(-1)
  result = {"accuracy": accuracy(labels, predictions)}
  if metric == "f1":
    result["f1"] = binary_f1(labels, predictions)
  if metric == "mcc":
    result["mcc"] = matthews_corrcoef(labels, predictions)
  return result


# ---- multi-label: one sigmoid per label, a threshold per label --------------------------

DEFAULT_THRESHOLD = 0.5


def sigmoid(logits) -> np.ndarray:
  logits = np.asarray(logits, np.float64)
  return np.exp(-np.logaddexp(0.0, -logits))  # 1 / (1 + e^-x) without overflow


def _f1(true_positive, predicted, actual):
  """F1 = 2 TP / (predicted + actual), 0 where there is no true positive (as binary_f1)."""
  true_positive = np.asarray(true_positive, np.float64)
  total = np.asarray(predicted, np.float64) + np.asarray(actual, np.float64)
  return np.where(true_positive > 0, 2 * true_positive / np.maximum(total, 1), 0.0)


def multi_label_metrics(labels, logits, thresholds=None):
  """micro_f1 (TP, FP, FN summed over the labels first), macro_f1 (the labels' F1 averaged;
  a label with no true positive counts 0) and exact_match (rows whose whole label set is right)
  of multi-hot `labels` [N, C] against sigmoid(logits) [N, C] >= `thresholds` (a number or
  [C]; default 0.5)."""
  labels = np.asarray(labels) > 0.5
  predictions = multi_label_predictions(logits, thresholds)
  true_positive = np.sum(labels & predictions, axis=0)
  predicted, actual = predictions.sum(axis=0), labels.sum(axis=0)
  return {"micro_f1": float(_f1(true_positive.sum(), predicted.sum(), actual.sum())),
          "macro_f1": float(np.mean(_f1(true_positive, predicted, actual))),
          "exact_match": float(np.mean(np.all(labels == predictions, axis=1)))}


def multi_label_predictions(logits, thresholds=None) -> np.ndarray:
  """bool [N, C]: each label's probability at or over its threshold."""
  thresholds = DEFAULT_THRESHOLD if thresholds is None else np.asarray(thresholds, np.float64)
  return sigmoid(logits) >= thresholds


def tune_thresholds(labels, logits) -> np.ndarray:
  """float [C]: per label, the probability threshold that maximises that label's F1 on these
  (dev) examples: midway between the lowest probability predicted positive and the next one
  below. A label whose F1 cannot rise above 0 (no positive example, or none ranked usefully)
  keeps 0.5. Ties in F1: the highest threshold (fewest positives)."""
  labels = np.asarray(labels) > 0.5
  probabilities = sigmoid(logits)
  thresholds = np.full(labels.shape[1], DEFAULT_THRESHOLD)
  for label in range(labels.shape[1]):
    order = np.argsort(-probabilities[:, label], kind="stable")
    ranked, positive = probabilities[order, label], labels[order, label]
    # Cut after position k (predict the top k+1) only where the next probability is lower.
    cuts = np.flatnonzero(np.append(ranked[1:] < ranked[:-1], True))
    scores = _f1(np.cumsum(positive)[cuts], cuts + 1, positive.sum())
    if not len(cuts) or scores.max() <= 0:
      continue
    best = cuts[np.argmax(scores)]  # argmax: the first, i.e. the fewest positives
    below = ranked[best + 1] if best + 1 < len(ranked) else 0.0
    thresholds[label] = (ranked[best] + below) / 2
  return thresholds
