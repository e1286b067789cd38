import numpy as np
import pytest

from xlnet_tf.pretraining.data.rows import batchify, stream_rows, token_stream
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.token_files import TokenStream, flag_changes, write_part


def parts_of_documents(tmp_path, rng):
  """Documents tokenized part by part, as the stage does: (parts, whole ids, whole flags)."""
  documents = [rng.integers(1, 5, rng.integers(1, 6)).tolist() for _ in range(30)]  # line lengths
  cuts = [0, 4, 4, 11, 12, 30]  # part k holds documents [cuts[k], cuts[k + 1]); one is empty
  flat = [rng.integers(10, 1000, sum(d)) for d in documents]
  whole_ids, whole_sentences = token_stream(
      np.concatenate(flat), [n for d in documents for n in d], [len(d) for d in documents], 7)
  parts = []
  for number, (first, stop) in enumerate(zip(cuts, cuts[1:])):
    lines = [n for d in documents[first:stop] for n in d]
    ids, sentences = token_stream(np.concatenate(flat[first:stop] or [np.zeros(0, int)]), lines,
                                  [len(d) for d in documents[first:stop]], 7)
    parts.append(write_part(str(tmp_path / f"part{number}"), ids, sentences, len(lines)))
  return parts, whole_ids, whole_sentences


def test_boundaries_searched_part_by_part_are_those_of_the_whole_stream(tmp_path):
  """The per-part boundary files, plus a boundary where a part's first flag differs from the
  previous part's last (flipped parts, an empty part), answer as the whole stream's flags;
  and so do the rows cut from it, forward and backward."""
  rng = np.random.default_rng(1)
  parts, whole_ids, whole_sentences = parts_of_documents(tmp_path, rng)
  boundaries = flag_changes(whole_sentences).tolist()
  settings = PretrainingDataConfig(bsz_per_host=4, num_core_per_host=1, bi_data=True)
  with TokenStream(parts) as stream:
    length = len(stream)
    assert stream.between(-1, length + 1) == boundaries
    for position in range(-1, length + 2):
      assert stream.at_or_after(position, length) == min(
          [b for b in boundaries if b >= position], default=length)
      assert stream.at_or_before(position, 0) == max(
          [b for b in boundaries if b <= position], default=0)
    indexed, _ = stream_rows(stream.read, length, settings, boundaries=stream)
    _, sentence_rows, _ = batchify(whole_ids, whole_sentences, settings)
    for row, sentences in zip(indexed, sentence_rows):
      row_boundaries = flag_changes(sentences).tolist()
      assert row.boundaries_between(-1, len(row) + 1) == row_boundaries
      for position in range(-1, len(row) + 2):
        assert row.boundary_at_or_after(position) == min(
            [b for b in row_boundaries if b >= position], default=len(row))
        assert row.boundary_at_or_before(position) == max(
            [b for b in row_boundaries if b <= position], default=0)


def test_parts_read_as_the_stream_of_the_whole_file(tmp_path):
  """Documents tokenized part by part, each part's sentence ids counted from its own first
  line, read back as the stream of all of them at once: ids and alternating sentence ids."""
  rng = np.random.default_rng(0)
  parts, whole_ids, whole_sentences = parts_of_documents(tmp_path, rng)
  assert sum(p.lines % 2 for p in parts) >= 2, "parts after an odd line count are flipped"
  with TokenStream(parts) as stream:
    assert len(stream) == len(whole_ids)
    ids, sentences = stream.read(0, len(stream))
    np.testing.assert_array_equal(ids, whole_ids)
    np.testing.assert_array_equal(sentences.astype(bool), whole_sentences)
    for begin, end in rng.integers(0, len(stream), [50, 2]):
      begin, end = min(begin, end), max(begin, end)
      ids, sentences = stream.read(begin, end)
      np.testing.assert_array_equal(ids, whole_ids[begin:end])
      np.testing.assert_array_equal(sentences.astype(bool), whole_sentences[begin:end])
    with pytest.raises(IndexError, match="outside the stream"):
      stream.read(0, len(stream) + 1)
