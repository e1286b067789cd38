"""How much context a left-to-right LM uses (Transformer-XL, Section 4.3 and Appendix C).

- For one model, the columns of the paper's Table 5 from perplexities at several evaluation
  attention lengths (lm_evaluation): "PPL init" at the training attention length, "PPL best"
  over all of them, and "Attn Len", the shortest attention length reaching the best.
- For a group of models, the Relative Effective Context Length (RECL, Appendix C). With
  l_i(c, t) the loss of model i on token t given exactly c previous tokens, the group's
  baseline is b(c, t) = min_i l_i(c, t); on the top-r share T of tokens with the largest
  b(c, t), f_i(c, c') = mean_T min(b(c, t), l_i(c', t)) and the relative gain is
  g_i(c, c') = (exp f_i(c, c) - exp f_i(c, c')) / exp f_i(c, c). Starting at the shortest
  length, c grows by the step while g_i(c, c + step) >= 0.01; RECL is where it stops.

Shapes: P scored tokens, C context length, S segment length.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf.utils import plots
from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.pretraining.lm_evaluation import with_memory

GAIN_THRESHOLD = 0.01  # the paper's: a relative perplexity gain under 1% stops the search


# ---- Table 5's columns for one model ---------------------------------------------------------
def table5_columns(evaluations: Sequence[Dict], train_attention_length: int,
                   tolerance: float = 1e-3) -> Dict:
  """{"ppl_init", "ppl_best", "attention_length_best"} from evaluations, each a dict with
  "attention_length" and "perplexity". PPL init is the one at `train_attention_length`
  (None if not evaluated); Attn Len the shortest length within `tolerance` (relative) of the
  best (the paper: no further noticeable gain, ~0.1%)."""
  require(len(evaluations) > 0, "evaluations", "at least one", "none")
  by_length = sorted(evaluations, key=lambda row: row["attention_length"])
  best = min(row["perplexity"] for row in by_length)
  reaching = next(row for row in by_length if row["perplexity"] <= best * (1 + tolerance))
  init = [row["perplexity"] for row in by_length
          if row["attention_length"] == train_attention_length]
  return {"ppl_init": init[0] if init else None, "ppl_best": best,
          "attention_length_best": reaching["attention_length"],
          "train_attention_length": train_attention_length}


# ---- per-token losses at an exact context length ---------------------------------------------
def scored_positions(stream_length: int, longest_context: int, count: int, seed: int = 0
                     ) -> np.ndarray:
  """`count` token positions (sorted, seeded) that have at least `longest_context` tokens
  before them, so every context length scores the same tokens."""
  candidates = stream_length - longest_context
  if candidates < 1:
    raise UserInputError(f"the held-out text has {stream_length} tokens: none has "
                         f"{longest_context} tokens before it; use a longer text or shorter "
                         "context lengths")
  rng = np.random.default_rng(seed)
  chosen = rng.choice(candidates, size=min(count, candidates), replace=False)
  return np.sort(chosen + longest_context)


def token_losses(pretrainer, ids: Sequence[int], positions: np.ndarray, context_length: int,
                 *, segment_length: Optional[int] = None, batch_size: int = 64) -> np.ndarray:
  """float64 [P]: -log p(x_t | x_{t-C}, ..., x_{t-1}) for each t in `positions`, the C tokens
  before it and nothing else. With `segment_length` S (recurrence) the window is read in
  segments of S with a memory of C (the first segment shorter), as Transformer-XL evaluates;
  without, in one segment of C (a model without memory: the attention length is the segment)."""
  require(context_length > 0, "context_length", "positive", context_length)
  ids = np.asarray(ids, np.int32)
  if segment_length:
    model = with_memory(pretrainer, context_length)
    bounds = list(range(context_length, 0, -segment_length))[::-1]  # segment ends, last = C
    starts = [0] + bounds[:-1]
  else:
    model = with_memory(pretrainer, 0)
    starts, bounds = [0], [context_length]
  step = tf.function(lambda inputs: model(inputs, training=False), reduce_retracing=True)
  losses = []
  for begin in range(0, len(positions), batch_size):
    targets = positions[begin:begin + batch_size]
    windows = np.stack([ids[t - context_length:t] for t in targets])  # [P, C]
    memory = None
    for start, end in zip(starts, bounds):
      inputs = {"input_ids": tf.constant(windows[:, start:end])}
      if memory is not None:
        inputs["mems"] = memory
      outputs = step(inputs)
      memory = outputs.get("new_mems")
    logits = tf.cast(outputs["logits"][:, -1], tf.float64)  # [P, V]
    log_probs = tf.nn.log_softmax(logits, axis=-1).numpy()
    losses.append(-log_probs[np.arange(len(targets)), ids[targets]])
  return np.concatenate(losses)


def check_context_lengths(lengths: Sequence[int]) -> None:
  """RECL's lengths: at least two, evenly spaced (the step is the paper's Delta)."""
  lengths = sorted(lengths)
  require(len(lengths) >= 2, "context lengths", "at least two", str(lengths))
  steps = set(np.diff(lengths).tolist())
  require(len(steps) == 1, "context lengths", "evenly spaced (the step Delta)", str(lengths))


def check_same_vocabulary(configs: Dict[str, object]) -> None:
  """RECL compares losses token by token: every model must read the same ids (n_token)."""
  sizes = {name: config.n_token for name, config in configs.items()}
  require(len(set(sizes.values())) == 1, "models", "of one vocabulary (the losses are compared "
          "token by token)", f"n_token {sizes}")


def group_token_losses(models: Dict[str, object], ids: Sequence[int], lengths: Sequence[int],
                       count: int, segment_length: int, seed: int = 0
                       ) -> Dict[str, Dict[int, np.ndarray]]:
  """{model: {c: float [P]}} of every model (XLNetPretrainer, clm) at every context length,
  on the same P tokens: the input of relative_context. A model trained with memory reads each
  window in segments of `segment_length`; one trained without, in one segment."""
  check_same_vocabulary({name: model.backbone.config for name, model in models.items()})
  positions = scored_positions(len(ids), max(lengths), count, seed)
  return {name: {c: token_losses(model, ids, positions, c, segment_length=(
      segment_length if model.backbone.config.mem_len else None)) for c in lengths}
          for name, model in models.items()}


# ---- RECL ------------------------------------------------------------------------------------
@dataclasses.dataclass
class RelativeContext:
  """RECL of each model of a group, and the curves behind it."""
  recl: Dict[str, int]
  # {model: [(c, c', unnormalised gain exp f(c, c) - exp f(c, c'), relative gain g)]}
  gains: Dict[str, List[tuple]]
  r: float
  step: int


def _check_group(losses: Dict[str, Dict[int, np.ndarray]], r: float) -> List[int]:
  require(0 < r <= 1, "r", "in (0, 1] (the share of the hardest tokens compared)", r)
  require(len(losses) >= 2, "models", "a group of at least two (RECL compares each model "
          "with the group's best short-context model)", f"{len(losses)} model(s)")
  lengths = [sorted(by_length) for by_length in losses.values()]
  require(all(each == lengths[0] for each in lengths), "models",
          "scored at the same context lengths", str(lengths))
  sizes = {len(array) for by_length in losses.values() for array in by_length.values()}
  require(len(sizes) == 1, "models", "scored on the same tokens", f"sizes {sorted(sizes)}")
  check_context_lengths(lengths[0])
  return lengths[0]


def relative_context(losses: Dict[str, Dict[int, np.ndarray]], r: float = 0.1,
                     threshold: float = GAIN_THRESHOLD) -> RelativeContext:
  """RECL of every model of a group from per-token losses {model: {c: float [P]}} at evenly
  spaced context lengths (the step is Delta), the same P tokens for all."""
  lengths = _check_group(losses, r)
  recl, gains = {}, {name: [] for name in losses}
  for short, long in zip(lengths[:-1], lengths[1:]):
    baseline = np.min(np.stack([by_length[short] for by_length in losses.values()]), axis=0)
    hardest = np.argsort(-baseline, kind="stable")[:max(1, int(round(r * len(baseline))))]
    f_short = float(np.exp(baseline[hardest].mean()))  # f_i(c, c): the baseline's, for all i
    for name, by_length in losses.items():
      f_long = float(np.exp(np.minimum(baseline[hardest], by_length[long][hardest]).mean()))
      gain = (f_short - f_long) / f_short
      gains[name].append((short, long, f_short - f_long, gain))
      if name not in recl and gain < threshold:
        recl[name] = short
  for name in losses:
    recl.setdefault(name, lengths[-1])  # still gaining at the longest length: at least that
  return RelativeContext(recl, gains, r, lengths[1] - lengths[0])


def plot_relative_gains(result: RelativeContext, path: str,
                        styles: Optional[Dict[str, Dict]] = None) -> str:
  """PNG in the manner of the paper's Figure 3: each model's unnormalised relative perplexity
  gain exp f(c, c) - exp f(c, c + Delta) against c. `styles`: plot keywords per model (default:
  plots.distinct_styles). The gains span orders of magnitude (a model that gains thousands
  flattens the others on a linear axis) and include 0: a symmetric log axis, linear below 1."""
  styles = styles or dict(zip(result.gains, plots.distinct_styles(len(result.gains))))
  opened, (axis,) = plots.figure(width=9.5, height=5.0)
  for name, rows in result.gains.items():
    axis.plot([row[0] for row in rows], [row[2] for row in rows],
              label=f"{name} (RECL {result.recl[name]})", **styles[name])
  axis.set_yscale("symlog", linthresh=1.0)
  axis.set_ylim(bottom=0.0)  # a gain is never negative (relative_context)
  axis.set_title(f"Relative gains on the top r = {result.r:g} hardest tokens")
  return plots.save(opened, [axis], path, f"context length c (gain of c + {result.step} over c)",
                    "unnormalised relative perplexity gain (linear below 1)", legend_size=8,
                    legend_outside=True)
