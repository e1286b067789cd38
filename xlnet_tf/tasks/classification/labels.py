"""The labels of a sequence-classification task: the set inferred from a training file (or
saved beside an earlier run's model, checkpoints.labels), and each example's label index, or
(multi-label) its label set as a multi-hot row.
"""

import math
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from xlnet_tf.checkpoints.labels import LABELS_FILE, saved_labels
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.text.read_report import ReadReport


def split_label_set(label: str, delimiter: str) -> List[str]:
  """The labels of a multi-label field ("sports|politics"), stripped, empty parts dropped."""
  return [part.strip() for part in label.split(delimiter) if part.strip()]


def training_labels(examples: Sequence[TextExample], path: str,
                    delimiter: Optional[str] = None) -> List[str]:
  """The label set of a training file, sorted (by value when every label is an integer, so
  "2" comes before "10"); at least two labels. With a (multi-label) `delimiter`, every label
  of every row's set."""
  labels = {part for example in examples if example.label is not None
            for part in (split_label_set(example.label, delimiter) if delimiter
                         else [example.label])}
  if all(label.lstrip("-").isdigit() for label in labels):
    ordered = sorted(labels, key=lambda label: (int(label), label))
  else:
    ordered = sorted(labels)
  if len(ordered) < 2:
    raise UserInputError(f"{path}: a classification task needs at least 2 labels in its training "
                         f"file; got {ordered}")
  return ordered


def label_ids(examples: Sequence[TextExample], labels: Optional[Sequence[str]],
              report: ReadReport, label_origin: Optional[str] = None,
              labels_required: bool = False) -> Tuple[List[TextExample], np.ndarray]:
  """Label indices; regression labels (labels None) must parse as finite floats (else a counted
  skip: a NaN or infinite target makes the loss NaN). A label outside
  `labels` is a counted skip, or an error when the set was inferred from data (`label_origin`
  says from where, e.g. the training file): the model could never predict it. An example
  without a label is a counted skip when `labels_required` (training, evaluation), else kept
  with the label -1 (NaN for regression), which nothing reads."""
  kept, values = [], []
  for example in examples:
    if example.label is None and labels_required:
      report.skip("no label", example.where)
    elif example.label is None:
      kept.append(example)
      values.append(-1 if labels is not None else np.nan)
    elif labels is None:
      try:
        value = float(example.label)
      except ValueError:
        report.skip(f"label {example.label!r} is not a number", example.where)
        continue
      if not math.isfinite(value):  # "nan", "inf": a loss no step can use
        report.skip(f"label {example.label!r} is not a finite number", example.where)
        continue
      values.append(value)
      kept.append(example)
    elif example.label in labels:
      values.append(labels.index(example.label))
      kept.append(example)
    elif label_origin:
      raise UserInputError(f"{example.where}: label {example.label!r} does not occur in "
                           f"{label_origin} (labels: {list(labels)})")
    else:
      report.skip(f"label not in {list(labels)}", example.where)
  dtype = np.float32 if labels is None else np.int32
  return kept, np.asarray(values, dtype)


def label_sets(examples: Sequence[TextExample], labels: Sequence[str], delimiter: str,
               report: ReadReport, label_origin: Optional[str] = None,
               labels_required: bool = False) -> Tuple[List[TextExample], np.ndarray]:
  """Multi-label: float32 [N, C] multi-hot rows of the label sets (`delimiter`-separated),
  with label_ids' conventions: a label outside `labels` is an error naming the file:line and
  the label when the set was inferred from data (`label_origin`), else a counted skip; no
  label: a counted skip when `labels_required`, else kept with a row of -1 (nothing reads it).
  A field of delimiters only ("|") is an empty label set: a counted skip (or kept with -1)."""
  index = {label: position for position, label in enumerate(labels)}
  kept, rows = [], []
  for example in examples:
    names = split_label_set(example.label, delimiter) if example.label is not None else []
    unknown = [name for name in names if name not in index]
    if not names:
      reason = "no label" if example.label is None else f"empty label set {example.label!r}"
      if labels_required:
        report.skip(reason, example.where)
        continue
      row = np.full(len(labels), -1.0, np.float32)
    elif unknown and label_origin:
      raise UserInputError(f"{example.where}: label {unknown[0]!r} does not occur in "
                           f"{label_origin} (labels: {list(labels)})")
    elif unknown:
      report.skip(f"label not in {list(labels)}", example.where)
      continue
    else:
      row = np.zeros(len(labels), np.float32)
      row[[index[name] for name in names]] = 1.0
    kept.append(example)
    rows.append(row)
  return kept, np.asarray(rows, np.float32).reshape(len(rows), len(labels))


def inferred_labels(files, examples, model_dir, delimiter: Optional[str] = None
                    ) -> Tuple[List[str], str]:
  """(labels, where from) of a generic task given no labels: the training file's, or the
  order saved beside the model of an earlier training run."""
  if "train" in examples:
    return (training_labels(examples["train"], files["train"], delimiter),
            f"the training file {files['train']}")
  saved = saved_labels(model_dir) if model_dir else None
  if saved is None:
    raise UserInputError(f"generic task without a training file: no --labels and no "
                         f"{LABELS_FILE} in {model_dir} (a training run writes it); "
                         "pass --labels, --regression or train first")
  return saved, os.path.join(model_dir, LABELS_FILE)
