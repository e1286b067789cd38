import numpy as np
import pytest

from xlnet_tf.pretraining.examples import token_stream
from xlnet_tf.pretraining.token_files import TokenStream, write_part


def test_parts_read_as_the_stream_of_the_whole_file(tmp_path):
  """Documents tokenized part by part, each part's sentence ids counted from its own first
  line, read back as the stream of all of them at once: ids and alternating sentence ids."""
  rng = np.random.default_rng(0)
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
