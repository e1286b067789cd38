"""SQuAD 1.1 / 2.0: reading, windows over long contexts, answers between characters and pieces.

Layout per window: `context-window <sep> question <sep> <cls>`, left-padded; segment ids
context 0, question 1, <cls> 2, padding 4. The context is split into whitespace-separated
words with their character offsets; each word is tokenized on its own and every piece gets
the characters it covers (when preprocessing leaves the word as it is, which holds for most
words; otherwise each piece of the word covers the whole word). Answers map to pieces by
characters, and a predicted piece span maps back to the exact original characters. Windows
advance by doc_stride pieces. p_mask is 1 where no answer can start or end (question,
separators, padding); <cls> stands for "no answer".
"""

import dataclasses
import json
from typing import Dict, List, Optional, Sequence

import numpy as np

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.question_answering import answer_position_mask
from xlnet_tf.tasks.text_files import read_utf8_lines
from xlnet_tf.text.packing import SEG_PAD, pack_pair
from xlnet_tf.text.read_report import ReadReport


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question: str
  context: str
  answers: List[Dict]       # {"text", "answer_start"} (all references, for evaluation)
  is_impossible: bool
  where: str


def read_squad(path: str, report: ReadReport) -> List[SquadExample]:
  try:
    data = json.loads("".join(read_utf8_lines(path)))["data"]
  except (json.JSONDecodeError, KeyError, TypeError) as error:
    raise UserInputError(f"{path}: not a SQuAD JSON file ({error})") from None
  examples = []
  for article_index, article in enumerate(data):
    place = f"{path}: data[{article_index}]"
    try:
      _read_article(article, place, examples, report)
    except (KeyError, TypeError, AttributeError, IndexError) as error:
      # A field missing or of another type (a paragraph without "context", a number as "qas"):
      # not the SQuAD layout, in the article named.
      raise UserInputError(f"{place}: not a SQuAD article ({type(error).__name__}: {error}); "
                           "expected {\"paragraphs\": [{\"context\": ..., \"qas\": [{\"id\", "
                           "\"question\", \"answers\": [{\"text\", \"answer_start\"}]}]}]}"
                           ) from None
  report.read += len(examples)
  return examples


def _read_article(article, place: str, examples: List[SquadExample], report: ReadReport):
  for paragraph_index, paragraph in enumerate(article.get("paragraphs", [])):
    context = paragraph["context"]
    for qa in paragraph["qas"]:
      where = f"{place}.paragraphs[{paragraph_index}] id {qa['id']}"
      impossible = bool(qa.get("is_impossible", False))
      answers = [] if impossible else qa.get("answers", [])
      valid = [a for a in answers
               if context[a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]]
      if answers and not valid:
        report.skip("answer text not found at answer_start in its context", where)
        continue
      examples.append(SquadExample(qa["id"], qa["question"], context, valid, impossible, where))


@dataclasses.dataclass
class ContextWords:
  """Whitespace-separated words of a context with their character spans."""
  starts: List[int]
  ends: List[int]

  @classmethod
  def of(cls, context: str) -> "ContextWords":
    starts, ends, inside = [], [], False
    for position, char in enumerate(context):
      if char.isspace():
        if inside:
          ends.append(position)
        inside = False
      elif not inside:
        starts.append(position)
        inside = True
    if inside:
      ends.append(len(context))
    return cls(starts, ends)


def piece_character_spans(tokenizer, words: ContextWords, context: str):
  """(pieces, char_start, char_end) of a context, pieces tokenized word by word."""
  texts = [context[b:e] for b, e in zip(words.starts, words.ends)]
  pieces, starts, ends = [], [], []
  for word_begin, word_end, text, ids in zip(words.starts, words.ends, texts,
                                             tokenizer.encode_batch(texts)):
    lengths = [len(tokenizer.processor.IdToPiece(i).lstrip("\u2581")) for i in ids]
    exact = tokenizer.preprocess(text) == text and sum(lengths) == len(text)
    position = word_begin
    for length in lengths:
      starts.append(position if exact else word_begin)
      ends.append(position + length if exact else word_end)
      position += length
    pieces.extend(ids)
  return pieces, np.asarray(starts, np.int32), np.asarray(ends, np.int32)


def build_features(tokenizer, examples: Sequence[SquadExample], max_seq_length: int = 512,
                   doc_stride: int = 128, max_query_length: int = 64,
                   training: bool = False, report: Optional[ReadReport] = None):
  """Windows of every example. Returns (arrays, windows): arrays has input_ids, segment_ids,
  input_mask, p_mask [F, T], cls_index [F]; with training also start_positions,
  end_positions, is_impossible [F]. `windows[f]` = (example index, char_spans [T, 2]: the
  context characters of each position, -1 outside the context)."""
  rows, windows = [], []
  questions = tokenizer.encode_batch([e.question for e in examples])
  for index, (example, question) in enumerate(zip(examples, questions)):
    pieces, char_start, char_end = piece_character_spans(
        tokenizer, ContextWords.of(example.context), example.context)
    if len(question) > max_query_length and report is not None:
      report.note(f"with the question cut to max_query_length={max_query_length}",
                  example.where)
    question = question[:max_query_length]
    room = max_seq_length - len(question) - 3
    if room < 1:
      raise UserInputError(f"max_seq_length={max_seq_length} leaves no room for the context next "
                           f"to a {len(question)}-piece question")
    answer_span = _answer_pieces(example, char_start, char_end) if training else None
    if training and example.answers and answer_span is None:
      # Not trained as "no answer": it has one.
      if report is not None:
        report.skip("answer does not align with context pieces", example.where)
      continue
    start = 0
    while True:
      length = min(room, len(pieces) - start)
      row, offset = _window_row(pieces[start:start + length], question, max_seq_length,
                                tokenizer.special_ids)
      spans = np.full([max_seq_length, 2], -1, np.int32)
      spans[offset:offset + length, 0] = char_start[start:start + length]
      spans[offset:offset + length, 1] = char_end[start:start + length]
      if training:
        inside = (answer_span is not None and answer_span[0] >= start
                  and answer_span[1] < start + length)
        row["is_impossible"] = float(not inside)
        row["start_positions"] = offset + answer_span[0] - start if inside else row["cls_index"]
        row["end_positions"] = offset + answer_span[1] - start if inside else row["cls_index"]
      rows.append(row)
      windows.append((index, spans))
      if start + length >= len(pieces):
        break
      start += min(length, doc_stride)
  arrays = {key: np.stack([row[key] for row in rows]) for key in rows[0]} if rows else {}
  for key in ("cls_index", "start_positions", "end_positions"):
    if key in arrays:
      arrays[key] = arrays[key].astype(np.int32)
  if arrays:  # the head's definition, as its SavedModel computes it in the graph
    arrays["p_mask"] = answer_position_mask(arrays["input_ids"], arrays["segment_ids"],
                                            tokenizer.special_ids.sep).numpy()
  return arrays, windows


def _answer_pieces(example: SquadExample, char_start, char_end):
  """(first, last) context piece covering the first answer; None without an answer or when
  no piece overlaps it."""
  if not example.answers:
    return None
  answer = example.answers[0]
  first_char = answer["answer_start"]
  last_char = first_char + len(answer["text"]) - 1
  covering = np.flatnonzero((char_end > first_char) & (char_start <= last_char))
  return (int(covering[0]), int(covering[-1])) if covering.size else None


def _window_row(window, question, max_seq_length: int, special_ids):
  """(row, offset): `window <sep> question <sep> <cls>` left-padded to max_seq_length (as the
  original, so <cls> is the last position); offset is where the window starts."""
  tokens, segments = pack_pair(window, question, special_ids.sep, special_ids.cls)
  offset = max_seq_length - len(tokens)
  row = {"input_ids": np.full(max_seq_length, max(special_ids.pad, 0), np.int32),
         "segment_ids": np.full(max_seq_length, SEG_PAD, np.int32),
         "input_mask": np.zeros(max_seq_length, np.float32),
         "cls_index": max_seq_length - 1}
  row["input_ids"][offset:] = tokens
  row["segment_ids"][offset:] = segments
  row["input_mask"][offset:] = 1.0
  return row, offset


def answer_text(example: SquadExample, char_spans: np.ndarray, start: int, end: int) -> str:
  """The original characters under pieces start..end ('' outside the context)."""
  begin, finish = char_spans[start, 0], char_spans[end, 1]
  if begin < 0 or finish < 0 or finish <= begin:
    return ""
  return example.context[begin:finish]
