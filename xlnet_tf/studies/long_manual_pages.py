"""A long-document task from the machine's manual pages: a whole page -> its manual section.

Each document is one page's text from DESCRIPTION on, with its headings ("DESCRIPTION: ...
OPTIONS: ... RETURN VALUE: ... ERRORS: ..."); NAME and SYNOPSIS are dropped, because they
state the section's conventions outright (a command line for 1 and 8, `#include` and a C
prototype for 2 and 3). What is left often decides only late: a description opens much the
same in every section, and the headings that tell them apart (OPTIONS and EXIT STATUS for
commands, RETURN VALUE and ERRORS for calls, FILES, CONFIGURATION) come after it. Only pages
of at least `min_words` words are kept, so every document is longer than one segment of the
sizes the study reads; each is cut to `max_words`.

Labels are the sections (1 commands, 2 system calls, 3 library functions, 5 file formats,
7 overviews, 8 administration), about balanced. Train and dev come from disjoint pages by the
hash of their names (manual_pages.page_pool), so dev pages are unseen.
"""

import dataclasses
import json
import os
import random
from typing import Dict, List, Sequence

from xlnet_tf.studies.manual_pages import SECTIONS, manual_page_files, page_pool, read_page

DROPPED_HEADINGS = ("", "NAME", "SYNOPSIS")


@dataclasses.dataclass
class LongPageTask:
  files: Dict[str, str]               # split -> JSONL path (and "text": train.txt)
  counts: Dict[str, Dict[str, int]]   # split -> section -> documents
  mean_words: Dict[str, float]        # split -> mean words per document


def page_document(paragraphs: Sequence) -> str:
  """The text of a page's (heading, paragraph) pairs without NAME and SYNOPSIS: each heading
  written once, before its first paragraph."""
  parts, last_heading = [], None
  for heading, text in paragraphs:
    if heading in DROPPED_HEADINGS:
      continue
    if heading != last_heading:
      parts.append(f"{heading}:")
      last_heading = heading
    parts.append(text)
  return " ".join(parts)


def build_long_page_task(output_dir: str, root: str = "/usr/share/man",
                         train_per_section: int = 200, dev_per_section: int = 60,
                         min_words: int = 300, max_words: int = 2000, seed: int = 0
                         ) -> LongPageTask:
  """Writes output_dir/{train,dev}.jsonl ({"text", "label", "page"} a line): up to
  `*_per_section` documents of each section (fewer where a section has fewer long pages),
  shuffled; and train.txt, the training documents one a line (to train a vocabulary on).
  Pages are read in a seeded random order until each quota is full."""
  draw = random.Random(seed)
  quotas = {"train": train_per_section, "held_out": dev_per_section}
  rows: Dict[str, List[dict]] = {"train": [], "held_out": []}
  for section in SECTIONS:
    files = manual_page_files(root, [section])
    draw.shuffle(files)
    taken = {pool: 0 for pool in quotas}
    for path in files:
      if all(taken[pool] >= quotas[pool] for pool in quotas):
        break
      name, _, paragraphs = read_page(path)
      pool = page_pool(name)
      words = page_document(paragraphs).split()
      if taken[pool] >= quotas[pool] or len(words) < min_words:
        continue
      rows[pool].append({"text": " ".join(words[:max_words]), "label": section, "page": name})
      taken[pool] += 1
  if not rows["train"] or not rows["held_out"]:
    raise FileNotFoundError(f"{root}: no manual pages of at least {min_words} words in "
                            f"sections {SECTIONS}")
  os.makedirs(output_dir, exist_ok=True)
  files, counts, mean_words = {}, {}, {}
  for split, pool in (("train", "train"), ("dev", "held_out")):
    draw.shuffle(rows[pool])
    files[split] = os.path.join(output_dir, f"{split}.jsonl")
    with open(files[split], "w", encoding="utf-8") as handle:
      for row in rows[pool]:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts[split] = {section: sum(row["label"] == section for row in rows[pool])
                     for section in SECTIONS}
    mean_words[split] = sum(len(row["text"].split()) for row in rows[pool]) / len(rows[pool])
  files["text"] = os.path.join(output_dir, "train.txt")
  with open(files["text"], "w", encoding="utf-8") as handle:
    handle.write("".join(row["text"] + "\n" for row in rows["train"]))
  return LongPageTask(files, counts, mean_words)
