import random

import numpy as np
from hypothesis import given, settings, strategies as st

from xlnet_tf.pretraining.data.examples import ExampleBuilder, split_a_and_b, trim_to_total
from xlnet_tf.pretraining.data.rows import (StreamRow, batch_count, batchify, is_backward_row,
                                            stream_rows, token_stream)
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.token_files import SortedBoundaries


def literal_trim(a_len, b_len, total):
  """The original's loop, one token at a time."""
  while a_len + b_len > total:
    if a_len > b_len:
      a_len -= 1
    else:
      b_len -= 1
  return a_len, b_len


@st.composite
def sentence_streams(draw):
  sentence_lengths = draw(st.lists(st.integers(1, 30), min_size=1, max_size=40))
  ids = np.arange(sum(sentence_lengths))
  sentence_ids = np.repeat(np.arange(len(sentence_lengths)) % 2 == 0, sentence_lengths)
  return ids, sentence_ids


@settings(max_examples=150, deadline=None)
@given(sentence_streams(), st.integers(0, 200), st.integers(2, 60), st.integers(0, 10 ** 6))
def test_split_a_and_b(stream, begin, total, seed):
  ids, sentence_ids = stream
  boundaries = (np.flatnonzero(sentence_ids[1:] != sentence_ids[:-1]) + 1).tolist()
  result = split_a_and_b(random.Random(seed), StreamRow.in_memory(ids, sentence_ids), begin,
                         total)
  if begin + total >= len(ids):
    assert result is None
    return
  if result is None:
    return
  a_begin, a_end, b_begin, b_end, label = result
  assert a_begin == begin and a_end > a_begin and b_end > b_begin
  assert (a_end - a_begin) + (b_end - b_begin) <= total
  assert a_end < len(ids) and b_end < len(ids)
  if label == 1:
    # B starts where A's sentences ended (A may since have been trimmed from its end).
    assert b_begin in boundaries and b_begin >= a_end
  else:
    assert b_begin == 0 or b_begin in boundaries, "a random B starts at a sentence start"


@given(st.integers(0, 100), st.integers(0, 100), st.integers(1, 150))
def test_trim_equals_the_original_loop(a_len, b_len, total):
  assert trim_to_total(a_len, b_len, total) == literal_trim(a_len, b_len, total)


def test_token_stream_appends_eod_to_each_document():
  flat = np.array([10, 11, 12, 13, 14, 15], np.int32)
  ids, sentences = token_stream(flat, [2, 1, 3], document_lengths=[2, 1], eod_id=7)
  np.testing.assert_array_equal(ids, [10, 11, 12, 7, 13, 14, 15, 7])
  # <eod> shares its document's last sentence id; sentences alternate.
  np.testing.assert_array_equal(sentences, [1, 1, 0, 0, 1, 1, 1, 1])


def test_bi_data_rows_are_reversed_per_core():
  settings = PretrainingDataConfig(bsz_per_host=8, num_core_per_host=2, bi_data=True)
  ids = np.arange(100, dtype=np.int32)
  rows, _, dropped = batchify(ids, ids % 2 == 0, settings)
  assert rows.shape == (8, 25) and dropped == 0
  for core in range(2):
    block = rows[core * 4:(core + 1) * 4]
    np.testing.assert_array_equal(block[2:], block[:2, ::-1])
  assert [is_backward_row(r, settings) for r in range(8)] == [False, False, True, True] * 2


def windowed_row(ids, sentence_ids, begin, end, nearby):
  """A row that holds [begin, end) and reads anything else `nearby` positions at a time, as
  the stage's rows over a token stream on disk do."""
  row = StreamRow(lambda b, e: (ids[b:e], sentence_ids[b:e]),
                  SortedBoundaries.of_flags(sentence_ids), 0, len(ids))
  row.NEARBY = nearby
  row.load(begin, end)
  return row


@settings(max_examples=150, deadline=None)
@given(sentence_streams(), st.data())
def test_a_windowed_row_answers_as_the_whole_row(stream, data):
  ids, sentence_ids = stream
  length = len(ids)
  boundaries = (np.flatnonzero(sentence_ids[1:] != sentence_ids[:-1]) + 1).tolist()
  begin = data.draw(st.integers(0, length))
  row = windowed_row(ids, sentence_ids, begin, data.draw(st.integers(begin, length)),
                     nearby=data.draw(st.integers(1, 8)))
  for _ in range(10):
    position = data.draw(st.integers(0, length))
    assert row.boundary_at_or_after(position) == min([b for b in boundaries if b >= position],
                                                     default=length)
    assert row.boundary_at_or_before(position) == max([b for b in boundaries if b <= position],
                                                      default=0)
    high = data.draw(st.integers(position, length))
    assert row.boundaries_between(position, high) == [b for b in boundaries
                                                      if position < b < high]
    np.testing.assert_array_equal(row[position:high], ids[position:high])


@settings(max_examples=100, deadline=None)
@given(sentence_streams(), st.integers(0, 200), st.integers(2, 60), st.integers(0, 10 ** 6),
       st.integers(1, 8))
def test_split_a_and_b_of_a_windowed_row_is_the_whole_rows(stream, begin, total, seed, nearby):
  ids, sentence_ids = stream
  whole = split_a_and_b(random.Random(seed), StreamRow.in_memory(ids, sentence_ids), begin,
                        total)
  row = windowed_row(ids, sentence_ids, begin, begin + total, nearby)
  assert split_a_and_b(random.Random(seed), row, begin, total) == whole


def test_stream_rows_are_batchify_read_lazily():
  settings = PretrainingDataConfig(bsz_per_host=8, num_core_per_host=2, bi_data=True)
  ids = np.arange(103, dtype=np.int32)
  sentence_ids = (ids // 3) % 2 == 0
  rows, sentence_rows, dropped = batchify(ids, sentence_ids, settings)
  lazy, lazy_dropped = stream_rows(lambda b, e: (ids[b:e], sentence_ids[b:e]), len(ids),
                                   settings)
  assert lazy_dropped == dropped == 3 and len(lazy) == 8
  for row, sentences, lazy_row in zip(rows, sentence_rows, lazy):
    np.testing.assert_array_equal(lazy_row[0:len(lazy_row)], row)
    assert lazy_row.boundaries_between(-1, len(row) + 1) == \
        (np.flatnonzero(sentences[1:] != sentences[:-1]) + 1).tolist()


def test_batches_built_in_blocks_are_the_batches_of_one_pass():
  """The stage builds a file's batches in blocks, in any process, and stops after the first
  block in which a row ran out: that must be the one pass of the original."""
  settings = PretrainingDataConfig(seq_len=32, reuse_len=16, num_predict=5, bsz_per_host=4,
                                   bi_data=True)
  word_start = np.random.default_rng(0).random(60) < 0.6
  ran_out = 0
  for case in range(100):  # a row runs out in about 1 case in 100 (here case 53)
    rng = np.random.default_rng(case)
    lengths = rng.integers(1, 12, 40)
    ids = rng.integers(10, 60, lengths.sum()).astype(np.int32)
    sentence_ids = np.repeat(np.arange(40) % 2 == 0, lengths)
    read = lambda b, e: (ids[b:e], sentence_ids[b:e])  # noqa: B023 (used in this iteration)
    builder = ExampleBuilder(settings, word_start, sep_id=4, cls_id=3, rng=None)
    rows, _ = stream_rows(read, len(ids), settings)
    one_pass = list(builder.batches(rows, seed=(7, case)))
    blocks = []
    for first in range(0, batch_count(len(rows[0]), settings), 2):
      block = list(builder.batches(stream_rows(read, len(ids), settings)[0], first, first + 2,
                                   seed=(7, case)))
      blocks.extend(block)
      if len(block) < 2:
        break
    ran_out += len(one_pass) < batch_count(len(rows[0]), settings)
    assert len(blocks) == len(one_pass) > 0
    for batch, other in zip(one_pass, blocks):
      for example, same in zip(batch, other):
        for field in ("input_ids", "segment_ids", "target_positions", "ranks"):
          np.testing.assert_array_equal(example.feature(field), same.feature(field))
        assert example.label == same.label
  assert ran_out > 0, "some case must stop before the rows' end"
