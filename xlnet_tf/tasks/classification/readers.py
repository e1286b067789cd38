"""Sequence-classification readers: GLUE's TSV files, IMDB's folders and generic CSV / TSV /
JSONL files (text columns found by header name), each row a TextExample with its file:line.

Malformed rows are counted skips in a ReadReport; a file that cannot be read as its format
says is an error naming the file and line.
"""

import csv
import dataclasses
import json
import os
from typing import List, Optional, Sequence, Tuple

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.tasks.text_files import read_utf8_lines
from xlnet_tf.text.read_report import ReadReport


@dataclasses.dataclass
class TextExample:
  text_a: str
  text_b: Optional[str]
  label: Optional[str]  # None for unlabeled (test) data
  where: str            # file:line, for messages


@dataclasses.dataclass(frozen=True)
class GlueTask:
  """A GLUE task: its labels (None: regression), the columns of its files, its metric."""
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
    "cola": GlueTask("cola", ("0", "1"), 3, None, 1, header=False, test_text_a=1,
                     metric="mcc"),
    "sst-2": GlueTask("sst-2", ("0", "1"), 0, None, 1, test_text_a=1),
    "mrpc": GlueTask("mrpc", ("0", "1"), 3, 4, 0, test_text_a=3, test_text_b=4, metric="f1"),
    "sts-b": GlueTask("sts-b", None, 7, 8, 9, test_text_a=7, test_text_b=8, metric="pearson"),
    "qqp": GlueTask("qqp", ("0", "1"), 3, 4, 5, test_text_a=1, test_text_b=2, metric="f1"),
    "mnli": GlueTask("mnli", ("contradiction", "entailment", "neutral"), 8, 9, -1,
                     test_text_a=8, test_text_b=9),
    "qnli": GlueTask("qnli", ("entailment", "not_entailment"), 1, 2, -1, test_text_a=1,
                     test_text_b=2),
    "rte": GlueTask("rte", ("entailment", "not_entailment"), 1, 2, -1, test_text_a=1,
                    test_text_b=2),
    "wnli": GlueTask("wnli", ("0", "1"), 1, 2, -1, test_text_a=1, test_text_b=2),
}
# The file of each split; MNLI has matched and mismatched dev/test sets.
GLUE_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv",
              "dev_matched": "dev_matched.tsv", "dev_mismatched": "dev_mismatched.tsv",
              "test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"}


def read_glue(task: str, data_dir: str, split: str, report: ReadReport) -> List[TextExample]:
  glue_task = GLUE_TASKS[task]
  path = os.path.join(data_dir, GLUE_FILES[split])
  labeled = not split.startswith("test")
  text_a = glue_task.text_a if labeled else glue_task.test_text_a
  text_b = glue_task.text_b if labeled else glue_task.test_text_b
  examples = []
  allow_long_fields()
  rows = csv.reader(read_utf8_lines(path), delimiter="\t", quotechar=None)
  for number, row in enumerate(rows, start=1):
    where = f"{path}:{number}"
    if number == 1 and (glue_task.header or not labeled):
      continue
    needed = max(text_a, text_b or 0) + 1
    if labeled:  # a label at -1 is the column after the texts
      needed = max(needed, glue_task.label + 1 if glue_task.label >= 0 else needed + 1)
    if len(row) < needed:
      report.skip(f"row has {len(row)} columns, {glue_task.name} needs {needed}", where)
      continue
    label = label_text(row[glue_task.label]) if labeled else None
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
    if not files.isdir(directory):
      raise FileNotFoundError(f"{directory}: missing (expected aclImdb/{folder}/{label}/*.txt)")
    for name in sorted(files.listdir(directory)):
      if not name.endswith(".txt"):
        continue
      path = os.path.join(directory, name)
      with files.open_file(path, encoding="utf-8", errors="strict") as handle:
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


_JSON_KINDS = {list: "a JSON array", int: "a JSON number", float: "a JSON number",
               str: "a JSON string", bool: "a JSON true/false", type(None): "JSON null"}


def read_generic(path: str, report: ReadReport, text_columns: Optional[Sequence[str]] = None
                 ) -> List[TextExample]:
  """CSV/TSV with a header, or JSONL: the text column(s) (find_text_columns) and `label`
  (optional: unlabelled test data; an empty or null label is no label: see label_ids). An
  empty second text is a single-text example.

  A CSV/TSV row with more or fewer fields than the header is a counted skip (file:line of the
  row's first line); broken quoting (a quote never closed, text after a closing quote) is an
  error naming the line where the row starts, as a quote left open swallows the rows after it.
  A field may be of any length (a long document; allow_long_fields). A JSONL line that is not
  a JSON object, a file without a data row, and a .json file (a whole JSON document) are
  errors naming the file (and line).
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

  if path.endswith(".json"):
    raise UserInputError(f"{path}: a .json file; a generic task reads CSV (.csv), TSV (.tsv) or "
                         "JSON lines (.jsonl: one JSON object a line)")
  if path.endswith(".jsonl"):
    lines = read_utf8_lines(path)
    if not any(line.strip() for line in lines):
      raise UserInputError(f"{path}: empty file (one JSON object a line is expected)")
    for number, line in enumerate(lines, start=1):
      where = f"{path}:{number}"
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as error:
        raise UserInputError(f"{where}: not valid JSON ({error.msg} at column {error.pos + 1})"
                             ) from None
      if not isinstance(record, dict):
        raise UserInputError(f"{where}: {_JSON_KINDS.get(type(record), 'a JSON value')}, not an "
                             'object (one JSON object a line is expected, e.g. {"text": "...", '
                             '"label": "..."})')
      add(record, find_text_columns(list(record), where, text_columns), where)
  else:
    rows = _csv_rows(path, "\t" if path.endswith(".tsv") else ",", report)
    header = next(rows)
    columns = find_text_columns(header, f"{path}:1", text_columns)
    for fields, where in rows:
      add(dict(zip(header, fields)), columns, where)
  report.read += len(examples)
  return examples


def allow_long_fields() -> None:
  """Lets the csv module read a field of any length (its default limit is 131,072 characters):
  a long document is data, cut to max_seq_length when it is tokenized (and reported as
  truncated), not a malformed file."""
  if csv.field_size_limit() < _LONGEST_FIELD:
    csv.field_size_limit(_LONGEST_FIELD)


_LONGEST_FIELD = 2 ** 31 - 1  # the largest a C long holds everywhere (csv keeps a C long)


def _csv_rows(path: str, delimiter: str, report: ReadReport):
  """The header of a CSV/TSV file, then (fields, "file:line") of each data row; blank lines
  are no rows, rows with another field count than the header are skipped (see read_generic).
  A file with no data row is an error naming it."""
  allow_long_fields()
  reader = csv.reader(read_utf8_lines(path), delimiter=delimiter, strict=True)
  header, start, rows = None, 1, 0
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
        rows += 1
        yield row, f"{path}:{first}"
      else:
        rows += 1
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
  if not rows:
    raise UserInputError(f"{path}: no rows after the header line")
