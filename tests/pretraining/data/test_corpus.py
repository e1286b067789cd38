"""Reading a file in document-aligned byte ranges gives the documents of reading it whole."""

import os

from hypothesis import given, settings, strategies as st

from xlnet_tf.pretraining.data.corpus import ReadStats, document_ranges, read_documents

# Lines of words, blank lines of several kinds, and lines that are not UTF-8.
LINES = st.sampled_from([b"One sentence.", b"Two words", b"x", b"caf\xc3\xa9 ok", b"", b"  ",
                         b"\r", b"\t \r", b"bad \xff\xfe line", b"\xa0", b"\xc2\xa0"])


def read_in_ranges(path, target_bytes):
  stats = ReadStats()
  documents = []
  ranges = document_ranges(path, target_bytes)
  for begin, end, first_line in ranges:
    documents.extend(read_documents(path, stats, (begin, end), first_line))
  return ranges, documents, stats


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, max_size=40), st.booleans(), st.integers(1, 60))
def test_ranges_give_the_documents_of_the_whole_file(tmp_path_factory, lines, final_newline,
                                                     target_bytes):
  path = str(tmp_path_factory.mktemp("ranges") / "corpus.txt")
  content = b"\n".join(lines) + (b"\n" if final_newline else b"")
  with open(path, "wb") as handle:
    handle.write(content)
  whole_stats = ReadStats()
  whole = read_documents(path, whole_stats)
  ranges, documents, stats = read_in_ranges(path, target_bytes)
  if not content.strip():
    assert ranges == [] and "empty file" in whole_stats.skipped
    return
  assert documents == whole
  assert (stats.documents, stats.lines) == (whole_stats.documents, whole_stats.lines)
  assert stats.examples_of_skips == whole_stats.examples_of_skips  # same line numbers
  # The ranges tile the file; each but the last is at least target_bytes and ends after a
  # blank line.
  assert ranges[0][0] == 0 and ranges[-1][1] == len(content)
  for (_, end, _), (begin, _, first_line) in zip(ranges, ranges[1:]):
    assert end == begin and first_line == content[:begin].count(b"\n") + 1
  for begin, end, _ in ranges[:-1]:
    assert end - begin >= target_bytes
    assert content[:end].endswith(b"\n")
    last_line = content[:end - 1].rsplit(b"\n", 1)[-1]
    assert not last_line.strip(), "a range ends after a blank line"


def test_a_large_file_is_cut_into_many_ranges(tmp_path):
  document = "\n".join(f"Sentence {i} of the document." for i in range(20))
  path = tmp_path / "big.txt"
  path.write_text("\n\n".join([document] * 500) + "\n")
  ranges, documents, stats = read_in_ranges(str(path), target_bytes=10_000)
  size = os.path.getsize(path)
  assert size // 10_000 - 1 <= len(ranges) <= size // 10_000 + 1
  assert len(documents) == 500 and stats.lines == 500 * 20
