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
