"""SQuAD 1.1 / 2.0 fine-tuning as a task (tasks.task): the windows of the training and
prediction files, the question-answering head, dev F1 while training, and predictions.json,
null_odds.json (the official evaluation script's inputs) and results.json."""

import dataclasses
import os
from typing import Dict, Optional

from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.tasks.finetuning import feature_dataset, predict
from xlnet_tf.tasks.squad.features import build_features, read_squad
from xlnet_tf.tasks.squad.metrics import evaluate_predictions
from xlnet_tf.tasks.task import FinetuningTask, TaskOptions, require_files
from xlnet_tf.text.read_report import ReadReport

PREDICTIONS_FILE = "predictions.json"  # {question id: answer text}
NULL_ODDS_FILE = "null_odds.json"      # {question id: null score}
RESULTS_FILE = "results.json"          # the scores, the null-score threshold applied


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadOptions(TaskOptions):
  """SQuAD's files and settings (TaskOptions: the rest of the run).

  train_file: the SQuAD JSON trained on (do_train).
  predict_file: the SQuAD JSON answered (do_predict, do_eval); when it has answers it is also
    the dev data scored while training.
  doc_stride: the step between context windows (pieces); max_query_length: question pieces
    kept; max_answer_length: the longest answer (pieces); start_n_top, end_n_top: the starts
    kept when decoding, and the ends per start.
  null_score_threshold: SQuAD 2.0: answer "" above this null score (None: the best on
    predict_file when it has answers).
  """
  train_file: Optional[str] = None
  predict_file: Optional[str] = None
  max_seq_length: int = 512
  doc_stride: int = 128
  max_query_length: int = 64
  max_answer_length: int = 64
  start_n_top: int = 5
  end_n_top: int = 5
  null_score_threshold: Optional[float] = None


@dataclasses.dataclass
class SquadSplit:
  """One file's examples and windows: `arrays` the head's inputs (+ training targets),
  `windows[f]` = (example index, the context characters of each position)."""
  examples: list
  arrays: Dict
  windows: list


class SquadTask(FinetuningTask):
  """Question answering over SQuAD files (SquadOptions)."""
  metric = "f1"
  training_rows = "windows"
  operational_fields = ("null_score_threshold",)  # applied to predictions after training

  def __init__(self, options: SquadOptions):
    super().__init__(options)
    self.predict_data: Optional[SquadSplit] = None
    self.train_data: Optional[SquadSplit] = None

  def check(self) -> None:
    require_files(self.options, {"do_train": "train_file", "do_eval": "predict_file",
                                 "do_predict": "predict_file"})

  def load_data(self, tokenizer) -> None:
    if self.options.predict_file:
      self.predict_data = self._read(tokenizer, self.options.predict_file, training=False)
    if self.options.do_train:
      self.train_data = self._read(tokenizer, self.options.train_file, training=True)

  def _read(self, tokenizer, path: str, training: bool) -> SquadSplit:
    options = self.options
    report = ReadReport()
    examples = read_squad(path, report)
    arrays, windows = build_features(tokenizer, examples, options.max_seq_length,
                                     options.doc_stride, options.max_query_length,
                                     training=training, report=report)
    print(f"{os.path.basename(path)}: {report.summary()}; {len(windows)} windows")
    return SquadSplit(examples, arrays, windows)

  def train_examples(self) -> int:
    return len(self.train_data.arrays["input_ids"])

  def build_head(self, backbone) -> XLNetQuestionAnswering:
    return XLNetQuestionAnswering(backbone, self.options.start_n_top, self.options.end_n_top)

  def train_dataset(self, options):
    return feature_dataset(self.train_data.arrays, options.batch_size, shuffle=True,
                           seed=options.runtime.seed, repeat=True,
                           extra_keys=XLNetQuestionAnswering.extra_inputs
                           + XLNetQuestionAnswering.training_targets)

  def evaluator(self, model, batch_size: int):
    if self.predict_data is None or not any(e.answers for e in self.predict_data.examples):
      return None
    return lambda: self.predict_and_score(model, batch_size)[2]["scores"]

  def predict_and_score(self, model, batch_size: int, threshold: Optional[float] = None):
    """(predictions, null scores, result) of `model` on predict_file (squad.metrics
    .evaluate_predictions)."""
    data = self.predict_data
    outputs = predict(model, data.arrays, batch_size,
                      extra_keys=XLNetQuestionAnswering.extra_inputs)
    return evaluate_predictions(data.examples, data.windows, outputs,
                                self.options.max_answer_length, threshold)

  def best_line(self, result: Dict) -> Optional[str]:
    best = result["best"]
    return best and f"Best dev F1 {best['f1']:.2f} at step {best['step']}"

  def write_outputs(self, model) -> Dict:
    options = self.options
    if not (options.do_predict or options.do_eval):
      return {}
    predictions, nulls, result = self.predict_and_score(
        model, options.finetuning.batch_size, threshold=options.null_score_threshold)
    if result["has_answers"]:
      print(f"EM {result['scores']['exact']:.2f}  F1 {result['scores']['f1']:.2f}")
    self.write_json(PREDICTIONS_FILE, predictions)
    self.write_json(NULL_ODDS_FILE, {k: float(v) for k, v in nulls.items()})
    self.write_json(RESULTS_FILE, result)
    print(f"Wrote {PREDICTIONS_FILE} and {NULL_ODDS_FILE} (the official script's inputs) to "
          f"{options.output_dir}")
    return {"dev": result, "predictions": predictions}
