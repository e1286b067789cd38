"""RACE (reading comprehension, 4 options): reading the folders and encoding the options.

Each option is `article <sep> question-with-option <sep> <cls>`: when the question has a
blank "_", the option fills it, otherwise it follows the question (as the original run_race).
The article is truncated first (longest-first), from its end.
"""

import dataclasses
import json
import os
from typing import Dict, List, Sequence

import numpy as np

from xlnet_tf.tasks.classification import encode_examples
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.utils import files as file_system

ANSWERS = "ABCD"


@dataclasses.dataclass
class RaceQuestion:
  article: str
  question: str
  options: List[str]
  answer: int  # index into options; -1 when unknown
  level: str   # middle or high
  where: str


def read_race(data_dir: str, split: str, report: ReadReport,
              levels: Sequence[str] = ("middle", "high")) -> List[RaceQuestion]:
  """The questions of data_dir/split/{middle,high}/*.txt. Outside the test split every question
  needs its answer (A-D): a question without one is a counted skip, never an answer -1."""
  questions = []
  answers_required = split != "test"
  for level in levels:
    paths = sorted(file_system.glob(os.path.join(data_dir, split, level, "*.txt")))
    if not paths:
      raise FileNotFoundError(f"{os.path.join(data_dir, split, level)}: no *.txt files")
    for path in paths:
      try:
        with file_system.open_file(path) as handle:
          record = json.load(handle)
        pairs = list(zip(record["questions"], record["options"]))
        article = record["article"]
      except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        report.skip(f"not a RACE JSON file ({type(error).__name__})", path)
        continue
      answers = record.get("answers") or []
      for index, (question, options) in enumerate(pairs):
        where = f"{path}#{index}"
        letter = str(answers[index]) if index < len(answers) else ""
        answer = ANSWERS.find(letter) if len(letter) == 1 else -1
        if len(options) != 4:
          report.skip(f"{len(options)} options instead of 4", where)
        elif answer < 0 and answers_required:
          report.skip("no answer (one of A, B, C, D)", where)
        else:
          questions.append(RaceQuestion(article, question, list(options), answer, level, where))
  report.read += len(questions)
  return questions


def race_accuracy(logits, features) -> Dict[str, float]:
  """Accuracy over all questions and per level (middle / high school)."""
  correct = np.asarray(logits).argmax(-1) == features["label"]
  high = features["level"] == 1
  return {"accuracy": float(correct.mean()),
          "middle": float(correct[~high].mean()) if (~high).any() else float("nan"),
          "high": float(correct[high].mean()) if high.any() else float("nan")}


def option_text(question: str, option: str) -> str:
  return question.replace("_", option) if "_" in question else f"{question} {option}"


def encode_race(tokenizer, questions: Sequence[RaceQuestion], max_seq_length: int,
                report: ReadReport = None) -> Dict[str, np.ndarray]:
  """input_ids / segment_ids / input_mask [N, 4, T], label [N], level [N] (0 middle, 1 high)."""
  examples = [TextExample(q.article, option_text(q.question, option), None, q.where)
              for q in questions for option in q.options]
  flat = encode_examples(tokenizer, examples, max_seq_length, report)
  out = {key: value.reshape(len(questions), 4, max_seq_length) for key, value in flat.items()}
  out["label"] = np.array([q.answer for q in questions], np.int32)
  out["level"] = np.array([q.level == "high" for q in questions], np.int32)
  return out
