import numpy as np
import pytest

from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.tasks.tagging import (IGNORED, TaggedSentence, encode_tagged, entity_spans,
                                   label_list, read_conll, word_predictions)
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.tasks.tagging import entity_f1

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def test_read_conll_and_labels(tmp_path):
  path = tmp_path / "eng.train"
  path.write_text(CONLL)
  sentences = read_conll(str(path), ReadReport())
  assert [s.words for s in sentences] == [["EU", "rejects", "German", "call"],
                                          ["Peter", "Blackburn"]]
  assert sentences[1].tags == ["B-PER", "I-PER"] and sentences[1].where.endswith(":8")
  assert label_list(sentences) == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
  (tmp_path / "bad").write_text("word B-PER\nlonely\n")
  with pytest.raises(ValueError, match=r"bad:2: expected 'word ... tag'"):
    read_conll(str(tmp_path / "bad"), ReadReport())


def test_entity_spans_iob1_and_iob2():
  assert entity_spans(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
  assert entity_spans(["I-ORG", "I-ORG", "B-ORG", "I-PER"]) == [("ORG", 0, 2), ("ORG", 2, 3),
                                                                ("PER", 3, 4)]
  gold = [["B-PER", "I-PER", "O", "B-LOC"]]
  predicted = [["B-PER", "O", "O", "B-LOC"]]  # PER extent wrong, LOC right
  assert entity_f1(gold, predicted) == {"precision": 0.5, "recall": 0.5, "f1": 0.5}


def test_labels_go_to_first_pieces(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  sentence = TaggedSentence(["Python", "interpreter", "objects"], ["B-X", "O", "O"], "s:1")
  labels = ["O", "B-X"]
  report = ReadReport()
  out = encode_tagged(tokenizer, [sentence], 24, labels, report)
  pieces = [tokenizer.encode(w) for w in sentence.words]
  total = sum(len(p) for p in pieces)
  start = 24 - total - 2
  expected_labels = []
  for piece, tag in zip(pieces, sentence.tags):
    expected_labels += [labels.index(tag)] + [IGNORED] * (len(piece) - 1)
  assert out["label_ids"][0, start:start + total].tolist() == expected_labels
  assert (out["label_ids"][0, :start] == IGNORED).all()
  assert out["input_ids"][0, -2:].tolist() == [tokenizer.special_ids.sep,
                                               tokenizer.special_ids.cls]
  logits = np.zeros([1, 24, 2])
  logits[0, start, 1] = 5.0  # first piece of "Python" -> B-X
  assert word_predictions(logits, out["word_index"], [sentence], labels) == [["B-X", "O", "O"]]
  short = encode_tagged(tokenizer, [sentence], 4, labels, report)
  assert "truncated to max_seq_length=4" in next(iter(report.noted)) and not report.skipped
  assert short["input_mask"][0].all()
  with pytest.raises(ValueError, match=r"s:1: tag 'B-X' is not in the label set"):
    encode_tagged(tokenizer, [sentence], 24, ["O"], ReadReport())
