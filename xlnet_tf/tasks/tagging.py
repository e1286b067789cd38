"""Token tagging (CoNLL-2003): reading, word labels aligned to SentencePiece pieces, entity F1,
and the task (TaggingTask: the token classifier, dev entity F1, test tags in conlleval's input).

Each word is tokenized on its own; its label goes to its first piece, the other pieces are
ignored by the loss (label -1). Layout as classification: `pieces <sep> <cls>`, left-padded.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from xlnet_tf.checkpoints.labels import LABELS_FILE, saved_labels
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.tasks.finetuning import feature_dataset, predict
from xlnet_tf.tasks.task import FinetuningTask, TaskOptions, require_files
from xlnet_tf.tasks.text_files import read_utf8_lines
from xlnet_tf.text.packing import SEG_A, SEG_CLS, SEG_PAD
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

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


DEV_METRICS_FILE = "dev_metrics.json"
TEST_PREDICTIONS_FILE = "test_predictions.conll"  # word gold predicted: conlleval's input
# The file each action reads.
_FILES = {"do_train": "train_file", "do_eval": "dev_file", "do_predict": "test_file"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaggingOptions(TaskOptions):
  """CoNLL files (TaskOptions: the rest of the run): train_file (do_train), dev_file (do_eval;
  also scored while training), test_file (do_predict); tag_column: the column of the tag
  (CoNLL-2003 NER: the last)."""
  train_file: Optional[str] = None
  dev_file: Optional[str] = None
  test_file: Optional[str] = None
  tag_column: int = -1


class TaggingTask(FinetuningTask):
  """Token tagging on CoNLL files (TaggingOptions): first-piece labels, entity-level F1. The
  tags are the training file's ('O' first), saved beside the best weights; a run without
  training reads them back."""
  metric = "f1"
  training_rows = "sentences"
  operational_fields = ("test_file",)

  def __init__(self, options: TaggingOptions):
    super().__init__(options)
    self.labels: Optional[List[str]] = None
    self.splits: Dict[str, Tuple[List[TaggedSentence], Dict[str, np.ndarray]]] = {}

  def check(self) -> None:
    require_files(self.options, _FILES)

  def load_data(self, tokenizer) -> None:
    options = self.options
    read = {}
    for split, path in (("train", options.train_file), ("dev", options.dev_file),
                        ("test", options.test_file)):
      if path:
        report = ReadReport()
        read[split] = (read_conll(path, report, options.tag_column), report)
    if options.do_train:
      self.labels = label_list(read["train"][0])  # saved beside the best weights
    else:
      self.labels = saved_labels(self.best_dir)
      if self.labels is None:
        raise UserInputError(f"No --train_file and no {LABELS_FILE} in {self.best_dir}")
    for split, (sentences, report) in read.items():
      self.splits[split] = (sentences, encode_tagged(tokenizer, sentences,
                                                     options.max_seq_length, self.labels,
                                                     report))
      print(f"{split}: {report.summary()}")

  def train_examples(self) -> int:
    return len(self.splits["train"][1]["label_ids"])

  def build_head(self, backbone) -> XLNetTokenClassifier:
    model = XLNetTokenClassifier(backbone, len(self.labels))
    if self.options.do_train:
      model.labels = list(self.labels)  # saved with the weights: best/ is whole at every save
    return model

  def train_dataset(self, options):
    return feature_dataset(self.splits["train"][1], options.batch_size, label_key="label_ids",
                           shuffle=True, seed=options.runtime.seed, repeat=True)

  def evaluator(self, model, batch_size: int):
    if "dev" not in self.splits:
      return None
    return lambda: self.scores(model, "dev", batch_size)[0]

  def scores(self, model, split: str, batch_size: int):
    """(entity scores, tags per word) of `model` on a split."""
    sentences, features = self.splits[split]
    return tagging_scores(predict(model, features, batch_size), features, sentences,
                          self.labels)

  def history(self, result: Dict):
    return result["history"]

  def best_line(self, result: Dict) -> Optional[str]:
    best = result["best"]
    return best and f"Best dev entity F1: {best['f1']:.4f} at step {best['step']}"

  def write_outputs(self, model) -> Dict:
    options, outputs = self.options, {}
    batch_size = options.finetuning.batch_size
    if options.do_eval:
      outputs["dev"] = scores = self.scores(model, "dev", batch_size)[0]
      self.write_json(DEV_METRICS_FILE, scores)
      print(f"dev: {scores}")
    if options.do_predict:
      sentences, _ = self.splits["test"]
      outputs["predictions"] = predicted = self.scores(model, "test", batch_size)[1]
      blocks = ["".join(f"{word} {gold} {tag}\n" for word, gold, tag in zip(
          sentence.words, sentence.tags, tags)) + "\n"
                for sentence, tags in zip(sentences, predicted)]
      path = self.output_path(TEST_PREDICTIONS_FILE)
      files.makedirs(options.output_dir)
      files.write_text(path, "".join(blocks))  # whole or not at all
      print(f"Wrote {path} (word gold predicted: the input of conlleval)")
    return outputs
