"""Tiny data of every fine-tuning family, written where a test asks: a SQuAD 2.0 file, a RACE
folder, CoNLL files, classification CSVs; and the tiny model they are fine-tuned from."""

import csv
import json
import os

import numpy as np

from xlnet_tf import XLNetConfig
from xlnet_tf.text.tokenizer import XLNetTokenizer

CONTEXT = ("The class statement, introduced in Python 2.2, creates a new type; its métaclass "
           "decides how (and when) the body runs.")
WORDS = ["class", "function", "module", "value", "object", "return", "method", "string",
         "number", "list", "type", "name"]


def tiny_config_file(path, sp_model) -> str:
  """A tiny xlnet_config.json (2 layers, d_model 32) of the SentencePiece model's vocabulary."""
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size).to_json_file(str(path))
  return str(path)


def squad_file(path) -> str:
  """SQuAD 2.0: three answerable questions (one answer in two references), one impossible, in
  a context longer than a window."""
  qas = [{"id": "q1", "question": "What creates a new type?",
          "answers": [{"text": "The class statement", "answer_start": 0}]},
         {"id": "q2", "question": "What decides how the body runs?",
          "answers": [{"text": "its métaclass", "answer_start": CONTEXT.index("its")},
                      {"text": "métaclass", "answer_start": CONTEXT.index("métaclass")}]},
         {"id": "q3", "question": "Who wrote it?", "answers": [], "is_impossible": True},
         {"id": "q4", "question": "When was it introduced?",
          "answers": [{"text": "Python 2.2", "answer_start": CONTEXT.index("Python")}]}]
  with open(path, "w", encoding="utf-8") as handle:
    json.dump({"version": "v2.0", "data": [
        {"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}, handle)
  return str(path)


def race_folder(root, questions_per_file=2) -> str:
  """RACE's layout: {train,dev,test}/{middle,high}/1.txt, each a short article with questions
  (one with a blank) of four options; the test split's answers left out."""
  rng = np.random.default_rng(0)
  for split in ("train", "dev", "test"):
    for level in ("middle", "high"):
      os.makedirs(os.path.join(root, split, level))
      questions = ["Which word is named _ here?", "What does the text say?"][:questions_per_file]
      words = [str(word) for word in rng.choice(WORDS, 2)]
      record = {"article": f"The {level} text names a {words[0]} and a {words[1]}.",
                "questions": questions,
                "options": [[str(w) for w in rng.choice(WORDS, 4, replace=False)]
                            for _ in questions],
                "answers": [] if split == "test" else [str(letter) for letter in rng.choice(
                    list("ABCD"), len(questions))]}
      with open(os.path.join(root, split, level, "1.txt"), "w", encoding="utf-8") as handle:
        json.dump(record, handle)
  return str(root)


CONLL_SENTENCES = [
    [("EU", "B-ORG"), ("rejects", "O"), ("German", "B-MISC"), ("call", "O")],
    [("Peter", "B-PER"), ("Blackburn", "I-PER"), ("speaks", "O")],
    [("The", "O"), ("European", "B-ORG"), ("Commission", "I-ORG"), ("said", "O"),
     ("Thursday", "O")],
    [("Germany", "B-LOC"), ("imports", "O"), ("sheep", "O"), ("from", "O"),
     ("Britain", "B-LOC")]]


def conll_file(path, sentences=CONLL_SENTENCES) -> str:
  """CoNLL-2003 columns (word POS chunk tag), -DOCSTART- first, a blank line between
  sentences."""
  lines = ["-DOCSTART- -X- -X- O", ""]
  for sentence in sentences:
    lines += [f"{word} NN I-NP {tag}" for word, tag in sentence] + [""]
  with open(path, "w", encoding="utf-8") as handle:
    handle.write("\n".join(lines))
  return str(path)


def reordering_task(path, count, seed, header=("text", "text_b", "label"), names=(0, 1)):
  """Label names[1]: B is A's words in another order; names[0]: B holds other words."""
  rng = np.random.default_rng(seed)
  with open(path, "w", newline="", encoding="utf-8") as handle:
    writer = csv.writer(handle)
    writer.writerow(header)
    for _ in range(count):
      a = list(rng.choice(WORDS, 3, replace=False))
      if rng.random() < 0.5:
        b, label = list(rng.permutation(a)), 1
      else:
        b, label = list(rng.choice([w for w in WORDS if w not in a], 3, replace=False)), 0
      writer.writerow([" ".join(a), " ".join(b), names[label]])
  return str(path)
