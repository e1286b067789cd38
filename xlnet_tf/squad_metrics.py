"""SQuAD decoding (top-k starts x top-k ends over all windows) and the official EM / F1.

The normalisation is the official evaluation script's: lower case, no punctuation, no
articles (a, an, the), single spaces. SQuAD 2.0: a question without answer scores 1 only when
the prediction is empty; the null-score threshold is searched on dev to maximise F1.
"""

import collections
import re
import string
from typing import Dict, Sequence, Tuple

import numpy as np

from xlnet_tf.data.squad import SquadExample, answer_text

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


def decode(examples: Sequence[SquadExample], windows: Sequence[Tuple[int, np.ndarray]],
           outputs: Dict[str, np.ndarray], max_answer_length: int = 64):
  """Best span per question over its windows, and its null score (the lowest answer-class
  logit of its windows, as the original). Returns ({qas_id: text}, {qas_id: null score})."""
  best: Dict[int, Tuple[float, str]] = {}
  null_scores: Dict[int, float] = {}
  for feature, (example_index, char_spans) in enumerate(windows):
    example = examples[example_index]
    null = float(outputs["cls_logits"][feature])
    null_scores[example_index] = min(null, null_scores.get(example_index, np.inf))
    starts = outputs["start_top_index"][feature]
    for k, start in enumerate(starts):
      for e, end in enumerate(outputs["end_top_index"][feature][k]):
        if char_spans[start, 0] < 0 or char_spans[end, 0] < 0 or end < start:
          continue
        if end - start + 1 > max_answer_length:
          continue
        score = float(outputs["start_top_log_probs"][feature][k]
                      + outputs["end_top_log_probs"][feature][k][e])
        if example_index not in best or score > best[example_index][0]:
          best[example_index] = (score, answer_text(example, char_spans, int(start), int(end)))
  predictions = {ex.qas_id: best.get(i, (0.0, ""))[1] for i, ex in enumerate(examples)}
  nulls = {ex.qas_id: null_scores.get(i, np.inf) for i, ex in enumerate(examples)}
  return predictions, nulls


def apply_null_threshold(predictions: Dict[str, str], null_scores: Dict[str, float],
                         threshold: float) -> Dict[str, str]:
  """SQuAD 2.0: answer "" where the null score exceeds the threshold."""
  return {qid: ("" if null_scores[qid] > threshold else text)
          for qid, text in predictions.items()}


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
