"""RACE (reading comprehension, 4 options): reading the folders, encoding the options, and the
task (RaceTask: the multiple-choice head, dev accuracy, test answers).

Each option is `article <sep> question-with-option <sep> <cls>`: when the question has a
blank "_", the option fills it, otherwise it follows the question (as the original run_race).
The article is truncated first (longest-first), from its end.
"""

import dataclasses
import json
import os
from typing import Dict, List, Sequence

import keras
import numpy as np

from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.tasks.classification import encode_examples
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.tasks.finetuning import feature_dataset, predict
from xlnet_tf.tasks.task import FinetuningTask, TaskOptions
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


DEV_METRICS_FILE = "dev_metrics.json"
TEST_PREDICTIONS_FILE = "test_predictions.json"  # {question (file#index): answer letter}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RaceOptions(TaskOptions):
  """RACE's folder (TaskOptions: the rest of the run): data_dir/{train,dev,test}/{middle,
  high}/*.txt; dev is scored while training."""
  data_dir: str
  max_seq_length: int = 512


class RaceTask(FinetuningTask):
  """Multiple-choice reading comprehension on RACE (RaceOptions): accuracy overall, middle
  and high."""
  metric = "accuracy"
  training_rows = "questions"
  sequences_per_example = len(ANSWERS)

  def __init__(self, options: RaceOptions):
    super().__init__(options)
    self.splits: Dict[str, Dict[str, np.ndarray]] = {}
    self.tokenizer = None  # load_data's: the test split is read when predicting

  def load(self, tokenizer, split: str):
    """(questions, features) of a split, said in one line."""
    report = ReadReport()
    questions = read_race(self.options.data_dir, split, report)
    features = encode_race(tokenizer, questions, self.options.max_seq_length, report)
    print(f"{split}: {report.summary()}")
    return questions, features

  def load_data(self, tokenizer) -> None:
    self.tokenizer = tokenizer
    if self.options.do_eval or self.options.do_train:
      self.splits["dev"] = self.load(tokenizer, "dev")[1]
    if self.options.do_train:
      self.splits["train"] = self.load(tokenizer, "train")[1]

  def train_examples(self) -> int:
    return len(self.splits["train"]["label"])

  def build_head(self, backbone) -> XLNetMultipleChoice:
    return XLNetMultipleChoice(backbone)

  def train_dataset(self, options):
    return feature_dataset(self.splits["train"], options.batch_size, label_key="label",
                           shuffle=True, seed=options.runtime.seed, repeat=True)

  def loss(self):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def evaluator(self, model, batch_size: int):
    dev = self.splits["dev"]
    return lambda: race_accuracy(predict(model, dev, batch_size), dev)

  def write_outputs(self, model) -> Dict:
    options, outputs = self.options, {}
    batch_size = options.finetuning.batch_size
    if options.do_eval:
      outputs["dev"] = scores = self.evaluator(model, batch_size)()
      self.write_json(DEV_METRICS_FILE, scores)
      print(f"dev: {scores}")
    if options.do_predict:
      questions, features = self.load(self.tokenizer, "test")
      logits = predict(model, features, batch_size)
      outputs["predictions"] = answers = {
          q.where: ANSWERS[int(i)] for q, i in zip(questions, np.argmax(logits, -1))}
      path = self.write_json(TEST_PREDICTIONS_FILE, answers)
      print(f"Wrote {len(answers)} answers to {path}")
    return outputs
