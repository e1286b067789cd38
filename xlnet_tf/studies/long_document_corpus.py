"""A corpus of long documents for the language-modelling studies (Transformer-XL's Table 5
and RECL need contexts far beyond a training segment): the machine's longest manual pages,
each a document of thousands of words, one paragraph a line, a blank line between documents.
Held-out documents are whole pages, chosen by a hash of the page name (manual_pages.page_pool),
so no held-out page is in the training text. The main job's small corpus stays the main job's.
"""

import dataclasses
import os
from typing import Dict, List

from xlnet_tf.studies.manual_pages import manual_page_files, page_pool, read_page


@dataclasses.dataclass
class LongDocumentCorpus:
  files: Dict[str, List[str]]   # split ("train", "valid") -> text files
  documents: Dict[str, int]
  words: Dict[str, int]


def page_text(paragraphs) -> List[str]:
  """A page's lines: its headings and paragraphs in order, each heading once."""
  lines, last_heading = [], None
  for heading, text in paragraphs:
    if heading and heading != last_heading:
      lines.append(heading)
      last_heading = heading
    lines.append(" ".join(text.split()))
  return [line for line in lines if line]


def build_long_document_corpus(output_dir: str, root: str = "/usr/share/man",
                               min_words: int = 2000, held_out_percent: int = 10,
                               shards: int = 4) -> LongDocumentCorpus:
  """Writes output_dir/{train,valid}/pages-NNN.txt: every page of at least `min_words` words
  (about 500 pages and 2.7 M words on a Debian machine with the usual packages)."""
  files = manual_page_files(root)
  if not files:
    raise FileNotFoundError(f"{root}: no manual pages")
  pages = {"train": [], "valid": []}
  seen = set()
  for path in files:
    name, _, paragraphs = read_page(path)
    lines = page_text(paragraphs)
    if name in seen or sum(len(line.split()) for line in lines) < min_words:
      continue
    seen.add(name)
    split = "valid" if page_pool(name, held_out_percent) == "held_out" else "train"
    pages[split].append(lines)
  written = {}
  for split, documents in pages.items():
    directory = os.path.join(output_dir, split)
    os.makedirs(directory, exist_ok=True)
    written[split] = []
    for shard in range(shards if split == "train" else 1):
      path = os.path.join(directory, f"pages-{shard:03d}.txt")
      step = shards if split == "train" else 1
      with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join("\n".join(lines) for lines in documents[shard::step]) + "\n")
      written[split].append(path)
  return LongDocumentCorpus(
      written, {split: len(documents) for split, documents in pages.items()},
      {split: sum(len(line.split()) for lines in documents for line in lines)
       for split, documents in pages.items()})
