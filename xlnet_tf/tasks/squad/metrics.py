"""SQuAD's official EM / F1 and the SQuAD 2.0 null-score threshold search.

The normalisation is the official evaluation script's: lower case, no punctuation, no
articles (a, an, the), single spaces. SQuAD 2.0: a question without answer scores 1 only when
the prediction is empty; the null-score threshold is searched on dev to maximise F1.
"""

import collections
import re
import string
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from xlnet_tf.tasks.squad import SquadExample
from xlnet_tf.tasks.squad.decoding import apply_null_threshold, decode

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
  text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, truth: str) -> float:
  return float(normalize_answer(prediction) == normalize_answer(truth))


def token_f1(prediction: str, truth: str) -> float:
  predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
  if not predicted or not gold:  # no-answer: right only when both are empty
    return float(predicted == gold)
  common = collections.Counter(predicted) & collections.Counter(gold)
  overlap = sum(common.values())
  if overlap == 0:
    return 0.0
  precision, recall = overlap / len(predicted), overlap / len(gold)
  return 2 * precision * recall / (precision + recall)


def squad_scores(examples: Sequence[SquadExample], predictions: Dict[str, str]) -> Dict:
  """Official EM and F1 (percent), max over the reference answers."""
  exact, f1 = [], []
  for example in examples:
    truths = [a["text"] for a in example.answers] or [""]
    prediction = predictions.get(example.qas_id, "")
    exact.append(max(exact_match(prediction, t) for t in truths))
    f1.append(max(token_f1(prediction, t) for t in truths))
  return {"exact": 100.0 * float(np.mean(exact)), "f1": 100.0 * float(np.mean(f1)),
          "total": len(examples)}


def best_null_threshold(examples, predictions, null_scores) -> Tuple[float, Dict]:
  """The threshold that maximises dev F1, by one sweep over the sorted null scores."""
  answer_f1 = np.array([max(token_f1(predictions.get(e.qas_id, ""), t["text"])
                            for t in e.answers) if e.answers else
                        float(predictions.get(e.qas_id, "") == "") for e in examples])
  null_f1 = np.array([0.0 if e.answers else 1.0 for e in examples])
  scores = np.array([null_scores[e.qas_id] for e in examples], np.float64)
  order = np.argsort(-scores, kind="mergesort")  # the most "no answer" first
  totals = np.concatenate([[answer_f1.sum()],
                           answer_f1.sum() + np.cumsum((null_f1 - answer_f1)[order])])
  nulled = int(np.argmax(totals))  # how many of the top scores become "no answer"
  threshold = np.inf if nulled == 0 else float(scores[order[nulled - 1]]) - 1e-9
  return threshold, squad_scores(examples, apply_null_threshold(predictions, null_scores,
                                                                threshold))


def evaluate_predictions(examples: Sequence[SquadExample], windows, outputs,
                         max_answer_length: int, threshold: Optional[float] = None):
  """Decodes the head's outputs over all windows and scores them when the examples have
  answers. SQuAD 2.0: without a given `threshold`, the one that maximises F1 here is applied.
  Returns (predictions {qas_id: text}, null scores {qas_id: score}, result dict)."""
  predictions, nulls = decode(examples, windows, outputs, max_answer_length)
  result = {"has_answers": any(e.answers or e.is_impossible for e in examples)}
  if result["has_answers"]:
    result["without_null"] = squad_scores(examples, predictions)
    if threshold is None and any(e.is_impossible for e in examples):
      threshold, result["best_threshold_scores"] = best_null_threshold(examples, predictions,
                                                                        nulls)
  if threshold is not None:
    predictions = apply_null_threshold(predictions, nulls, threshold)
    result["null_score_threshold"] = threshold
  if result["has_answers"]:
    result["scores"] = squad_scores(examples, predictions)
  return predictions, nulls, result
