"""Intrinsic evaluations of a pretrained LM on held-out text: what the permutation LM models
that a denoising LM cannot (XLNet, Section 2.6), measured by span length.

- Span infilling: a run of 1, 2, 3 or 4 whole words of a held-out sentence is blanked and
  filled greedily (xlnet_tf.inference.infilling.fill) in an order; exact match of the whole span and
  the share of its pieces right.
- Cloze ranking: the true span against k distractor spans of the same number of pieces taken
  from other held-out sentences; right when span_log_prob ranks the true one strictly first.

The paper's mechanism predicts equal one-word results and a permutation-LM advantage that
grows with the span length (the blanks' dependence on each other).
"""

import dataclasses
import glob
from typing import Dict, List, Optional, Sequence

import numpy as np

from xlnet_tf.inference import infilling
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining.data.default_data import read_text_files

SPAN_WORDS = (1, 2, 3, 4)
# Orders worth reporting per objective: the permutation LM in all of them; the masked LM's
# own factorization (independent) and its best sequential one; left to right for clm.
ORDERS_OF = {"perm": infilling.ORDERS, "mlm": ("independent", "confidence", "left_to_right"),
             "clm": ("left_to_right",)}


@dataclasses.dataclass
class BlankedSentence:
  """A held-out sentence's pieces (a window around the span) and the span: pieces
  [start, start + length), `words` whole words."""
  pieces: List[int]
  start: int
  length: int
  words: int

  @property
  def span(self) -> List[int]:
    return self.pieces[self.start:self.start + self.length]

  def parts(self, fill_length: Optional[int] = None) -> list:
    """Parts for infilling.packed_with_blanks: text, a blank, text."""
    return [self.pieces[:self.start], fill_length or self.length,
            self.pieces[self.start + self.length:]]


def held_out_sentences(pattern: str) -> List[str]:
  """The lines (sentences) of the text files matching the glob `pattern`; run/pretrain.py's
  held-out documents are OUTPUT_DIR/data/corpus/valid-*.txt."""
  files = sorted(glob.glob(pattern))
  if not files:
    raise UserInputError(f"no held-out text matches {pattern!r}")
  return [line for document in read_text_files(files) for line in document]


def blanked_sentences(tokenizer, sentences: Sequence[str], span_words: int, count: int,
                      seed: int = 0, max_pieces: int = 48) -> List[BlankedSentence]:
  """Up to `count` sentences (in a seeded order), each with a random run of `span_words`
  whole words blanked and at least one other word left; longer sentences keep a window of
  `max_pieces` pieces around the span."""
  rng = np.random.default_rng(seed)
  examples = []
  for index in rng.permutation(len(sentences)):
    pieces = tokenizer.encode(sentences[index])
    starts = [i for i, piece in enumerate(pieces) if tokenizer.word_start[piece]]
    if not starts or starts[0] != 0 or len(starts) < span_words + 1:
      continue
    word = int(rng.integers(len(starts) - span_words + 1))
    bounds = starts + [len(pieces)]
    start, end = bounds[word], bounds[word + span_words]
    if end - start > max_pieces // 2:
      continue
    left = max(0, min(start - (max_pieces - (end - start)) // 2, len(pieces) - max_pieces))
    window = pieces[left:left + max_pieces]
    examples.append(BlankedSentence(window, start - left, end - start, span_words))
    if len(examples) == count:
      break
  return examples


def _packed_length(examples) -> int:
  """One padded length for every batch of `examples` (<sep> <cls> after the pieces)."""
  return max(len(example.pieces) for example in examples) + 2


def _batches(items, size):
  for begin in range(0, len(items), size):
    yield items[begin:begin + size]


def infilling_accuracy(pretrainer, tokenizer, examples: Sequence[BlankedSentence], order: str,
                       batch_size: int = 32, seed: int = 0) -> Dict[str, float]:
  """{"exact": share of spans filled exactly, "pieces": share of blanked pieces right}."""
  exact, right, total = 0, 0, 0
  for batch in _batches(list(examples), batch_size):
    packed = infilling.packed_with_blanks(tokenizer, [example.parts() for example in batch],
                                          length=_packed_length(examples))
    filled = infilling.fill(pretrainer, **packed.inputs(), order=order, seed=seed,
                            **infilling.special_id_arguments(tokenizer)).numpy()
    for row, example in enumerate(batch):
      predicted = filled[row][packed.fill_mask[row] > 0]
      hits = predicted == np.asarray(example.span)
      exact += bool(hits.all())
      right += int(hits.sum())
      total += example.length
  return {"exact": exact / len(examples), "pieces": right / total}


def cloze_accuracy(pretrainer, tokenizer, examples: Sequence[BlankedSentence],
                   distractors: int = 4, seed: int = 0, order: str = "left_to_right",
                   batch_size: int = 32) -> Dict[str, float]:
  """{"accuracy": share of examples whose true span span_log_prob ranks strictly first among
  it and `distractors` spans of as many pieces from other examples, "examples": how many had
  enough such spans (the rest are skipped)}."""
  rng = np.random.default_rng(seed)
  by_length = {}
  for index, example in enumerate(examples):
    by_length.setdefault(example.length, []).append(index)
  rows, owners = [], []
  for index, example in enumerate(examples):
    others = [i for i in by_length[example.length]
              if i != index and examples[i].span != example.span]
    if len(others) < distractors:
      continue
    chosen = rng.choice(others, distractors, replace=False)
    for candidate in [example.span] + [examples[i].span for i in chosen]:
      rows.append((example.parts(), candidate))
      owners.append(index)
  if not rows:
    return {"accuracy": float("nan"), "examples": 0}
  scores = []
  for batch in _batches(rows, batch_size):
    packed = infilling.packed_with_blanks(tokenizer, [parts for parts, _ in batch],
                                          fills=[fill for _, fill in batch],
                                          length=_packed_length(examples))
    scores.extend(infilling.span_log_prob(
        pretrainer, **packed.inputs(), order=order, seed=seed,
        **infilling.special_id_arguments(tokenizer)).numpy())
  scores = np.asarray(scores).reshape(-1, distractors + 1)
  right = (scores[:, 0] > scores[:, 1:].max(axis=1)).mean()
  return {"accuracy": float(right), "examples": int(len(scores))}


def intrinsic_evaluation(pretrainer, tokenizer, sentences: Sequence[str], *,
                         span_words: Sequence[int] = SPAN_WORDS, count: int = 100,
                         orders: Optional[Sequence[str]] = None, distractors: int = 4,
                         seed: int = 0, batch_size: int = 32, max_pieces: int = 48) -> Dict:
  """{span words: {"infilling": {order: scores}, "cloze": scores, "examples": n}} on `count`
  held-out sentences per span length (the same sentences for every order)."""
  objective = pretrainer.lm_objective
  orders = orders or ORDERS_OF[objective.name]
  cloze_order = ("independent" if objective.needs_mask_id else "left_to_right")
  results = {}
  for words in span_words:
    examples = blanked_sentences(tokenizer, sentences, words, count, seed + words, max_pieces)
    if not examples:
      continue
    results[words] = {
        "examples": len(examples),
        "infilling": {order: infilling_accuracy(pretrainer, tokenizer, examples, order,
                                                batch_size, seed) for order in orders},
        "cloze": cloze_accuracy(pretrainer, tokenizer, examples, distractors, seed,
                                cloze_order, batch_size)}
  return results


def intrinsic_markdown(by_variant: Dict[str, Dict]) -> str:
  """One table: per variant and span length, exact match in each order and cloze accuracy."""
  orders = sorted({order for results in by_variant.values() for words in results.values()
                   for order in words["infilling"]}, key=infilling.ORDERS.index)
  lines = ["| variant | span words | examples | " + " | ".join(
      f"exact {order}" for order in orders) + " | cloze accuracy |",
           "|---|---:|---:|" + "---:|" * (len(orders) + 1)]
  for variant, results in by_variant.items():
    for words, scores in sorted(results.items(), key=lambda item: int(item[0])):
      cells = [f"{100 * scores['infilling'][order]['exact']:.1f}"
               if order in scores["infilling"] else "" for order in orders]
      lines.append(f"| {variant} | {words} | {scores['examples']} | " + " | ".join(cells)
                   + f" | {100 * scores['cloze']['accuracy']:.1f} |")
  return "\n".join(lines) + "\n"
