"""The manual-page reader (a small roff stripper) and the task builder that make the real
transfer study's data."""

import gzip
import json

from xlnet_tf.studies import manual_pages


ROFF = r""".\" comment
.TH OPEN 2 2023-02-05 "Linux"
.SH NAME
open \- open a file
.SH DESCRIPTION
The
.BR open ()
system call opens the file specified by
.IR pathname .
If the file does not exist it may be created with \fBO_CREAT\fP \(em see below.
.PP
A second paragraph of the description has enough words to count here.
.SH "RETURN VALUE"
On success a new file descriptor is returned to the caller of this function.
"""


def test_manual_page_reader_and_task_builder(tmp_path):
  root = tmp_path / "man"
  for section, count in (("2", 6), ("5", 6)):
    (root / f"man{section}").mkdir(parents=True)
    for index in range(count):
      with gzip.open(root / f"man{section}" / f"page{section}{index}.{section}.gz", "wt") as f:
        f.write(ROFF.replace("system call", f"section {section} call"))
  (root / "man2" / "alias.2").write_text(".so man2/page20.2\n")
  name, section, paragraphs = manual_pages.read_page(str(root / "man2" / "page20.2.gz"))
  assert (name, section) == ("page20.2", "2")
  assert paragraphs[1] == ("DESCRIPTION", "The open() section 2 call opens the file specified "
                           "by pathname. If the file does not exist it may be created with "
                           "O_CREAT - see below.")
  assert paragraphs[-1][0] == "RETURN VALUE"
  assert manual_pages.read_page(str(root / "man2" / "alias.2"))[2] == []
  data = manual_pages.build_manual_page_data(str(tmp_path / "out"), str(root),
                                             train_examples=4, dev_examples=2, test_examples=2)
  assert data.corpus_words > 0
  held_out = {manual_pages.page_pool(f"page{s}{i}.{s}") == "held_out"
              for s in "25" for i in range(6)}
  assert held_out == {True, False}, "both pools are used"
  rows = [json.loads(line) for line in open(data.task_files["man_section"]["train"])]
  assert {row["label"] for row in rows} <= {"2", "5"} and rows


def test_long_page_task_keeps_whole_pages_without_name_and_synopsis(tmp_path):
  from xlnet_tf.studies import long_manual_pages
  root = tmp_path / "man"
  page = ROFF.replace(".SH DESCRIPTION", ".SH SYNOPSIS\n.B #include <fcntl.h>\n.SH DESCRIPTION")
  for section in ("2", "5"):
    (root / f"man{section}").mkdir(parents=True)
    for index in range(12):
      (root / f"man{section}" / f"p{section}{index}.{section}").write_text(page)
  (root / "man5" / "short.5").write_text(".SH DESCRIPTION\nToo short.\n")
  task = long_manual_pages.build_long_page_task(str(tmp_path / "out"), str(root),
                                                train_per_section=3, dev_per_section=2,
                                                min_words=20)
  rows = {split: [json.loads(line) for line in open(task.files[split])]
          for split in ("train", "dev")}
  assert task.counts == {split: {s: (3 if split == "train" else 2) if s in "25" else 0
                                 for s in manual_pages.SECTIONS} for split in rows}
  assert rows["train"][0]["text"].startswith("DESCRIPTION: The open() system call opens")
  assert "RETURN VALUE: On success" in rows["train"][0]["text"]
  assert not any("open a file" in r["text"] or "#include" in r["text"] for r in rows["train"])
  assert {r["page"] for r in rows["train"]}.isdisjoint(r["page"] for r in rows["dev"])
  assert all(manual_pages.page_pool(r["page"]) == "held_out" for r in rows["dev"])
  assert open(task.files["text"]).read().count("\n") == 6


def test_long_document_corpus_keeps_long_pages_whole_and_holds_out_pages(tmp_path):
  """The LM studies' corpus: pages of at least min_words, each one document (headings once,
  a paragraph a line), held-out pages by name hash in valid/, none in train/."""
  from xlnet_tf.studies import long_document_corpus
  root = tmp_path / "man"
  (root / "man1").mkdir(parents=True)
  long_page = ROFF + "".join(f".PP\nParagraph {i} of a long page with eight words.\n"
                             for i in range(30))
  for index in range(40):
    (root / "man1" / f"tool{index}.1").write_text(long_page)
  (root / "man1" / "short.1").write_text(ROFF)
  corpus = long_document_corpus.build_long_document_corpus(
      str(tmp_path / "out"), str(root), min_words=200, held_out_percent=20, shards=2)
  assert corpus.documents["train"] + corpus.documents["valid"] == 40  # short.1 left out
  assert 0 < corpus.documents["valid"] < 20
  held_out = {f"tool{i}.1" for i in range(40)
              if manual_pages.page_pool(f"tool{i}.1", 20) == "held_out"}
  assert len(held_out) == corpus.documents["valid"]
  documents = [document for path in corpus.files["train"]
               for document in open(path).read().strip().split("\n\n")]
  assert len(documents) == corpus.documents["train"]
  lines = documents[0].splitlines()
  assert lines[:2] == ["NAME", "open - open a file"] and lines.count("DESCRIPTION") == 1
  assert lines[-1] == "Paragraph 29 of a long page with eight words."
  assert corpus.words["train"] == sum(len(d.split()) for d in documents)
