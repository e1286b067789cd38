"""Sequence classification and regression: a task's splits encoded in the original
`A <sep> B <sep> <cls>` layout (see text.packing), long documents as segments read with memory,
and the task itself (TaskDataOptions and load_task, build_classifier, train_classifier,
predictions).

Readers: classification_readers; labels: classification_labels; metrics:
classification_metrics.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

from absl import logging
import keras
import numpy as np

from xlnet_tf.checkpoints.labels import save_thresholds
from xlnet_tf.config import XLNetConfig
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.classification.labels import inferred_labels, label_ids, label_sets
from xlnet_tf.tasks.classification.metrics import (classification_metrics, multi_label_metrics,
                                                   multi_label_predictions, tune_thresholds)
from xlnet_tf.tasks.classification.readers import (GLUE_TASKS, IMDB_LABELS, TextExample,
                                                   read_generic, read_glue, read_imdb)
from xlnet_tf.text.packing import pack_texts
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.text.tokenizer import XLNetTokenizer


def encode_examples(tokenizer, examples: Sequence[TextExample], max_seq_length: int,
                    report: Optional[ReadReport] = None,
                    max_segments: int = 1) -> Dict[str, np.ndarray]:
  """input_ids / segment_ids int32 and input_mask float32, [N, max_seq_length], left-padded
  (text.packing.pack_texts; truncations and empty texts reported with file:line);
  [N, max_segments, max_seq_length] for long documents (max_segments > 1)."""
  return pack_texts(tokenizer, [e.text_a for e in examples], [e.text_b for e in examples],
                    max_seq_length, report=report, where=[e.where for e in examples],
                    num_segments=max_segments)


def encode_long_documents(tokenizer, texts: Sequence[str], segment_length: int,
                          num_segments: int) -> Dict[str, np.ndarray]:
  """[N, S, T] inputs for reading each text as S consecutive segments of T = segment_length
  with memory: the layout of text.packing (the text packed into S * T positions, left-padded,
  `<sep> <cls>` at the end, cut into S segments)."""
  return pack_texts(tokenizer, texts, None, segment_length, num_segments=num_segments)


# ---- the task: splits, model, training, predictions -----------------------------------

@dataclasses.dataclass
class TaskData:
  """Encoded splits of one task. labels None = regression; label_origin: where the label
  order came from (for the user: the task, --labels, a training file, a labels.json).
  multi_label: each example has a set of labels (split "label" is multi-hot [N, C]), written
  `label_delimiter`-separated in its files. tokenizer, max_seq_length: what the texts were
  encoded with (train_classifier saves them with the best weights)."""
  name: str
  labels: Optional[List[str]]
  metric: str
  splits: Dict[str, Dict[str, np.ndarray]]
  reports: Dict[str, ReadReport]
  label_origin: Optional[str] = None
  multi_label: bool = False
  label_delimiter: Optional[str] = None
  tokenizer: Optional[XLNetTokenizer] = None
  max_seq_length: Optional[int] = None


# A user's own files, one a split (CSV, TSV or JSONL), their columns found by header name.
GENERIC_TASK = "generic"


def task_name_for(name: Optional[str], files: Dict[str, Optional[str]]) -> str:
  """The task `name` names; without a name, the generic task when the user's own `files`
  ({split: path}) are given. Neither: a user error."""
  if name:
    return name
  if any(files.values()):
    return GENERIC_TASK
  raise UserInputError("--task_name is required without --train_file, --dev_file or "
                       f"--test_file: a GLUE task or imdb (with --data_dir), or {GENERIC_TASK}")


# The splits whose every example needs a label, and what reads them (for messages).
LABELED_SPLITS = {"train": "training", "dev": "evaluation (--do_eval, or --do_train with dev data)"}


@dataclasses.dataclass(frozen=True)
class TaskDataOptions:
  """Where a task's files are and how they are read and encoded (run/classifier.py's flags).

  name: a GLUE task (its files in `data_dir`), imdb (aclImdb in `data_dir`) or generic (one file
    per split in `files`, {split: path}; its text columns found by header name unless
    `text_columns` names them).
  labels: a generic task's label order; without it, the training file's (sorted), or, without
    a train split, the order a training run saved in `model_dir` (checkpoints.labels); a
    dev/test label outside an inferred set is an error. `regression`: real-valued labels.
  mnli_mismatched: MNLI's dev/test are the mismatched sets (default: the matched ones).
  multi_label: a generic task whose label field holds a `label_delimiter`-separated set.
  max_seq_length: tokens per sequence; `max_segments` > 1 encodes each text as
    [max_segments, max_seq_length] segments of a long document.
  """
  name: str
  data_dir: Optional[str] = None
  files: Dict[str, str] = dataclasses.field(default_factory=dict)
  labels: Optional[Sequence[str]] = None
  regression: bool = False
  mnli_mismatched: bool = False
  text_columns: Optional[Sequence[str]] = None
  model_dir: Optional[str] = None
  multi_label: bool = False
  label_delimiter: str = "|"
  max_seq_length: int = 128
  max_segments: int = 1


def load_task(options: TaskDataOptions, tokenizer: XLNetTokenizer,
              splits: Sequence[str] = ("train", "dev")) -> TaskData:
  """The task's `splits`, read and encoded as `options` say (TaskDataOptions)."""
  check_multi_label(options)
  task_labels, metric, label_origin, read = _task_reader(options, splits)
  delimiter = options.label_delimiter if options.multi_label else None
  metric = MULTI_LABEL_METRIC if options.multi_label else metric
  inferred_from = None
  reports = {split: ReadReport() for split in splits}
  examples = {split: read(split, reports[split]) for split in splits}
  for split in (split for split in splits if split in LABELED_SPLITS):
    if examples[split] and all(example.label is None for example in examples[split]):
      source = examples[split][0].where.rsplit(":", 1)[0]
      raise UserInputError(f"{source}: no row has a label; {LABELED_SPLITS[split]} needs one in "
                           "every row (data without labels is read for --do_predict only)")
  if options.name == GENERIC_TASK and not options.regression and not options.labels:
    task_labels, inferred_from = inferred_labels(options.files, examples, options.model_dir,
                                                 delimiter)
    label_origin = inferred_from
  encoded = {}
  for split in splits:
    report = reports[split]
    required = split in LABELED_SPLITS
    if options.multi_label:
      kept, values = label_sets(examples[split], task_labels, delimiter, report, inferred_from,
                                labels_required=required)
    else:
      kept, values = label_ids(examples[split], task_labels, report, inferred_from,
                               labels_required=required)
    report.read = len(kept)  # the examples used: label_ids may have skipped some
    if not kept:
      raise UserInputError(f"{options.name} {split}: no usable example ({report.summary()})")
    features = encode_examples(tokenizer, kept, options.max_seq_length, report,
                               options.max_segments)
    features["label"] = values
    encoded[split] = features
  return TaskData(options.name, None if task_labels is None else list(task_labels), metric,
                  encoded, reports, None if task_labels is None else label_origin,
                  options.multi_label, delimiter, tokenizer, options.max_seq_length)


MULTI_LABEL_METRIC = "micro_f1"  # what the best weights are kept by


def check_multi_label(options: TaskDataOptions) -> None:
  """Multi-label is a generic classification task with a non-empty delimiter."""
  if not options.multi_label:
    return
  if options.name != GENERIC_TASK:
    raise UserInputError(f"--multi_label reads generic files (--task_name=generic); the "
                         f"{options.name} task has one label per example")
  if options.regression:
    raise UserInputError("--multi_label and --regression exclude each other (multi-label "
                         "classification predicts a set of labels, regression a number)")
  if not options.label_delimiter:
    raise UserInputError("--label_delimiter='': must be the separator of the labels in a row's "
                         "label field, e.g. '|'")


def _task_reader(options: TaskDataOptions, splits: Sequence[str]):
  """(labels or None, metric, where the labels come from, read(split, report) -> examples)
  of a task; a generic task's labels None here may still be inferred from its files."""
  name, data_dir, files = options.name, options.data_dir, options.files
  label_origin = f"the {name} task"
  if name in GLUE_TASKS:
    glue_task = GLUE_TASKS[name]
    task_labels, metric = glue_task.labels, glue_task.metric
    files_of = {"dev": "dev_matched", "test": "test_matched"}
    if options.mnli_mismatched:
      files_of = {"dev": "dev_mismatched", "test": "test_mismatched"}
    glue_split = (lambda split: files_of.get(split, split)) if name == "mnli" else (
        lambda split: split)
    read = lambda split, report: read_glue(name, data_dir, glue_split(split), report)
  elif name == "imdb":
    task_labels, metric = IMDB_LABELS, "accuracy"
    read = lambda split, report: read_imdb(data_dir, split, report)
  elif name == GENERIC_TASK:
    task_labels = None if options.regression or not options.labels else list(options.labels)
    label_origin = "--labels"
    metric = "pearson" if options.regression else "accuracy"
    missing = [split for split in splits if not (files or {}).get(split)]
    if missing:
      raise UserInputError(f"generic task: no file for the {missing[0]} split "
                           f"(--{missing[0]}_file)")
    read = lambda split, report: read_generic(files[split], report, options.text_columns)
  else:
    raise UserInputError(f"Unknown task {name!r}; GLUE tasks: {sorted(GLUE_TASKS)}, imdb or "
                         "generic")
  return task_labels, metric, label_origin, read


def build_classifier(config: XLNetConfig, task: TaskData, summary_type: str = "last",
                     init_checkpoint: Optional[str] = None,
                     init_checkpoint_format: str = "own", max_segments: int = 1
                     ) -> XLNetClassifier:
  """A classifier whose backbone starts from `init_checkpoint` (pretrained weights);
  `max_segments` > 1 reads long documents (config.mem_len > 0)."""
  backbone = XLNetModel(config)
  if init_checkpoint:
    report = finetuning.load_pretrained_weights(backbone, init_checkpoint,
                                                init_checkpoint_format)
    logging.info("Backbone from %s%s", init_checkpoint,
                 "" if report is None else f": {report.summary()}")
  num_classes = 1 if task.labels is None else len(task.labels)
  extra = {"multi_label": True} if task.multi_label else {}
  return XLNetClassifier(backbone, num_classes, summary_type, task_name=task.name,
                         max_segments=max_segments, **extra)


def predict_logits(model, features, batch_size: int) -> np.ndarray:
  return finetuning.predict(model, features, batch_size)


def train_classifier(model: XLNetClassifier, task: TaskData,
                     options: finetuning.FinetuningOptions, best_dir: Optional[str] = None
                     ) -> Dict:
  """Fine-tunes on the task's train split (finetuning.finetune), scoring dev by the task's
  metric; returns the dev history and the best result. The label order is saved with the
  best weights (the head's `labels`: labels.json), for predict-only runs and exports, and so
  are the task's tokenizer and packing (finetuning.attach_tokenizer)."""
  regression = task.labels is None
  metric = "pearson" if regression else task.metric
  dev = task.splits.get("dev")

  def evaluate():
    return task_metrics(task, dev["label"], predict_logits(model, dev, options.batch_size))

  train = finetuning.feature_dataset(task.splits["train"], options.batch_size,
                                     label_key="label", shuffle=True, seed=options.runtime.seed,
                                     repeat=True)
  if not regression:  # saved with the weights: best/ is whole at every save
    model.labels = list(task.labels)
  if task.tokenizer is not None:
    finetuning.attach_tokenizer(model, task.tokenizer, task.max_seq_length)
  result = finetuning.finetune(model, train, options, evaluate=evaluate if dev else None,
                               metric=metric, best_dir=best_dir, loss=task_loss(task))
  if task.multi_label:  # on the best weights, now restored; 0.5 each without dev
    thresholds = tune_thresholds(dev["label"], predict_logits(model, dev, options.batch_size)
                                 ) if dev else np.full(len(task.labels), 0.5)
    result["thresholds"] = dict(zip(task.labels, thresholds.tolist()))
    model.thresholds = thresholds.tolist()
    if best_dir:  # the tuned ones in place of the 0.5 each saved with the weights
      save_thresholds(best_dir, task.labels, thresholds)
  return result


def task_loss(task: TaskData) -> keras.losses.Loss:
  """The training loss of (labels, logits): squared error (regression), softmax cross-entropy
  over the classes, or (multi-label) binary cross-entropy of each label's sigmoid, averaged
  over the labels and the batch."""
  if task.labels is None:
    return keras.losses.MeanSquaredError()
  if task.multi_label:
    return keras.losses.BinaryCrossentropy(from_logits=True)
  return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def task_metrics(task: TaskData, labels, logits, thresholds=None) -> Dict[str, float]:
  """The task's dev scores; multi-label at `thresholds` ([C], default 0.5 each)."""
  if task.multi_label:
    return multi_label_metrics(labels, logits, thresholds)
  return classification_metrics(labels, logits, "pearson" if task.labels is None else task.metric)


def write_predictions(path: str, task: TaskData, logits: np.ndarray, thresholds=None) -> None:
  """GLUE submission format: `index<TAB>prediction` with the task's label strings; multi-label:
  the labels over their `thresholds`, in the label order, joined by the task's delimiter
  (empty when none is)."""
  files.makedirs(os.path.dirname(path) or ".")
  chosen = multi_label_predictions(logits, thresholds) if task.multi_label else None
  lines = ["index\tprediction\n"]
  for index, row in enumerate(np.asarray(logits)):
    if task.multi_label:
      value = task.label_delimiter.join(np.asarray(task.labels)[chosen[index]])
    else:
      value = f"{float(row):.6f}" if task.labels is None else task.labels[int(np.argmax(row))]
    lines.append(f"{index}\t{value}\n")
  files.write_text(path, "".join(lines))  # whole or not at all
