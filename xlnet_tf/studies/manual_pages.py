"""Transfer-study data from the machine's own manual pages (/usr/share/man, roff sources).

One domain, unlabelled text plus labelled tasks that nobody here wrote the labels of:

- the unlabelled corpus: paragraphs of the pages in the training pool, one sentence a line, a
  blank line between pages (the pretraining stage's format);
- `man_section`: a DESCRIPTION paragraph -> the manual section of its page (1 commands,
  2 system calls, 3 library functions, 5 file formats, 7 overviews, 8 administration);
- `man_heading`: any paragraph -> the heading it sits under (DESCRIPTION, OPTIONS, EXAMPLES,
  RETURN VALUE, ERRORS, NOTES, BUGS, ENVIRONMENT, FILES, EXIT STATUS).

Pages are split by a hash of their name: dev and test paragraphs come from pages that are
neither in the corpus nor in the training labels. Roff is read with a small stripper (macros
dropped, font and character escapes resolved), enough for prose; no groff run per page.
"""

import collections
import dataclasses
import gzip
import hashlib
import json
import os
import random
import re
from typing import Dict, Iterator, List, Sequence, Tuple

SECTIONS = ("1", "2", "3", "5", "7", "8")
HEADINGS = ("DESCRIPTION", "OPTIONS", "EXAMPLES", "RETURN VALUE", "ERRORS", "NOTES", "BUGS",
            "ENVIRONMENT", "FILES", "EXIT STATUS")
_BREAKS = {"PP", "LP", "P", "TP", "IP", "HP", "sp", "br", "RS", "RE", "nf", "fi", "TQ", "EX",
           "EE", "in", "ti"}
_FONT_MACROS = {"B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "SM", "SB"}
_ESCAPES = [(re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\s[-+]?\d"), ""),
            (re.compile(r"\\\*(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\\((em|en)"), " - "),
            (re.compile(r"\\\((aq|cq|oq)"), "'"), (re.compile(r"\\\((lq|rq|dq)"), '"'),
            (re.compile(r"\\\((bu|co|rg|tm|de|mu|>=|<=|->|<-|ha|ti|ba|bv|rs|sl)"), " "),
            (re.compile(r"\\\[[^\]]*\]"), " "), (re.compile(r"\\[-]"), "-"),
            (re.compile(r"\\[e\\]"), "\\\\"), (re.compile(r"\\[&,/:c%^|!]"), ""),
            (re.compile(r"\\ "), " "), (re.compile(r"\\."), "")]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_MIN_WORDS = 8


@dataclasses.dataclass
class Paragraph:
  page: str      # e.g. "open.2"
  section: str   # "1" ... "8"
  heading: str   # upper-cased .SH title
  text: str


def _plain(text: str) -> str:
  for pattern, replacement in _ESCAPES:
    text = pattern.sub(replacement, text)
  return text


def _macro_arguments(rest: str) -> List[str]:
  return [a[1:-1] if len(a) > 1 and a[0] == a[-1] == '"' else a
          for a in re.findall(r'"[^"]*"|\S+', rest)]


def read_page(path: str) -> Tuple[str, str, List[Tuple[str, str]]]:
  """(page name, section, [(heading, paragraph text)]) of one roff page ('' heading before the
  first .SH). A `.so` redirection gives no paragraphs."""
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
    source = handle.read()
  name = os.path.basename(path)
  name = name[:-3] if name.endswith(".gz") else name
  section = os.path.basename(os.path.dirname(path))[len("man"):]
  paragraphs, heading, current = [], "", []

  def flush():
    text = " ".join(" ".join(current).split())
    if text:
      paragraphs.append((heading, text))
    current.clear()

  for line in source.replace("\\\n", "").split("\n"):
    if line.startswith((".\\\"", "'\\\"", '.\\"')):
      continue
    if line.startswith((".", "'")):
      macro, _, rest = line[1:].strip().partition(" ")
      if macro == "so":
        return name, section, []
      if macro in ("SH", "SS"):
        flush()
        if macro == "SH":
          heading = " ".join(_plain(" ".join(_macro_arguments(rest))).upper().split())
        continue
      if macro in _BREAKS:
        flush()
        if macro == "IP" and rest:
          current.append(_plain(_macro_arguments(rest)[0]))
        continue
      if macro in _FONT_MACROS:
        joiner = " " if macro in ("B", "I", "SM", "SB") else ""
        current.append(_plain(joiner.join(_macro_arguments(rest))))
      continue
    current.append(_plain(line))
  flush()
  return name, section, paragraphs


def manual_page_files(root: str = "/usr/share/man", sections: Sequence[str] = SECTIONS
                      ) -> List[str]:
  """English pages of the given sections, sorted (Perl module pages, .3pm, are left out:
  generated from POD with a long roff preamble)."""
  files = []
  for section in sections:
    directory = os.path.join(root, f"man{section}")
    if not os.path.isdir(directory):
      continue
    for name in sorted(os.listdir(directory)):
      path = os.path.join(directory, name)
      if ".3pm" in name or os.path.islink(path) or not os.path.isfile(path):
        continue
      files.append(path)
  return files


def read_paragraphs(files: Sequence[str]) -> Iterator[Paragraph]:
  for path in files:
    name, section, paragraphs = read_page(path)
    for heading, text in paragraphs:
      if len(text.split()) >= _MIN_WORDS:
        yield Paragraph(name, section, heading, text)


def page_pool(page: str, held_out_percent: int = 20) -> str:
  """'held_out' or 'train', from a hash of the page name (stable across machines)."""
  bucket = int(hashlib.sha1(page.encode("utf-8")).hexdigest()[:8], 16) % 100
  return "held_out" if bucket < held_out_percent else "train"


def _balanced_sample(candidates: Dict[str, List[str]], total: int, draw: random.Random
                     ) -> List[Tuple[str, str]]:
  """About total / classes texts of each class (fewer where a class has fewer), shuffled."""
  per_class = max(total // len(candidates), 1)
  chosen = []
  for label in sorted(candidates):
    texts = candidates[label]
    chosen += [(text, label) for text in draw.sample(texts, min(per_class, len(texts)))]
  draw.shuffle(chosen)
  return chosen


@dataclasses.dataclass
class ManualPageData:
  corpus_files: List[str]
  corpus_words: int
  task_files: Dict[str, Dict[str, str]]   # task -> split -> path
  counts: Dict[str, Dict[str, int]]       # task -> split -> examples


def build_manual_page_data(output_dir: str, root: str = "/usr/share/man",
                           corpus_words: int = 2_000_000, train_examples: int = 1000,
                           dev_examples: int = 1000, test_examples: int = 2000,
                           max_words: int = 120, seed: int = 0,
                           corpus_shards: int = 4) -> ManualPageData:
  """Writes corpus/*.txt and {task}/{train,dev,test}.jsonl under output_dir (see the module
  docstring). Paragraphs longer than `max_words` are cut to their first `max_words` words in
  the labelled files."""
  draw = random.Random(seed)
  files = manual_page_files(root)
  if not files:
    raise FileNotFoundError(f"{root}: no manual pages in sections {SECTIONS}")
  corpus_pages = collections.OrderedDict()  # page -> sentences (training pool only)
  section_texts = {pool: collections.defaultdict(list) for pool in ("train", "held_out")}
  heading_texts = {pool: collections.defaultdict(list) for pool in ("train", "held_out")}
  for paragraph in read_paragraphs(files):
    pool = page_pool(paragraph.page)
    text = " ".join(paragraph.text.split()[:max_words])
    if pool == "train":
      sentences = [s for s in _SENTENCE_END.split(paragraph.text) if s.strip()]
      corpus_pages.setdefault(paragraph.page, []).extend(sentences)
    if paragraph.heading == "DESCRIPTION":
      section_texts[pool][paragraph.section].append(text)
    if paragraph.heading in HEADINGS:
      heading_texts[pool][paragraph.heading].append(text)
  pages = list(corpus_pages.items())
  draw.shuffle(pages)
  kept, words = [], 0
  for _, sentences in pages:
    if words >= corpus_words:
      break
    kept.append(sentences)
    words += sum(len(s.split()) for s in sentences)
  corpus_dir = os.path.join(output_dir, "corpus")
  os.makedirs(corpus_dir, exist_ok=True)
  corpus_files = []
  for shard in range(corpus_shards):
    path = os.path.join(corpus_dir, f"man-{shard:03d}.txt")
    with open(path, "w", encoding="utf-8") as handle:
      handle.write("\n\n".join("\n".join(page) for page in kept[shard::corpus_shards]) + "\n")
    corpus_files.append(path)
  task_files, counts = {}, {}
  for task, texts in (("man_section", section_texts), ("man_heading", heading_texts)):
    held_out = _balanced_sample(texts["held_out"], dev_examples + test_examples, draw)
    splits = {"train": _balanced_sample(texts["train"], train_examples, draw),
              "dev": held_out[:dev_examples], "test": held_out[dev_examples:]}
    task_files[task], counts[task] = {}, {}
    os.makedirs(os.path.join(output_dir, task), exist_ok=True)
    for split, rows in splits.items():
      path = os.path.join(output_dir, task, f"{split}.jsonl")
      with open(path, "w", encoding="utf-8") as handle:
        for text, label in rows:
          handle.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")
      task_files[task][split], counts[task][split] = path, len(rows)
  return ManualPageData(corpus_files, words, task_files, counts)
