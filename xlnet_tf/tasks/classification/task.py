"""Sequence classification and regression: a task's splits encoded in the original
`A <sep> B <sep> <cls>` layout (see text.packing), long documents as segments read with memory,
the task's data (TaskDataOptions and load_task, build_classifier, train_classifier,
predictions), and the task a run drives (ClassificationOptions, ClassificationTask).

Readers: classification_readers; labels: classification_labels; metrics:
classification_metrics.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from xlnet_tf.checkpoints.labels import save_thresholds, saved_thresholds
from xlnet_tf.config import XLNetConfig
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.tasks import finetuning, long_documents
from xlnet_tf.tasks.classification.labels import inferred_labels, label_ids, label_sets
from xlnet_tf.tasks.classification.metrics import (classification_metrics, multi_label_metrics,
                                                   multi_label_predictions, tune_thresholds)
from xlnet_tf.tasks.classification.readers import (GLUE_TASKS, IMDB_LABELS, TextExample,
                                                   read_generic, read_glue, read_imdb)
from xlnet_tf.tasks.pretrained_model import backbone_from
from xlnet_tf.tasks.task import FinetuningTask, TaskOptions
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
  return classifier_head(backbone_from(config, init_checkpoint, init_checkpoint_format), task,
                         summary_type, max_segments)


def classifier_head(backbone, task: TaskData, summary_type: str = "last",
                    max_segments: int = 1) -> XLNetClassifier:
  """The task's classifier over `backbone`: a class a label (one output for regression, a
  sigmoid a label for multi-label), pooled as `summary_type` says; its labels are the task's
  (saved with the weights: labels.json, for predict-only runs and exports)."""
  num_classes = 1 if task.labels is None else len(task.labels)
  extra = {"multi_label": True} if task.multi_label else {}
  model = XLNetClassifier(backbone, num_classes, summary_type, task_name=task.name,
                          max_segments=max_segments, **extra)
  if task.labels is not None:  # saved with the weights: best/ is whole at every save
    model.labels = list(task.labels)
  return model


def predict_logits(model, features, batch_size: int) -> np.ndarray:
  return finetuning.predict(model, features, batch_size)


def task_metric(task: TaskData) -> str:
  """The dev score the best weights are kept by: pearson for regression, else the task's."""
  return "pearson" if task.labels is None else task.metric


def training_batches(task: TaskData, options: finetuning.FinetuningOptions):
  """The train split's batches: a shuffle seeded by options' seed, repeated."""
  return finetuning.feature_dataset(task.splits["train"], options.batch_size,
                                    label_key="label", shuffle=True, seed=options.runtime.seed,
                                    repeat=True)


def dev_evaluator(model, task: TaskData, batch_size: int):
  """A function scoring `model` on the dev split by the task's metrics (None: no dev split)."""
  dev = task.splits.get("dev")
  if dev is None:
    return None
  return lambda: task_metrics(task, dev["label"], predict_logits(model, dev, batch_size))


def train_classifier(model: XLNetClassifier, task: TaskData,
                     options: finetuning.FinetuningOptions, best_dir: Optional[str] = None,
                     progress_stream=None) -> Dict:
  """Fine-tunes on the task's train split (finetuning.finetune), scoring dev by the task's
  metric; returns the dev history and the best result. The label order is saved with the
  best weights (the head's `labels`: labels.json), for predict-only runs and exports, and so
  are the task's tokenizer and packing (finetuning.attach_tokenizer). Multi-label: each
  label's threshold is then tuned on dev (0.5 without dev), saved beside the best weights
  (thresholds.json) and returned as result["thresholds"]."""
  if task.labels is not None:  # saved with the weights: best/ is whole at every save
    model.labels = list(task.labels)
  if task.tokenizer is not None:
    finetuning.attach_tokenizer(model, task.tokenizer, task.max_seq_length)
  result = finetuning.finetune(model, training_batches(task, options), options,
                               evaluate=dev_evaluator(model, task, options.batch_size),
                               metric=task_metric(task), best_dir=best_dir, loss=task_loss(task),
                               progress_stream=progress_stream)
  tune_label_thresholds(model, task, options.batch_size, best_dir, result)
  return result


def tune_label_thresholds(model: XLNetClassifier, task: TaskData, batch_size: int,
                          best_dir: Optional[str], result: Dict) -> None:
  """Multi-label, after training (the best weights restored): each label's threshold tuned on
  dev (0.5 each without dev), set on `model`, saved in `best_dir` in place of the 0.5 each
  saved with the weights, and added to the training `result` as result["thresholds"]."""
  if not task.multi_label:
    return
  dev = task.splits.get("dev")
  thresholds = tune_thresholds(dev["label"], predict_logits(model, dev, batch_size)
                               ) if dev else np.full(len(task.labels), 0.5)
  result["thresholds"] = dict(zip(task.labels, thresholds.tolist()))
  model.thresholds = thresholds.tolist()
  if best_dir:
    save_thresholds(best_dir, task.labels, thresholds)


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


# ---- the task a run drives (tasks.finetuning_run) ------------------------------------------

DEV_METRICS_FILE = "dev_metrics.json"
TEST_PREDICTIONS_SUFFIX = "_test_predictions.tsv"  # after the task's name


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassificationOptions(TaskOptions):
  """A classification or regression task's data and head (TaskOptions: the rest of the run).

  task_name: a GLUE task or imdb (their files in `data_dir`), or generic (`train_file`,
    `dev_file`, `test_file`: CSV, TSV or JSONL); None: generic when a file is given.
  labels, text_columns, regression, mnli_mismatched: as TaskDataOptions.
  multi_label: a set of labels a row, separated by `label_delimiter` (None: "|"; given, it
    needs multi_label).
  summary_type: the pooling (last, first, mean, attn).
  dropout, dropatt: the backbone's dropout rates (None: its config's).
  max_segments, mem_len: long documents, each text read as max_segments segments of
    max_seq_length tokens with mem_len positions of memory (tasks.long_documents); None: 1 and
    0, or without do_train, the training run's (best/).
  """
  task_name: Optional[str] = None
  data_dir: Optional[str] = None
  train_file: Optional[str] = None
  dev_file: Optional[str] = None
  test_file: Optional[str] = None
  labels: Optional[Tuple[str, ...]] = None
  text_columns: Optional[Tuple[str, ...]] = None
  regression: bool = False
  multi_label: bool = False
  label_delimiter: Optional[str] = None
  mnli_mismatched: bool = False
  summary_type: str = "last"
  dropout: Optional[float] = None
  dropatt: Optional[float] = None
  max_segments: Optional[int] = None
  mem_len: Optional[int] = None


class ClassificationTask(FinetuningTask):
  """Sequence classification, regression or multi-label classification of GLUE, IMDB or
  generic files (ClassificationOptions); dev scores by the task's metric, test predictions as
  `index<TAB>prediction`. The labels and a multi-label head's tuned thresholds are saved
  beside the best weights and read back by runs without training."""
  operational_fields = ("test_file",)

  def __init__(self, options: ClassificationOptions):
    super().__init__(options)
    self.name: Optional[str] = None                    # check's: the task's name
    self.segments: Optional[long_documents.LongDocuments] = None  # prepare's
    self.data: Optional[TaskData] = None               # load_data's

  @property
  def metric(self) -> str:
    return task_metric(self.data)

  def split_files(self) -> Dict[str, Optional[str]]:
    """{split: its file}: a generic task's files."""
    options = self.options
    return {"train": options.train_file, "dev": options.dev_file, "test": options.test_file}

  def check(self) -> None:
    options = self.options
    if options.label_delimiter is not None and not options.multi_label:
      raise UserInputError("--label_delimiter needs --multi_label (it separates a row's labels)")
    self.name = task_name_for(options.task_name, self.split_files())

  def config_overrides(self) -> Dict[str, object]:
    return {name: getattr(self.options, name) for name in ("dropout", "dropatt")
            if getattr(self.options, name) is not None}

  def prepare(self, config: XLNetConfig) -> XLNetConfig:
    options = self.options
    self.segments = long_documents.run_settings(
        options.max_segments, options.mem_len,
        trained_in=None if options.do_train else self.best_dir)
    long_documents.check_attention_size(self.segments, config, options.max_seq_length,
                                        options.finetuning.batch_size)
    return config.for_finetuning(mem_len=self.segments.mem_len)

  def data_options(self) -> TaskDataOptions:
    """How the task's files are read (a run without do_train finds the label order in
    best/)."""
    options = self.options
    return TaskDataOptions(
        self.name, data_dir=options.data_dir, files=self.split_files(), labels=options.labels,
        regression=options.regression, mnli_mismatched=options.mnli_mismatched,
        text_columns=options.text_columns, model_dir=self.best_dir,
        multi_label=options.multi_label, label_delimiter=(
            "|" if options.label_delimiter is None else options.label_delimiter),
        max_seq_length=options.max_seq_length, max_segments=self.segments.max_segments)

  def load_data(self, tokenizer) -> None:
    options = self.options
    # Training evaluates on dev when there is one (a generic task may have no dev file).
    has_dev = self.name != GENERIC_TASK or options.dev_file
    splits = [split for split, wanted in (
        ("train", options.do_train), ("dev", options.do_eval or (options.do_train and has_dev)),
        ("test", options.do_predict)) if wanted]
    self.data = data = load_task(self.data_options(), tokenizer, splits)
    for split, report in data.reports.items():
      print(f"{data.name} {split}: {report.summary()}")
    if data.labels is not None:
      print(f"{data.name}: {len(data.labels)} labels from {data.label_origin}: "
            f"{', '.join(data.labels)}")

  def train_examples(self) -> int:
    return len(self.data.splits["train"]["label"])

  def build_head(self, backbone) -> XLNetClassifier:
    return classifier_head(backbone, self.data, self.options.summary_type,
                           self.segments.max_segments)

  def train_dataset(self, options):
    return training_batches(self.data, options)

  def loss(self):
    return task_loss(self.data)

  def evaluator(self, model, batch_size: int):
    return dev_evaluator(model, self.data, batch_size)

  def train(self, model, options, progress_stream=None) -> Dict:
    result = super().train(model, options, progress_stream)
    tune_label_thresholds(model, self.data, options.batch_size, self.best_dir, result)
    return result

  def best_line(self, result: Dict) -> Optional[str]:
    best, metric = result["best"], result["metric"]
    return best and (f"Best dev {metric}: {best[metric]:.4f} at step {best['step']}; weights "
                     f"in {self.best_dir}")

  def write_outputs(self, model) -> Dict:
    options, data, outputs = self.options, self.data, {}
    batch_size = options.finetuning.batch_size
    thresholds = saved_thresholds(self.best_dir, data.labels) if data.multi_label else None
    if options.do_eval:
      logits = predict_logits(model, data.splits["dev"], batch_size)
      outputs["dev"] = metrics = task_metrics(data, data.splits["dev"]["label"], logits,
                                              thresholds)
      self.write_json(DEV_METRICS_FILE, metrics)
      print(f"dev: {metrics}")
    if options.do_predict:
      logits = predict_logits(model, data.splits["test"], batch_size)
      path = self.output_path(data.name + TEST_PREDICTIONS_SUFFIX)
      write_predictions(path, data, logits, thresholds)
      outputs["predictions"] = path
      print(f"Wrote {len(logits)} predictions to {path}")
    return outputs
