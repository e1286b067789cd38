"""Token tagging data (CoNLL-2003): reading, and word labels aligned to SentencePiece pieces.

Each word is tokenized on its own; its label goes to its first piece, the other pieces are
ignored by the loss (label -1). Layout as classification: `pieces <sep> <cls>`, left-padded.
"""

import dataclasses
from typing import Dict, List, Sequence, Tuple

import numpy as np

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.tasks.text_files import read_utf8_lines
from xlnet_tf.text.packing import SEG_A, SEG_CLS, SEG_PAD
from xlnet_tf.text.read_report import ReadReport

IGNORED = -1


@dataclasses.dataclass
class TaggedSentence:
  words: List[str]
  tags: List[str]
  where: str


def read_conll(path: str, report: ReadReport, tag_column: int = -1) -> List[TaggedSentence]:
  """CoNLL files: `word ... tag` per line, blank lines between sentences, -DOCSTART- skipped."""
  sentences, words, tags, start = [], [], [], 1
  for number, line in enumerate(read_utf8_lines(path), start=1):
    fields = line.split()
    if not fields or fields[0] == "-DOCSTART-":
      if words:
        sentences.append(TaggedSentence(words, tags, f"{path}:{start}"))
      words, tags, start = [], [], number + 1
      continue
    if len(fields) < 2:
      raise UserInputError(f"{path}:{number}: expected 'word ... tag', got {line.strip()!r}")
    words.append(fields[0])
    tags.append(fields[tag_column])
  if words:
    sentences.append(TaggedSentence(words, tags, f"{path}:{start}"))
  report.read += len(sentences)
  return sentences


def label_list(sentences: Sequence[TaggedSentence]) -> List[str]:
  """The tags seen, 'O' first, then sorted."""
  tags = sorted({tag for sentence in sentences for tag in sentence.tags} - {"O"})
  return ["O"] + tags


def encode_tagged(tokenizer, sentences: Sequence[TaggedSentence], max_seq_length: int,
                  labels: Sequence[str], report: ReadReport) -> Dict[str, np.ndarray]:
  """input_ids, segment_ids, input_mask, label_ids (-1 = no loss), word_index (-1 = none)."""
  sep, cls = tokenizer.special_ids.sep, tokenizer.special_ids.cls
  pad = max(tokenizer.special_ids.pad, 0)
  index_of = {label: i for i, label in enumerate(labels)}
  count = len(sentences)
  shape = [count, max_seq_length]
  out = {"input_ids": np.full(shape, pad, np.int32),
         "segment_ids": np.full(shape, SEG_PAD, np.int32),
         "input_mask": np.zeros(shape, np.float32),
         "label_ids": np.full(shape, IGNORED, np.int32),
         "word_index": np.full(shape, IGNORED, np.int32)}
  all_words = [word for sentence in sentences for word in sentence.words]
  word_pieces = iter(tokenizer.encode_batch(all_words))
  for row, sentence in enumerate(sentences):
    pieces, piece_labels, piece_words = [], [], []
    for position, tag in enumerate(sentence.tags):
      if tag not in index_of:
        raise UserInputError(f"{sentence.where}: tag {tag!r} is not in the label set "
                             f"{list(labels)}")
      ids = next(word_pieces) or [tokenizer.special_ids.unk]
      pieces.extend(ids)
      piece_labels.extend([index_of[tag]] + [IGNORED] * (len(ids) - 1))
      piece_words.extend([position] + [IGNORED] * (len(ids) - 1))
    room = max_seq_length - 2
    if len(pieces) > room:
      report.note(f"truncated to max_seq_length={max_seq_length} (the last words get no "
                  "prediction)", sentence.where)
      pieces, piece_labels, piece_words = pieces[:room], piece_labels[:room], piece_words[:room]
    tokens = pieces + [sep, cls]
    start = max_seq_length - len(tokens)
    out["input_ids"][row, start:] = tokens
    out["segment_ids"][row, start:] = [SEG_A] * (len(pieces) + 1) + [SEG_CLS]
    out["input_mask"][row, start:] = 1.0
    out["label_ids"][row, start:start + len(pieces)] = piece_labels
    out["word_index"][row, start:start + len(pieces)] = piece_words
  return out


def word_predictions(logits, word_index, sentences: Sequence[TaggedSentence],
                     labels: Sequence[str]) -> List[List[str]]:
  """Tags per word from piece logits [N, T, L]; truncated words get 'O'."""
  predicted = np.asarray(logits).argmax(-1)
  result = []
  for row, sentence in enumerate(sentences):
    tags = ["O"] * len(sentence.words)
    for column in np.flatnonzero(word_index[row] >= 0):
      tags[word_index[row, column]] = labels[predicted[row, column]]
    result.append(tags)
  return result


def tagging_scores(logits, features, sentences: Sequence[TaggedSentence],
                   labels: Sequence[str]):
  """(entity precision / recall / F1 against the sentences' tags, predicted tags per word)."""
  predicted = word_predictions(logits, features["word_index"], sentences, labels)
  return entity_f1([s.tags for s in sentences], predicted), predicted


def entity_spans(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
  """(type, begin, end) of each entity, IOB1 or IOB2 (as conlleval: an I- tag continuing a
  different type, or following O, starts a new entity)."""
  spans, current = [], None
  for position, tag in enumerate(list(tags) + ["O"]):
    prefix, _, kind = tag.partition("-")
    starts = prefix == "B" or (prefix == "I" and (current is None or current[0] != kind))
    if current is not None and (prefix == "O" or starts):
      spans.append((current[0], current[1], position))
      current = None
    if starts:
      current = (kind, position)
  return spans


def entity_f1(gold_sequences, predicted_sequences):
  """Entity-level precision, recall, F1 (an entity counts when type and extent both match)."""
  gold_total = predicted_total = correct = 0
  for gold, predicted in zip(gold_sequences, predicted_sequences):
    gold_spans, predicted_spans = set(entity_spans(gold)), set(entity_spans(predicted))
    gold_total += len(gold_spans)
    predicted_total += len(predicted_spans)
    correct += len(gold_spans & predicted_spans)
  precision = correct / predicted_total if predicted_total else 0.0
  recall = correct / gold_total if gold_total else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"precision": precision, "recall": recall, "f1": f1}
