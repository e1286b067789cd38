"""Span prediction and whole-word masking on text written without spaces (Chinese): its
pieces are words (unspaced_pieces_as_words), and a "word" of more than max_word_pieces pieces
is predicted as pieces, so spans keep their lengths."""

import doctest
import json
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings as hypothesis_settings, strategies as st

from xlnet_tf.pretraining.data.records import load_record_info, pretraining_dataset
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data import words
from xlnet_tf.pretraining.data.spans import sample_word_spans
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.pretraining.data.words import split_long_words, word_start_table
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.text.tokenizer import XLNetTokenizer

CHINESE = """\
今天早上我和朋友一起去公园散步，天气非常好。
公园里有很多人在跑步，也有老人在打太极拳。
我们走到湖边，看见几只白色的鸭子在水里游来游去。
中午我们在附近的小饭馆吃了面条和饺子。
下午我回到家里，开始读一本关于历史的书。
这本书讲的是古代城市的生活和商人的故事。
晚上妈妈做了红烧鱼，全家人一起吃晚饭。
吃完饭以后，我帮妈妈洗碗，然后写日记。
明天学校要考试，所以我复习了数学和语文。
老师说只要认真准备，考试就不会太难。
我的弟弟喜欢画画，他每天都画小猫和小狗。
周末我们打算去山上看日出，需要早点起床。
城市的交通越来越拥挤，很多人选择坐地铁上班。
图书馆里非常安静，学生们都在认真学习。
春天来了，花园里的花都开了，到处都很漂亮。
"""


def write_chinese_corpus(directory, copies=12):
  """Documents of the sentences above in shuffled orders (a blank line between documents)."""
  sentences = CHINESE.split()
  draw = random.Random(0)
  documents = []
  for _ in range(copies):
    draw.shuffle(sentences)
    documents.append("\n".join(sentences))
  path = directory / "chinese.txt"
  path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
  directory = tmp_path_factory.mktemp("chinese")
  corpus = write_chinese_corpus(directory)
  sp_path = train_sentencepiece([corpus], str(directory / "spiece"), vocab_size=400)
  return corpus, XLNetTokenizer(sp_path), directory


def runs(selected):
  """(begin, end) of each run of True."""
  padded = np.concatenate([[False], selected, [False]])
  return list(zip(np.flatnonzero(padded[1:] & ~padded[:-1]),
                  np.flatnonzero(~padded[1:] & padded[:-1])))


def chinese_word_starts(chinese, unspaced_pieces_as_words=False):
  """word_start [L] of every sentence, concatenated, and the tokens' ids."""
  _, tokenizer, _ = chinese
  ids = np.concatenate([tokenizer.processor.EncodeAsIds(line) for line in CHINESE.split()])
  return word_start_table(tokenizer, unspaced_pieces_as_words)[ids], ids


def test_the_chinese_text_has_sentence_long_words_unless_its_pieces_are_words(chinese):
  """Words from the marker alone are clauses or whole sentences; taking the pieces of the
  script as words leaves no word longer than a piece."""
  word_start, ids = chinese_word_starts(chinese)
  lengths = np.diff(np.append(np.flatnonzero(word_start), len(word_start)))
  assert lengths.max() > 8 and np.mean(lengths) > 5, lengths
  as_words, _ = chinese_word_starts(chinese, unspaced_pieces_as_words=True)
  assert as_words.all()
  _, tokenizer, _ = chinese
  english = np.array(tokenizer.processor.EncodeAsIds("the cat sat"))
  assert (word_start_table(tokenizer, True)[english] == tokenizer.word_start[english]).all()


def test_the_docstring_examples():
  assert doctest.testmod(words).failed == 0


def test_split_long_words():
  word_start = np.array([1, 0, 1, 0, 0, 0, 1], bool)
  assert split_long_words(word_start, 3).astype(int).tolist() == [1, 0, 1, 1, 1, 1, 1]
  assert split_long_words(word_start, 4).tolist() == word_start.tolist()
  assert split_long_words(word_start, 0).tolist() == word_start.tolist()
  # A segment that begins inside a long word: its leading pieces are a word too.
  assert split_long_words(np.array([0, 0, 0, 1, 0], bool), 2).astype(int).tolist() == [
      1, 1, 1, 1, 0]


@pytest.mark.parametrize("unspaced_pieces_as_words, max_word_pieces", [(True, 32), (False, 1)])
@pytest.mark.parametrize("max_words", [1, 3, 5])
def test_spans_of_pieces_have_the_configured_lengths(chinese, max_words, unspaced_pieces_as_words,
                                                     max_word_pieces):
  """The default settings (pieces of the script are words), or max_word_pieces=1: each span
  holds 1..max_words pieces, every length occurs, and the goal is met by spans (with room for
  their contexts: no random fill, whose single picks could touch a span)."""
  word_start, _ = chinese_word_starts(chinese, unspaced_pieces_as_words)
  draw = random.Random(0)
  lengths = []
  for begin in range(0, len(word_start) - 120, 7):
    window = word_start[begin:begin + 120]
    selected = sample_word_spans(draw, window, 12, 6, 1, max_words=max_words,
                                 max_word_pieces=max_word_pieces)
    assert selected.sum() == 12
    lengths += [end - start for start, end in runs(selected)]
  assert set(lengths) == set(range(1, max_words + 1)), sorted(set(lengths))


class RecordingRandom(random.Random):
  """Remembers the positions the sampler's final random fill picks (they are not spans)."""

  def sample(self, population, k, **kwargs):
    self.filled = super().sample(population, k, **kwargs)
    return self.filled


def test_the_limit_makes_spans_of_words_up_to_the_limit(chinese):
  """Words from the marker alone, max_word_pieces=8: spans start and end at the limited words'
  starts, hold at most max_span_words of them, and each of those has at most 8 pieces; the
  random fill (a word longer than what is left of the goal ends the spans) stays small."""
  word_start, _ = chinese_word_starts(chinese)
  limit, max_words = 8, 3
  draw = RecordingRandom(1)
  filled, goals = 0, 0
  for begin in range(0, len(word_start) - 200, 11):
    window = word_start[begin:begin + 200]
    units = split_long_words(window, limit)
    assert np.diff(np.append(np.flatnonzero(units), len(window))).max() <= limit
    draw.filled = []
    selected = sample_word_spans(draw, window, 16, 6, 1, max_words=max_words,
                                 max_word_pieces=limit)
    assert selected.sum() == 16
    filled, goals = filled + len(draw.filled), goals + 16
    selected[draw.filled] = False
    for start, end in runs(selected):
      assert units[start] and (end == len(window) or units[end])
      assert 1 <= units[start:end].sum() <= max_words
  assert filled < 0.15 * goals


def test_without_the_limit_the_spans_are_not_words(chinese):
  """The failure the limit fixes: with words of any length, the sampler finds no whole word
  that fits the goal and fills it with scattered single pieces."""
  word_start, _ = chinese_word_starts(chinese)
  single, total = 0, 0
  for seed, begin in enumerate(range(0, len(word_start) - 120, 7)):
    window = word_start[begin:begin + 120]
    for max_word_pieces, count_single in ((0, True), (1, False)):
      selected = sample_word_spans(random.Random(seed), window, 6, 6, 1, max_words=5,
                                   max_word_pieces=max_word_pieces)
      if count_single:
        single += sum(end - start == 1 and not window[start] for start, end in runs(selected))
        total += len(runs(selected))
  assert single > 0.5 * total


@hypothesis_settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=30), st.floats(0.0, 1.0),
       st.integers(0, 10 ** 6), st.integers(0, 10))
def test_long_words_select_exactly_the_goal_and_terminate(word_lengths, fraction, seed, limit):
  word_start = np.zeros(sum(word_lengths), bool)
  word_start[np.cumsum([0] + word_lengths[:-1])] = True
  goal = int(round(fraction * len(word_start)))  # up to every token: no hang
  selected = sample_word_spans(random.Random(seed), word_start, goal, 6, 1,
                               max_word_pieces=limit)
  assert selected.sum() == goal


def read_examples(directory):
  for record in tf.data.TFRecordDataset(tf.io.gfile.glob(f"{directory}/*.tfrecords")):
    yield tf.train.Example.FromString(record.numpy()).features.feature


SETTINGS = dict(seq_len=64, reuse_len=32, num_predict=10, bsz_per_host=4, max_span_words=3)


@pytest.mark.parametrize("objective", ["perm", "mlm"])
def test_the_stage_ends_and_masks_cover_the_configured_fraction(chinese, objective):
  """The data stage on Chinese text ends, every example predicts num_predict pieces (the
  configured fraction of its tokens), and mlm shows <mask> at about 80% of them."""
  corpus, tokenizer, directory = chinese
  out = directory / objective
  summary = create_pretraining_data([corpus], tokenizer.sp_path, str(out),
                                    PretrainingDataConfig(**SETTINGS, objective=objective),
                                    seed=3, num_workers=1)
  info = load_record_info(str(out))
  assert info["num_batch"] >= 5 and info["settings"]["unspaced_pieces_as_words"], summary.report()
  predicted, shown_as_mask = 0, 0
  examples = list(read_examples(out))
  for feature in examples:
    targets = np.frombuffer(feature["target_positions"].bytes_list.value[0], "<i2")
    # <sep> and <cls> can be selected and are then not predicted (as in the original).
    assert SETTINGS["num_predict"] - 3 <= (targets >= 0).sum() <= SETTINGS["num_predict"]
    predicted += (targets >= 0).sum()
    if objective == "mlm":
      shown = np.frombuffer(feature["replacements"].bytes_list.value[0],
                            np.dtype(info["tokenizer"]["ids_dtype"]).newbyteorder("<"))
      shown_as_mask += (shown[targets >= 0] == tokenizer.special_ids.mask).sum()
  assert predicted / (len(examples) * SETTINGS["seq_len"]) == pytest.approx(10 / 64, rel=0.1)
  if objective == "mlm":
    assert shown_as_mask / predicted == pytest.approx(0.8, abs=0.06)


def test_record_info_from_before_the_limit_reads_as_no_limit(chinese, tmp_path):
  """record_info.json written before the word settings existed: read as words from the marker
  alone, of any length (what those data were made with), and the data read as before."""
  corpus, tokenizer, directory = chinese
  made = directory / "before"
  create_pretraining_data([corpus], tokenizer.sp_path, str(made),
                          PretrainingDataConfig(**SETTINGS, unspaced_pieces_as_words=False,
                                                max_word_pieces=0), seed=3,
                          num_workers=1)
  old = tmp_path / "old"
  shutil.copytree(made, old)
  info = json.loads((old / "record_info.json").read_text())
  del info["settings"]["max_word_pieces"], info["settings"]["unspaced_pieces_as_words"]
  (old / "record_info.json").write_text(json.dumps(info))
  settings = load_record_info(str(old))["settings"]
  assert settings["max_word_pieces"] == 0 and settings["unspaced_pieces_as_words"] is False
  old_batch = next(iter(pretraining_dataset(str(old))))
  new_batch = next(iter(pretraining_dataset(str(made))))
  for name in new_batch:
    np.testing.assert_array_equal(old_batch[name], new_batch[name])
