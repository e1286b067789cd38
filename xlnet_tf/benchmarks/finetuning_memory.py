"""Peak memory of one fine-tuning step, and the largest batch that fits a budget.

run/benchmark.py --memory measures each point (size, seq_len, batch, dtype, recompute) in a
fresh process (steps.finetuning_step_memory) and builds the table with `memory_table` /
`memory_markdown`: per row (everything but the batch) a least-squares line peak = fixed +
per_example * batch through the measured batches, its worst residual, and the largest batch
under the budget that line predicts (an extrapolation beyond the largest batch measured).

What "peak" is: on a GPU, TensorFlow's device-memory peak (tf.config.experimental
.get_memory_info); elsewhere the process's peak resident set (getrusage ru_maxrss), minus
nothing: the TensorFlow runtime, the weights, the optimizer's moments, XLA's compilation and
the step's activations all count, as they do against a machine's memory.
"""

import itertools
import math
from typing import Dict, List, Optional, Sequence

import numpy as np

ROW_KEYS = ("size", "seq_len", "dtype", "recompute")  # a table row: all but the batch


def memory_specs(sizes: Sequence[str], shapes: Sequence[str], dtypes: Sequence[str],
                 recompute: Sequence[bool]) -> List[Dict]:
  """Every point: sizes x shapes ("BATCHxSEQ_LEN") x dtypes x recompute, ordered by row
  (size, seq_len, dtype, recompute), batches ascending within it (so a row's small batches
  come first, and too_big can judge the large ones)."""
  pairs = sorted({tuple(int(v) for v in shape.split("x")) for shape in shapes},
                 key=lambda pair: (pair[1], pair[0]))
  seq_lens = sorted({seq_len for _, seq_len in pairs})
  return [dict(size=size, seq_len=seq_len, dtype=dtype, recompute=flag, batch=batch)
          for size, seq_len, dtype, flag in itertools.product(sizes, seq_lens, dtypes, recompute)
          for batch, length in pairs if length == seq_len]


def linear_fit(batches: Sequence[int], peaks: Sequence[float]) -> Dict:
  """Least squares peak = fixed + per_example * batch: {fixed_gb, per_example_gb,
  max_residual_gb (worst |measured - line|), points}. One batch: no slope (per_example None)."""
  batches, peaks = np.asarray(batches, np.float64), np.asarray(peaks, np.float64)
  if len(set(batches.tolist())) < 2:
    return {"fixed_gb": None, "per_example_gb": None, "max_residual_gb": None,
            "points": len(batches)}
  per_example, fixed = np.polyfit(batches, peaks, 1)
  residuals = peaks - (fixed + per_example * batches)
  return {"fixed_gb": float(fixed), "per_example_gb": float(per_example),
          "max_residual_gb": float(np.abs(residuals).max()), "points": len(batches)}


def largest_batch(fit: Dict, budget_gb: float) -> Optional[int]:
  """The largest batch whose predicted peak is within `budget_gb` (0: not even one example);
  None without a fit or with a slope that is not positive (nothing to extrapolate)."""
  fixed, per_example = fit["fixed_gb"], fit["per_example_gb"]
  if per_example is None or not per_example > 0:
    return None
  return max(0, math.floor((budget_gb - fixed) / per_example))


def too_big(results: Sequence[Dict], spec: Dict, limit_gb: float) -> Optional[float]:
  """The peak the line through the points measured so far in `spec`'s row predicts for it,
  when that exceeds `limit_gb` (a point not worth a process that may exhaust the machine);
  else None."""
  same_row = [r for r in results if "error" not in r
              and all(r[k] == spec[k] for k in ROW_KEYS)]
  fit = linear_fit([r["batch"] for r in same_row], [r["peak_gb"] for r in same_row])
  if fit["per_example_gb"] is None:
    return None
  predicted = fit["fixed_gb"] + fit["per_example_gb"] * spec["batch"]
  return predicted if predicted > limit_gb else None


def memory_table(results: Sequence[Dict], budget_gb: float) -> List[Dict]:
  """One row per (size, seq_len, dtype, recompute), in the order first measured: the measured
  peaks by batch ({batch: GB}; failed and skipped points left out), the linear fit and the
  largest batch under `budget_gb`."""
  rows = {}
  for result in results:
    key = tuple(result[k] for k in ROW_KEYS)
    row = rows.setdefault(key, dict(zip(ROW_KEYS, key), measured={}, errors={}))
    if "skipped" in result:  # not measured (too_big): the fit's prediction stands for it
      continue
    if "error" in result:
      row["errors"][result["batch"]] = result["error"]
    else:
      row["measured"][result["batch"]] = result["peak_gb"]
  for row in rows.values():
    batches = sorted(row["measured"])
    row.update(linear_fit(batches, [row["measured"][b] for b in batches]))
    row["largest_batch"] = largest_batch(row, budget_gb)
  return list(rows.values())


def memory_markdown(rows: Sequence[Dict], budget_gb: float,
                    table_batches: Sequence[int] = (1, 2, 4, 8, 16, 32)) -> str:
  """The table: measured peaks in bold, the fit's predictions plain (extrapolated)."""
  header = ("| size | seq | dtype | recompute | "
            + " | ".join(f"B={b}" for b in table_batches)
            + f" | fixed + per example (GB) | worst residual | largest batch in {budget_gb:g} GB |")
  lines = [header, "|" + "---|" * 4 + "---:|" * (len(table_batches) + 3)]
  for row in rows:
    cells = []
    for batch in table_batches:
      if batch in row["measured"]:
        cells.append(f"**{row['measured'][batch]:.2f}**")
      elif batch in row["errors"]:
        cells.append("error")
      elif row["per_example_gb"] is not None:
        cells.append(f"{row['fixed_gb'] + row['per_example_gb'] * batch:.1f}")
      else:
        cells.append("")
    fit = ("" if row["per_example_gb"] is None else
           f"{row['fixed_gb']:.2f} + {row['per_example_gb']:.3f} B")
    residual = "" if row["max_residual_gb"] is None else f"{row['max_residual_gb']:.3f}"
    largest = "" if row["largest_batch"] is None else str(row["largest_batch"])
    lines.append(f"| {row['size']} | {row['seq_len']} | {row['dtype']} | "
                 f"{'yes' if row['recompute'] else 'no'} | " + " | ".join(cells)
                 + f" | {fit} | {residual} | {largest} |")
  return "\n".join(lines)
