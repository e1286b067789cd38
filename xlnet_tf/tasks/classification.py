"""Sequence-classification data: readers for GLUE, IMDB and generic files, encoded in the
original `A <sep> B <sep> <cls>` layout (see text.packing); long documents as segments."""

import csv
import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging
import keras
import numpy as np

from xlnet_tf.errors import UserInputError
from xlnet_tf.config import XLNetConfig
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.model import XLNetModel
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.classification_metrics import classification_metrics
from xlnet_tf.tasks.text_files import read_utf8_lines
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.text.packing import SEG_A, SEG_CLS, SEG_PAD, pack_texts
from xlnet_tf.text.read_report import ReadReport


@dataclasses.dataclass
class TextExample:
  text_a: str
  text_b: Optional[str]
  label: Optional[str]  # None for unlabeled (test) data
  where: str            # file:line, for messages


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """Where a GLUE task keeps its columns; label None = regression."""
  name: str
  labels: Optional[Tuple[str, ...]]
  text_a: int
  text_b: Optional[int]
  label: int
  header: bool = True
  test_text_a: Optional[int] = None
  test_text_b: Optional[int] = None
  metric: str = "accuracy"


GLUE_TASKS = {
    "cola": TaskSpec("cola", ("0", "1"), 3, None, 1, header=False, test_text_a=1,
                     metric="mcc"),
    "sst-2": TaskSpec("sst-2", ("0", "1"), 0, None, 1, test_text_a=1),
    "mrpc": TaskSpec("mrpc", ("0", "1"), 3, 4, 0, test_text_a=3, test_text_b=4, metric="f1"),
    "sts-b": TaskSpec("sts-b", None, 7, 8, 9, test_text_a=7, test_text_b=8, metric="pearson"),
    "qqp": TaskSpec("qqp", ("0", "1"), 3, 4, 5, test_text_a=1, test_text_b=2, metric="f1"),
    "mnli": TaskSpec("mnli", ("contradiction", "entailment", "neutral"), 8, 9, -1,
                     test_text_a=8, test_text_b=9),
    "qnli": TaskSpec("qnli", ("entailment", "not_entailment"), 1, 2, -1, test_text_a=1,
                     test_text_b=2),
    "rte": TaskSpec("rte", ("entailment", "not_entailment"), 1, 2, -1, test_text_a=1,
                    test_text_b=2),
    "wnli": TaskSpec("wnli", ("0", "1"), 1, 2, -1, test_text_a=1, test_text_b=2),
}
# The file of each split; MNLI has matched and mismatched dev/test sets.
GLUE_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv",
              "dev_matched": "dev_matched.tsv", "dev_mismatched": "dev_mismatched.tsv",
              "test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"}


def read_glue(task: str, data_dir: str, split: str, report: ReadReport) -> List[TextExample]:
  spec = GLUE_TASKS[task]
  path = os.path.join(data_dir, GLUE_FILES[split])
  labeled = not split.startswith("test")
  text_a = spec.text_a if labeled else spec.test_text_a
  text_b = spec.text_b if labeled else spec.test_text_b
  examples = []
  rows = csv.reader(read_utf8_lines(path), delimiter="\t", quotechar=None)
  for number, row in enumerate(rows, start=1):
    where = f"{path}:{number}"
    if number == 1 and (spec.header or not labeled):
      continue
    needed = max(text_a, text_b or 0) + 1
    if labeled:  # a label at -1 is the column after the texts
      needed = max(needed, spec.label + 1 if spec.label >= 0 else needed + 1)
    if len(row) < needed:
      report.skip(f"row has {len(row)} columns, {spec.name} needs {needed}", where)
      continue
    label = label_text(row[spec.label]) if labeled else None
    examples.append(TextExample(row[text_a], row[text_b] if text_b is not None else None,
                                label, where))
  report.read += len(examples)
  return examples


def label_text(value) -> Optional[str]:
  """A label as read from a file; None when there is none (missing, null, empty)."""
  text = "" if value is None else str(value).strip()
  return text or None


IMDB_LABELS = ("neg", "pos")


def read_imdb(data_dir: str, split: str, report: ReadReport) -> List[TextExample]:
  """aclImdb/{train,test}/{pos,neg}/*.txt (the unlabeled 'unsup' folder is not read)."""
  folder = {"dev": "test"}.get(split, split)
  examples = []
  for label in IMDB_LABELS:
    directory = os.path.join(data_dir, folder, label)
    if not os.path.isdir(directory):
      raise FileNotFoundError(f"{directory}: missing (expected aclImdb/{folder}/{label}/*.txt)")
    for name in sorted(os.listdir(directory)):
      if not name.endswith(".txt"):
        continue
      path = os.path.join(directory, name)
      with open(path, encoding="utf-8", errors="strict") as handle:
        try:
          text = handle.read().strip().replace("<br />", " ")
        except UnicodeDecodeError:
          report.skip("not valid UTF-8", path)
          continue
      if not text:
        report.skip("empty review", path)
        continue
      examples.append(TextExample(text, None, label, path))
  report.read += len(examples)
  return examples


# The text columns of a generic file (CSV/TSV header names or JSON keys) when text_columns is
# not given: the first pair present, else the first single text (GLUE / SuperGLUE names).
TEXT_COLUMN_NAMES = (("text", "text_b"), ("text_a", "text_b"), ("sentence1", "sentence2"),
                     ("premise", "hypothesis"), ("question1", "question2"),
                     ("question", "sentence"), ("question", "passage"),
                     ("text", None), ("text_a", None), ("sentence", None))
LABEL_COLUMN = "label"


def find_text_columns(names: Sequence[str], where: str,
                      text_columns: Optional[Sequence[str]] = None
                      ) -> Tuple[str, Optional[str]]:
  """(text_a, text_b or None): `text_columns` (one or two names) when given, else the first of
  TEXT_COLUMN_NAMES that `names` hold."""
  if text_columns:
    missing = [name for name in text_columns if name not in names]
    if missing:
      raise UserInputError(f"{where}: no column {missing[0]!r} (text_columns); the columns are "
                           f"{list(names)}")
    return text_columns[0], text_columns[1] if len(text_columns) > 1 else None
  for text_a, text_b in TEXT_COLUMN_NAMES:
    if text_a in names and (text_b is None or text_b in names):
      return text_a, text_b
  known = sorted({name for pair in TEXT_COLUMN_NAMES for name in pair if name})
  raise UserInputError(f"{where}: no text column among {list(names)}; name one {known} or pass "
                       "text_columns (--text_columns=a[,b])")


def read_generic(path: str, report: ReadReport, text_columns: Optional[Sequence[str]] = None
                 ) -> List[TextExample]:
  """CSV/TSV with a header, or JSONL: the text column(s) (find_text_columns) and `label`
  (optional: unlabelled test data; an empty or null label is no label: see label_ids). An
  empty second text is a single-text example.

  A CSV/TSV row with more or fewer fields than the header is a counted skip (file:line of the
  row's first line); broken quoting (a quote never closed, text after a closing quote) is an
  error naming the line where the row starts, as a quote left open swallows the rows after it.
  """
  if text_columns is not None and not 1 <= len(text_columns) <= 2:
    raise UserInputError(f"text_columns names one or two columns (text_a[,text_b]); got "
                         f"{list(text_columns)}")
  examples = []

  def add(record, columns, where):
    text_a, text_b = columns
    second = record.get(text_b) if text_b else None
    examples.append(TextExample(str(record[text_a]), None if second in (None, "") else str(second),
                                label_text(record.get(LABEL_COLUMN)), where))

  if path.endswith(".jsonl"):
    for number, line in enumerate(read_utf8_lines(path), start=1):
      where = f"{path}:{number}"
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as error:
        raise UserInputError(f"{where}: not valid JSON ({error.msg})") from None
      if not isinstance(record, dict):
        raise UserInputError(f"{where}: a JSON object is expected")
      add(record, find_text_columns(list(record), where, text_columns), where)
  else:
    rows = _csv_rows(path, "\t" if path.endswith(".tsv") else ",", report)
    header = next(rows)
    columns = find_text_columns(header, f"{path}:1", text_columns)
    for fields, where in rows:
      add(dict(zip(header, fields)), columns, where)
  report.read += len(examples)
  return examples


def _csv_rows(path: str, delimiter: str, report: ReadReport):
  """The header of a CSV/TSV file, then (fields, "file:line") of each data row; blank lines
  are no rows, rows with another field count than the header are skipped (see read_generic)."""
  reader = csv.reader(read_utf8_lines(path), delimiter=delimiter, strict=True)
  header, start = None, 1
  try:
    for row in reader:
      first, last = start, reader.line_num
      start = last + 1
      if not row:
        continue
      if header is None:
        header = row
        yield header
      elif len(row) == len(header):
        yield row, f"{path}:{first}"
      else:
        spans = f"; one quoted field runs over lines {first}-{last}" if last > first else ""
        report.skip(f"fields not as in the header{spans}", f"{path}:{first}")
  except csv.Error as error:
    if "end of data" in str(error):
      raise UserInputError(f"{path}:{start}: a quote opened in this row is never closed (the "
                           "rest of the file would be one field)") from None
    raise UserInputError(f"{path}:{reader.line_num}: malformed quoting ({error}); a field that "
                         "starts with a quote must end with one (double the quotes inside)"
                         ) from None
  if header is None:
    raise UserInputError(f"{path}: empty file (a header line naming the columns is expected)")


def training_labels(examples: Sequence[TextExample], path: str) -> List[str]:
  """The label set of a training file, sorted (by value when every label is an integer, so
  "2" comes before "10"); at least two labels."""
  labels = {example.label for example in examples if example.label is not None}
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
  """Label indices; regression labels (labels None) must parse as floats. A label outside
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
        values.append(float(example.label))
        kept.append(example)
      except ValueError:
        report.skip(f"label {example.label!r} is not a number", example.where)
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


def encode_examples(tokenizer, examples: Sequence[TextExample], max_seq_length: int,
                    report: Optional[ReadReport] = None) -> Dict[str, np.ndarray]:
  """input_ids / segment_ids int32 and input_mask float32, [N, max_seq_length], left-padded
  (text.packing.pack_texts; truncations and empty texts reported with file:line)."""
  return pack_texts(tokenizer, [e.text_a for e in examples], [e.text_b for e in examples],
                    max_seq_length, report=report, where=[e.where for e in examples])


def encode_long_documents(tokenizer, texts: Sequence[str], segment_length: int,
                          num_segments: int) -> Dict[str, np.ndarray]:
  """[N, S, T] inputs for reading each text as S consecutive segments with memory.

  Each segment is `chunk <sep> <cls>` (T = segment_length); chunks are cut from the end of the
  text, so only the first segment is left-padded and the last one always ends the text. Text
  beyond S segments is dropped from the front (the most recent text is kept). Segment ids:
  chunk 0, <sep> 0, <cls> 2, padding 4.
  """
  chunk = segment_length - 2
  if chunk < 1:
    raise UserInputError(f"segment_length must be at least 3; got {segment_length}")
  sep, cls = tokenizer.special_ids.sep, tokenizer.special_ids.cls
  pad = max(tokenizer.special_ids.pad, 0)
  shape = [len(texts), num_segments, segment_length]
  input_ids = np.full(shape, pad, np.int32)
  segment_ids = np.full(shape, SEG_PAD, np.int32)
  input_mask = np.zeros(shape, np.float32)
  for row, tokens in enumerate(tokenizer.encode_batch(list(texts))):
    tokens = tokens[-chunk * num_segments:]
    for index in range(num_segments):
      end = len(tokens) - (num_segments - 1 - index) * chunk
      piece = tokens[max(end - chunk, 0):max(end, 0)] + [sep, cls]
      if len(piece) == 2 and index < num_segments - 1:
        continue  # nothing of the text here: an all-padding segment
      start = segment_length - len(piece)
      input_ids[row, index, start:] = piece
      segment_ids[row, index, start:] = [SEG_A] * (len(piece) - 1) + [SEG_CLS]
      input_mask[row, index, start:] = 1.0
  return {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": input_mask}


# ---- the task: splits, model, training, predictions -----------------------------------

@dataclasses.dataclass
class TaskData:
  """Encoded splits of one task. labels None = regression; label_origin: where the label
  order came from (for the user: the task, --labels, a training file, a labels.json)."""
  name: str
  labels: Optional[List[str]]
  metric: str
  splits: Dict[str, Dict[str, np.ndarray]]
  reports: Dict[str, ReadReport]
  label_origin: Optional[str] = None


# The splits whose every example needs a label, and what reads them (for messages).
LABELED_SPLITS = {"train": "training", "dev": "evaluation (--do_eval, or --do_train with dev data)"}


def load_task(task_name: str, tokenizer: XLNetTokenizer, max_seq_length: int,
              data_dir: Optional[str] = None, files: Optional[Dict[str, str]] = None,
              labels: Optional[Sequence[str]] = None, regression: bool = False,
              splits: Sequence[str] = ("train", "dev"), mnli_mismatched: bool = False,
              text_columns: Optional[Sequence[str]] = None, model_dir: Optional[str] = None
              ) -> TaskData:
  """A GLUE task from `data_dir`, imdb (aclImdb), or `task_name='generic'` from `files`
  {split: path}. MNLI's dev/test are the matched sets unless `mnli_mismatched`.

  A generic classification task without `labels` takes the training file's (training_labels),
  or, without a train split, the order a training run saved in `model_dir`
  (finetuning.saved_labels); a dev/test label outside an inferred set is an error.
  """
  label_origin, inferred_from = f"the {task_name} task", None
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
    task_labels = None if regression or not labels else list(labels)
    label_origin = "--labels"
    metric = "pearson" if regression else "accuracy"
    missing = [split for split in splits if not (files or {}).get(split)]
    if missing:
      raise UserInputError(f"generic task: no file for the {missing[0]} split "
                           f"(--{missing[0]}_file)")
    read = lambda split, report: read_generic(files[split], report, text_columns)
  else:
    raise UserInputError(f"Unknown task {task_name!r}; GLUE tasks: {sorted(GLUE_TASKS)}, imdb or "
                         "generic")
  reports = {split: ReadReport() for split in splits}
  examples = {split: read(split, reports[split]) for split in splits}
  for split in (split for split in splits if split in LABELED_SPLITS):
    if examples[split] and all(example.label is None for example in examples[split]):
      source = examples[split][0].where.rsplit(":", 1)[0]
      raise UserInputError(f"{source}: no row has a label; {LABELED_SPLITS[split]} needs one in "
                           "every row (data without labels is read for --do_predict only)")
  if task_name == "generic" and not regression and not labels:
    task_labels, inferred_from = _inferred_labels(files, examples, model_dir)
    label_origin = inferred_from
  encoded = {}
  for split in splits:
    report = reports[split]
    kept, values = label_ids(examples[split], task_labels, report, inferred_from,
                             labels_required=split in LABELED_SPLITS)
    report.read = len(kept)  # the examples used: label_ids may have skipped some
    if not kept:
      raise UserInputError(f"{task_name} {split}: no usable example ({report.summary()})")
    features = encode_examples(tokenizer, kept, max_seq_length, report)
    features["label"] = values
    encoded[split] = features
  return TaskData(task_name, None if task_labels is None else list(task_labels), metric,
                  encoded, reports, None if task_labels is None else label_origin)


def _inferred_labels(files, examples, model_dir) -> Tuple[List[str], str]:
  """(labels, where from) of a generic task given no labels: the training file's, or the
  order saved beside the model of an earlier training run."""
  if "train" in examples:
    return (training_labels(examples["train"], files["train"]),
            f"the training file {files['train']}")
  saved = finetuning.saved_labels(model_dir) if model_dir else None
  if saved is None:
    raise UserInputError(f"generic task without a training file: no --labels and no "
                         f"{finetuning.LABELS_FILE} in {model_dir} (a training run writes it); "
                         "pass --labels, --regression or train first")
  return saved, os.path.join(model_dir, finetuning.LABELS_FILE)


def build_classifier(config: XLNetConfig, task: TaskData, summary_type: str = "last",
                     init_checkpoint: Optional[str] = None,
                     init_checkpoint_format: str = "own") -> XLNetClassifier:
  """A classifier whose backbone starts from `init_checkpoint` (pretrained weights)."""
  backbone = XLNetModel(config)
  if init_checkpoint:
    report = finetuning.load_pretrained_weights(backbone, init_checkpoint,
                                                init_checkpoint_format)
    logging.info("Backbone from %s%s", init_checkpoint,
                 "" if report is None else f": {report.summary()}")
  num_classes = 1 if task.labels is None else len(task.labels)
  return XLNetClassifier(backbone, num_classes, summary_type, task_name=task.name)


def predict_logits(model, features, batch_size: int) -> np.ndarray:
  return finetuning.predict(model, features, batch_size)


def train_classifier(model: XLNetClassifier, task: TaskData,
                     options: finetuning.FinetuningOptions, best_dir: Optional[str] = None
                     ) -> Dict:
  """Fine-tunes on the task's train split (finetuning.finetune), scoring dev by the task's
  metric; returns the dev history and the best result. The label order is saved beside the
  best weights (finetuning.save_labels), for predict-only runs and exports."""
  regression = task.labels is None
  loss = (keras.losses.MeanSquaredError() if regression else
          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  metric = "pearson" if regression else task.metric
  dev = task.splits.get("dev")

  def evaluate():
    return classification_metrics(dev["label"], predict_logits(model, dev, options.batch_size),
                                  metric)

  train = finetuning.feature_dataset(task.splits["train"], options.batch_size,
                                     label_key="label", shuffle=True, seed=options.seed,
                                     repeat=True)
  result = finetuning.finetune(model, train, options, evaluate=evaluate if dev else None,
                               metric=metric, best_dir=best_dir, loss=loss)
  if best_dir and not regression:  # after training: a failed run leaves no best_dir behind
    finetuning.save_labels(best_dir, task.labels)
  return result


def write_predictions(path: str, task: TaskData, logits: np.ndarray) -> None:
  """GLUE submission format: `index<TAB>prediction` with the task's label strings."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8") as handle:
    handle.write("index\tprediction\n")
    for index, row in enumerate(np.asarray(logits)):
      value = f"{float(row):.6f}" if task.labels is None else task.labels[int(np.argmax(row))]
      handle.write(f"{index}\t{value}\n")
