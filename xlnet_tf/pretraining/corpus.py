"""Text corpora in the original XLNet format: one sentence per line, a blank line ends a document.

Also builds the embedded default corpus from text every Python installation has: the Python
reference documentation in `pydoc_data.topics`, one topic a document, one sentence a line.
"""

import collections
import dataclasses
import os
import re
from typing import Dict, List, Tuple

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


def read_documents(path: str, stats: ReadStats) -> List[Document]:
  """Documents of one file. Lines that are not valid UTF-8 are skipped and counted by line."""
  with open(path, "rb") as handle:
    raw = handle.read()
  stats.files += 1
  if not raw.strip():
    stats.skip("empty file", path)
    return []
  try:
    lines = raw.decode("utf-8").split("\n")
  except UnicodeDecodeError:
    lines = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
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
  """Writes documents round-robin into `num_files` text files in the original format."""
  os.makedirs(directory, exist_ok=True)
  shards: List[List[Document]] = [[] for _ in range(num_files)]
  for index, document in enumerate(documents):
    shards[index % num_files].append(document)
  paths = []
  for index, shard in enumerate(shards):
    path = os.path.join(directory, f"{prefix}-{index:03d}.txt")
    with open(path, "w", encoding="utf-8") as handle:
      handle.write("\n\n".join("\n".join(document) for document in shard) + "\n")
    paths.append(path)
  return paths


def split_held_out(documents: List[Document], every: int = 10) -> Tuple[List[Document],
                                                                          List[Document]]:
  """(train, held-out): every `every`-th document is held out."""
  held_out = documents[::every]
  train = [d for i, d in enumerate(documents) if i % every]
  return train, held_out
