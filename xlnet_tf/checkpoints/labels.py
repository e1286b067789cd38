"""labels.json: the label of each output class of a saved classifier or tagger, in order.

Part of the saved-model format: a fine-tuning run writes it beside the kept weights; a
predict-only run, the export (which copies it into the SavedModel's assets) and serving read
it back to name the predicted classes.
"""

import os
from typing import List, Optional, Sequence

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json, write_json

LABELS_FILE = "labels.json"


def save_labels(directory: str, labels: Sequence[str]) -> str:
  """Writes the label order of a model's outputs to directory/labels.json; returns the path."""
  return write_json(os.path.join(directory, LABELS_FILE), list(labels))


def saved_labels(directory: str) -> Optional[List[str]]:
  """The label order saved by `save_labels` in `directory`, or None when there is none."""
  path = os.path.join(directory, LABELS_FILE)
  if not files.exists(path):
    return None
  labels = read_json(path, "a JSON list of label strings")
  if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
    raise UserInputError(f"{path}: expected a JSON list of label strings; got {labels!r}")
  return labels


THRESHOLDS_FILE = "thresholds.json"


def save_thresholds(directory: str, labels: Sequence[str], thresholds: Sequence[float]) -> str:
  """Writes a multi-label classifier's decision threshold of each label (its sigmoid
  probability at or over it: the label is predicted) to directory/thresholds.json, as
  {label: threshold} in the label order; returns the path."""
  return write_json(os.path.join(directory, THRESHOLDS_FILE),
                    {label: float(value) for label, value in zip(labels, thresholds)})


def saved_thresholds(directory: str, labels: Sequence[str]) -> Optional[List[float]]:
  """The thresholds `save_thresholds` wrote in `directory`, in the order of `labels`, or None
  when there are none; an error naming the file when they do not match the labels."""
  path = os.path.join(directory, THRESHOLDS_FILE)
  if not files.exists(path):
    return None
  stored = read_json(path, "a JSON object of a threshold for each label")
  if not (isinstance(stored, dict) and sorted(stored) == sorted(labels) and all(
      isinstance(value, (int, float)) and 0 <= value <= 1 for value in stored.values())):
    raise UserInputError(f"{path}: expected a JSON object of a threshold in [0, 1] for each of "
                         f"the labels {list(labels)}; got {stored!r}")
  return [float(stored[label]) for label in labels]


def save_head_labels(directory: str, head) -> None:
  """Writes `head`'s label names (labels.json) and, for a multi-label classifier, its decision
  thresholds (thresholds.json) into `directory`; nothing for a head without labels."""
  labels = getattr(head, "labels", None)
  if labels is None:
    return
  save_labels(directory, labels)
  if getattr(head, "multi_label", False):
    save_thresholds(directory, labels, head.thresholds)


def load_head_labels(directory: str, head) -> None:
  """Sets `head.labels` (and a multi-label classifier's `.thresholds`) from what
  save_head_labels wrote in `directory`; nothing changes where it holds none."""
  labels = saved_labels(directory)
  if labels is None:
    return
  thresholds = saved_thresholds(directory, labels)
  head.labels = labels
  if thresholds is not None:
    head.thresholds = thresholds
