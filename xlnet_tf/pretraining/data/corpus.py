"""Text corpora in the original XLNet format: one sentence per line, a blank line ends a document.

Also builds the embedded default corpus from text every Python installation has: the Python
reference documentation in `pydoc_data.topics`, one topic a document, one sentence a line.
"""

import collections
import dataclasses
import os
import re
from typing import Dict, List, Optional, Tuple

from xlnet_tf.utils import files

Document = List[str]


@dataclasses.dataclass
class ReadStats:
  """What reading kept and what it skipped, with reasons and the first few locations."""
  files: int = 0
  documents: int = 0
  lines: int = 0
  skipped: Dict[str, int] = dataclasses.field(default_factory=collections.Counter)
  examples_of_skips: Dict[str, List[str]] = dataclasses.field(
      default_factory=lambda: collections.defaultdict(list))

  def skip(self, reason: str, where: str, count: int = 1) -> None:
    self.skipped[reason] += count
    if len(self.examples_of_skips[reason]) < 5:
      self.examples_of_skips[reason].append(where)

  def merge(self, other: "ReadStats") -> None:
    self.files += other.files
    self.documents += other.documents
    self.lines += other.lines
    for reason, count in other.skipped.items():
      self.skipped[reason] += count
      room = 5 - len(self.examples_of_skips[reason])
      self.examples_of_skips[reason].extend(other.examples_of_skips[reason][:max(room, 0)])


def read_documents(path: str, stats: ReadStats, byte_range: Optional[Tuple[int, int]] = None,
                   first_line: int = 1) -> List[Document]:
  """Documents of one file, or of one of its `document_ranges` (byte_range, first_line: the
  file's documents are those of its ranges in order; the caller then counts the file and its
  emptiness). Lines that are not valid UTF-8 are skipped and counted by line number."""
  with files.open_file(path, "rb") as handle:
    if byte_range is None:
      raw = handle.read()
    else:
      handle.seek(byte_range[0])
      raw = handle.read(byte_range[1] - byte_range[0])
  if byte_range is None:
    stats.files += 1
    if not raw.strip():
      stats.skip("empty file", path)
      return []
  try:
    lines = raw.decode("utf-8").split("\n")
  except UnicodeDecodeError:
    lines = []
    for number, line in enumerate(raw.split(b"\n"), start=first_line):
      try:
        lines.append(line.decode("utf-8"))
      except UnicodeDecodeError:
        stats.skip("line is not valid UTF-8", f"{path}:{number}")
        lines.append(None)  # keeps document boundaries where they were
  documents, current = [], []
  for line in lines:
    if line is None:
      continue
    if line.strip():
      current.append(line)
    elif current:
      documents.append(current)
      current = []
  if current:
    documents.append(current)
  stats.documents += len(documents)
  stats.lines += sum(len(document) for document in documents)
  return documents


def document_ranges(path: str, target_bytes: int) -> List[Tuple[int, int, int]]:
  """(begin, end, first line number) of consecutive byte ranges that cover the file, each
  ending just after a blank line or at the end of the file and, but for the last, at least
  target_bytes long; none for a file of whitespace only.

  A document never spans two ranges, so the ranges read one by one (`read_documents`) give the
  file's documents: a large file is read in bounded memory, and by several workers. Only the
  lines near each cut are parsed; the rest is scanned for newlines (line numbers) in blocks.
  """
  size = files.getsize(path)
  ranges, begin, first_line, has_text = [], 0, 1, False
  with files.open_file(path, "rb") as handle:
    while begin < size:
      end = _end_of_blank_line_from(handle, begin + target_bytes, size)
      handle.seek(begin)
      newlines = 0
      for offset in range(begin, end, _SCAN_BYTES):
        block = handle.read(min(_SCAN_BYTES, end - offset))
        newlines += block.count(b"\n")
        has_text = has_text or not block.isspace()
      ranges.append((begin, end, first_line))
      begin, first_line = end, first_line + newlines
  return ranges if has_text else []


_SCAN_BYTES = 1 << 20


def _end_of_blank_line_from(handle, position: int, size: int) -> int:
  """The offset just after the first blank line (ASCII whitespace only, which `read_documents`
  also takes as blank) that starts at or after `position`; the size if there is none."""
  if position >= size:
    return size
  handle.seek(position - 1)
  if handle.read(1) != b"\n":
    handle.readline()  # the rest of a line that starts before position
  for line in iter(handle.readline, b""):
    if not line.strip():
      return handle.tell()
  return size


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def python_docs_documents() -> List[Document]:
  """The Python reference documentation topics as documents of sentences."""
  from pydoc_data import topics  # part of the standard library
  documents = []
  for name in sorted(topics.topics):
    sentences = []
    for paragraph in re.split(r"\n\s*\n", topics.topics[name]):
      lines = [line.strip() for line in paragraph.splitlines() if line.strip()]
      if not lines or set(lines[-1]) <= set("*=-"):  # headings' underlines
        lines = lines[:-1] if lines else lines
      text = " ".join(lines)
      sentences.extend(s for s in _SENTENCE_END.split(text) if s.strip())
    if sentences:
      documents.append(sentences)
  return documents


def write_corpus_files(documents: List[Document], directory: str, num_files: int,
                       prefix: str = "corpus") -> List[str]:
  """Writes documents round-robin into `num_files` text files in the original format, each
  whole or not at all."""
  files.makedirs(directory)
  shards: List[List[Document]] = [[] for _ in range(num_files)]
  for index, document in enumerate(documents):
    shards[index % num_files].append(document)
  paths = []
  for index, shard in enumerate(shards):
    path = os.path.join(directory, f"{prefix}-{index:03d}.txt")
    files.write_text(path, "\n\n".join("\n".join(document) for document in shard) + "\n")
    paths.append(path)
  return paths


@dataclasses.dataclass
class HeldOutSplit:
  """The training and held-out parts of a corpus, and a line saying how it was split."""
  train: List[Document]
  held_out: List[Document]
  description: str


def split_held_out(documents: List[Document], every: int = 10) -> Tuple[List[Document],
                                                                          List[Document]]:
  """(train, held-out): every `every`-th document is held out."""
  held_out = documents[::every]
  train = [d for i, d in enumerate(documents) if i % every]
  return train, held_out


def split_by_documents(documents: List[Document], every: int) -> HeldOutSplit:
  """`split_held_out`, described."""
  train, held_out = split_held_out(documents, every)
  return HeldOutSplit(train, held_out, f"Held out for evaluation: 1 of every {every} documents "
                      f"({len(held_out)} of {len(documents)}).")


def split_at_tail(documents: List[Document], line_weights: List[List[int]],
                  held_out_weight: float, reason: str) -> HeldOutSplit:
  """The text's end held out, cut at the line boundary where the lines from there on weigh
  (characters, tokens: `line_weights`, one list per document) at least `held_out_weight`; a
  document the cut falls in becomes two, its beginning trained on; the text's first line
  stays in training (a text of one line has none held out). For a text of few
  documents, where holding out whole ones would take too much or too little of it; one
  contiguous piece keeps the held-out text's sentences in order. `reason` ends the line."""
  total = sum(sum(weights) for weights in line_weights)
  positions = [(index, line) for index, document in enumerate(documents)
               for line in range(len(document))]
  cut, held_weight = len(positions), 0
  while cut > 1 and held_weight < held_out_weight:  # the first line is always trained on
    cut -= 1
    held_weight += line_weights[positions[cut][0]][positions[cut][1]]
  train, held_out = list(documents), []
  if cut < len(positions):
    index, line = positions[cut]
    head, tail = documents[index][:line], documents[index][line:]
    train = documents[:index] + ([head] if head else [])
    held_out = [tail] + documents[index + 1:]
  share = held_weight / total if total else 0.0
  return HeldOutSplit(train, held_out, f"Held out for evaluation: the last "
                      f"{len(positions) - cut} of {len(positions)} lines ({share:.0%} of the "
                      f"text), {reason}.")
