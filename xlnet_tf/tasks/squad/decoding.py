"""SQuAD decoding: the best span per question (top-k starts x top-k ends over all its windows)
and its null score."""

from typing import Dict, Sequence, Tuple

import numpy as np

from xlnet_tf.tasks.squad import SquadExample, answer_text


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
