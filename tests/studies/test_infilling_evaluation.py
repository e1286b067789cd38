"""The intrinsic evaluations (xlnet_tf.studies.infilling_evaluation): blanked spans are whole
words; the metrics on fills and scores with known answers; one real run on a tiny model."""

import keras
import numpy as np
import pytest

from xlnet_tf import XLNetConfig, XLNetModel, XLNetTokenizer
from xlnet_tf.inference import infilling
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.studies import infilling_evaluation as evaluation


@pytest.fixture(scope="module")
def sentences():
  return [line for document in corpus.python_docs_documents()[:40] for line in document
          if len(line.split()) >= 6][:300]


@pytest.fixture(scope="module")
def tokenizer(sp_model):
  return XLNetTokenizer(sp_model)


@pytest.mark.parametrize("words", [1, 3])
def test_blanked_spans_are_runs_of_whole_words(words, sentences, tokenizer):
  examples = evaluation.blanked_sentences(tokenizer, sentences, words, 40, seed=1,
                                          max_pieces=24)
  assert len(examples) == 40
  for example in examples:
    assert len(example.pieces) <= 24 and example.words == words
    starts = [tokenizer.word_start[piece] for piece in example.pieces]
    end = example.start + example.length
    assert starts[example.start] and (end == len(example.pieces) or starts[end])
    assert sum(starts[example.start:end]) == words  # exactly `words` word starts inside
    assert example.length < len(example.pieces)  # context left


def test_infilling_metrics_on_fills_with_known_answers(monkeypatch, sentences, tokenizer):
  examples = evaluation.blanked_sentences(tokenizer, sentences, 2, 10, seed=2)

  def fill(pretrainer, input_ids, fill_mask, **_):
    """The true span in even rows of a batch; odd rows get their first blank piece wrong."""
    ids = np.array(input_ids)
    for row in range(len(ids)):
      positions = np.flatnonzero(fill_mask[row])
      ids[row, positions] = examples_by_row[row].span
      if row % 2:
        ids[row, positions[0]] += 1
    return _Tensor(ids)

  examples_by_row = examples[:4]
  monkeypatch.setattr(infilling, "fill", fill)
  scores = evaluation.infilling_accuracy(None, tokenizer, examples_by_row, "left_to_right",
                                         batch_size=4)
  pieces = sum(example.length for example in examples_by_row)
  assert scores == {"exact": 0.5, "pieces": (pieces - 2) / pieces}


def test_cloze_accuracy_counts_strict_first_places(monkeypatch, sentences, tokenizer):
  examples = [evaluation.BlankedSentence([10 + i, 20 + i, 30, 40], 1, 1, 1) for i in range(6)]

  def span_log_prob(pretrainer, input_ids, fill_mask, **_):
    """The filled piece's own id as its score: the highest id wins."""
    return np.array([ids[mask > 0][0] for ids, mask in zip(input_ids, fill_mask)], float)

  monkeypatch.setattr(infilling, "span_log_prob", lambda *a, **k: _Tensor(span_log_prob(
      *a, **k)))
  scores = evaluation.cloze_accuracy(None, tokenizer, examples, distractors=5, batch_size=7)
  # Every example faces all five others: only the one with the highest span id (25) wins.
  assert scores == {"accuracy": pytest.approx(1 / 6), "examples": 6}
  too_few = evaluation.cloze_accuracy(None, tokenizer, examples, distractors=6)
  assert too_few["examples"] == 0


class _Tensor:
  def __init__(self, value):
    self.value = value

  def numpy(self):
    return self.value


def test_a_real_evaluation_ends_with_scores_for_every_order(sentences, tokenizer):
  keras.utils.set_random_seed(0)
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, bi_data=False)
  for objective, orders in (("perm", ("left_to_right", "confidence")),
                            ("mlm", ("independent",))):
    model = XLNetPretrainer(XLNetModel(config), objective=objective)
    results = evaluation.intrinsic_evaluation(model, tokenizer, sentences, span_words=(1, 2),
                                              count=6, orders=orders, distractors=2)
    assert sorted(results) == [1, 2]
    for scores in results.values():
      assert set(scores["infilling"]) == set(orders)
      assert all(0 <= s["exact"] <= s["pieces"] <= 1 for s in scores["infilling"].values())
      assert 0 <= scores["cloze"]["accuracy"] <= 1
    table = evaluation.intrinsic_markdown({objective: results})
    assert table.count(f"| {objective} |") == 2
