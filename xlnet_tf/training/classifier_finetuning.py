"""Fine-tuning XLNetClassifier on GLUE or generic files: data, training, evaluation, output.

Training uses Model.fit (one machine: one device or mirrored replicas), evaluating on the dev
set every `eval_every` steps and keeping the best weights by the task's metric.
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.config import XLNetConfig
from xlnet_tf.data.classification import (GLUE_TASKS, IMDB_LABELS, ReadReport,
                                          encode_examples, label_ids, read_generic, read_glue,
                                          read_imdb)
from xlnet_tf.data.tokenizer import XLNetTokenizer
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.metrics import classification_metrics
from xlnet_tf.model import XLNetModel
from xlnet_tf.training.optimization import create_optimizer


@dataclasses.dataclass
class TaskData:
  """Encoded splits of one task. labels None = regression."""
  name: str
  labels: Optional[List[str]]
  metric: str
  splits: Dict[str, Dict[str, np.ndarray]]
  reports: Dict[str, ReadReport]


def load_task(task_name: str, tokenizer: XLNetTokenizer, max_seq_length: int,
              data_dir: Optional[str] = None, files: Optional[Dict[str, str]] = None,
              labels: Optional[Sequence[str]] = None, regression: bool = False,
              splits: Sequence[str] = ("train", "dev"), mnli_mismatched: bool = False
              ) -> TaskData:
  """A GLUE task from `data_dir`, imdb (aclImdb), or `task_name='generic'` from `files`
  {split: path}. MNLI's dev/test are the matched sets unless `mnli_mismatched`."""
  if task_name in GLUE_TASKS:
    spec = GLUE_TASKS[task_name]
    task_labels, metric = spec.labels, spec.metric
    files_of = {"dev": "dev_matched", "test": "test_matched"}
    if mnli_mismatched:
      files_of = {"dev": "dev_mismatched", "test": "test_mismatched"}
    glue_split = (lambda split: files_of.get(split, split)) if task_name == "mnli" else (
        lambda split: split)
    read = lambda split, report: read_glue(task_name, data_dir, glue_split(split), report)
  elif task_name == "imdb":
    task_labels, metric = IMDB_LABELS, "accuracy"
    read = lambda split, report: read_imdb(data_dir, split, report)
  elif task_name == "generic":
    if not regression and not labels:
      raise ValueError("generic tasks need --labels (or --regression)")
    task_labels = None if regression else list(labels)
    metric = "pearson" if regression else "accuracy"
    read = lambda split, report: read_generic(files[split], report)
  else:
    raise ValueError(f"Unknown task {task_name!r}; GLUE tasks: {sorted(GLUE_TASKS)}, imdb or "
                     "generic")
  encoded, reports = {}, {}
  for split in splits:
    report = ReadReport()
    examples, values = label_ids(read(split, report), task_labels, report)
    if not examples:
      raise ValueError(f"{task_name} {split}: no usable example ({report.summary()})")
    features = encode_examples(tokenizer, examples, max_seq_length, report)
    features["label"] = values
    encoded[split], reports[split] = features, report
    logging.info("%s %s: %s", task_name, split, report.summary())
  return TaskData(task_name, None if task_labels is None else list(task_labels), metric,
                  encoded, reports)


def build_classifier(config: XLNetConfig, task: TaskData, summary_type: str = "last",
                     init_checkpoint: Optional[str] = None,
                     init_checkpoint_format: str = "own") -> XLNetClassifier:
  """A classifier whose backbone starts from `init_checkpoint` (pretrained weights)."""
  backbone = XLNetModel(config)
  if init_checkpoint:
    report = checkpoints.LOADERS[init_checkpoint_format](backbone, init_checkpoint)
    logging.info("Backbone from %s%s", init_checkpoint,
                 "" if report is None else f": {report.summary()}")
  num_classes = 1 if task.labels is None else len(task.labels)
  return XLNetClassifier(backbone, num_classes, summary_type, task_name=task.name)


def _dataset(features, batch_size, shuffle: bool, seed: int = 0, repeat: bool = False):
  inputs = {k: features[k] for k in ("input_ids", "segment_ids", "input_mask")}
  dataset = tf.data.Dataset.from_tensor_slices((inputs, features["label"]))
  if shuffle:
    dataset = dataset.shuffle(len(features["label"]), seed=seed, reshuffle_each_iteration=True)
  if repeat:
    dataset = dataset.repeat()
  return dataset.batch(batch_size, drop_remainder=repeat).prefetch(tf.data.AUTOTUNE)


class _KeepBest(keras.callbacks.Callback):
  """Evaluates on dev every epoch (= eval_every steps) and keeps the best weights."""

  def __init__(self, evaluate, metric, directory):
    super().__init__()
    self.evaluate, self.metric, self.directory = evaluate, metric, directory
    self.best, self.history = None, []

  def on_epoch_end(self, epoch, logs=None):
    result = self.evaluate()
    result["step"] = int(self.model.optimizer.iterations.numpy())
    self.history.append(result)
    logging.info("dev at step %d: %s", result["step"], result)
    if self.best is None or result[self.metric] > self.best[self.metric]:
      self.best = result
      if self.directory:
        checkpoints.save_pretrained(self.model, self.directory)


def predict_logits(model, features, batch_size: int) -> np.ndarray:
  return model.predict(_dataset(features, batch_size, shuffle=False).map(lambda x, y: x),
                       verbose=0)


def train_classifier(model: XLNetClassifier, task: TaskData, train_steps: int,
                     batch_size: int, learning_rate: float, warmup_steps: int = 0,
                     weight_decay: float = 0.0, lr_layer_decay_rate: float = 1.0,
                     eval_every: Optional[int] = None, best_dir: Optional[str] = None,
                     seed: int = 0, jit_compile: bool = True) -> Dict:
  """Fits for train_steps; returns the dev history and the best result (task metric)."""
  regression = task.labels is None
  loss = (keras.losses.MeanSquaredError() if regression else
          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.compile(optimizer=create_optimizer(model, learning_rate, train_steps, warmup_steps,
                                           weight_decay, lr_layer_decay_rate),
                loss=loss, jit_compile=jit_compile)
  eval_every = eval_every or train_steps
  metric = "pearson" if regression else task.metric
  dev = task.splits.get("dev")

  def evaluate():
    if dev is None:
      return {metric: float("nan")}
    return classification_metrics(dev["label"], predict_logits(model, dev, batch_size), metric)

  keep_best = _KeepBest(evaluate, metric, best_dir)
  model.fit(_dataset(task.splits["train"], batch_size, shuffle=True, seed=seed, repeat=True),
            steps_per_epoch=eval_every, epochs=max(train_steps // eval_every, 1), verbose=0,
            callbacks=[keep_best])
  return {"history": keep_best.history, "best": keep_best.best, "metric": metric}


def write_predictions(path: str, task: TaskData, logits: np.ndarray) -> None:
  """GLUE submission format: `index<TAB>prediction` with the task's label strings."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8") as handle:
    handle.write("index\tprediction\n")
    for index, row in enumerate(np.asarray(logits)):
      value = f"{float(row):.6f}" if task.labels is None else task.labels[int(np.argmax(row))]
      handle.write(f"{index}\t{value}\n")


def write_json(path: str, value) -> None:
  with open(path, "w", encoding="utf-8") as handle:
    json.dump(value, handle, indent=2, default=float)
