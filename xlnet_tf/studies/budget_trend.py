"""The budget trend of a transfer study with snapshots: each variant's fine-tuning gain over
random init and its intrinsic scores against pretraining steps (rows NAME@STEP, then NAME).

Read from a study's results (studies.transfer.run_study); writes nothing but what it returns
and the PNG it is asked for.
"""

from typing import Dict, List, Tuple

import numpy as np

from xlnet_tf.utils import plots
from xlnet_tf.studies.infilling_evaluation import ORDERS_OF

LONG_SPANS = ("2", "3", "4")  # words: where the blanks depend on each other


def trend_points(results: Dict) -> Dict[str, List[Tuple[int, str]]]:
  """{variant: [(steps, row)]} in step order, for the variants that have snapshots."""
  points = {}
  for name, record in results["pretraining"].items():
    if record.get("snapshots"):
      points[name] = sorted([(int(step), f"{name}@{step}") for step in record["snapshots"]]
                            + [(record["steps"], name)])
  return points


def _held_out_loss(record: Dict, steps: int) -> float:
  return next((p["loss"] for p in record["held_out"] if p["step"] == steps), float("nan"))


def intrinsic_summary(scores: Dict, objective: str) -> Dict[str, float]:
  """Exact match on 2-4-word blanks in the objective's best order (mean over the lengths),
  that order, and the cloze accuracy on 2-4-word spans (mean)."""
  long = [scores[words] for words in LONG_SPANS if words in scores]
  if not long:
    return {}
  means = {order: float(np.mean([s["infilling"][order]["exact"] for s in long]))
           for order in ORDERS_OF[objective] if all(order in s["infilling"] for s in long)}
  best = max(means, key=means.get)
  return {"exact": means[best], "order": best,
          "cloze": float(np.nanmean([s["cloze"]["accuracy"] for s in long]))}


def intrinsic_cells(scores: Dict, objective: str) -> List[str]:
  """The two table cells of intrinsic_summary: "exact (order)" and cloze, in %; blank if none."""
  summary = intrinsic_summary(scores, objective)
  return ([f"{100 * summary['exact']:.1f} ({summary['order']})", f"{100 * summary['cloze']:.1f}"]
          if summary else ["", ""])


def trend_markdown(results: Dict) -> str:
  """Per variant and budget: tokens, held-out loss, test accuracy gain over random init per
  task, and the intrinsic summary when the study has it."""
  points = trend_points(results)
  if not points:
    return ""
  tasks = list(results["finetuning"])
  header = (["variant", "steps", "tokens", "held-out loss"]
            + [f"{task} (gain)" for task in tasks] + ["exact, 2-4 words (order)", "cloze, 2-4"])
  lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
  for name, steps_rows in points.items():
    record = results["pretraining"][name]
    tokens_per_step = record["tokens"] / max(record["steps"], 1)
    objective = record["overrides"].get("objective", "perm")
    for steps, row in steps_rows:
      cells = [name, f"{steps:,}", f"{steps * tokens_per_step / 1e6:.1f} M",
               f"{_held_out_loss(record, steps):.3f}"]
      for task in tasks:
        rows = results["finetuning"][task]
        test = rows[row]["test_median"]
        cells.append(f"{100 * test:.1f} ({100 * (test - rows['random_init']['test_median']):+.1f})")
      cells += intrinsic_cells(results.get("intrinsic", {}).get(row, {}), objective)
      lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def plot_trend(results: Dict, path: str) -> str:
  """PNG: test accuracy against pretraining steps, a panel per task, a line per variant, and
  random init as a horizontal line."""
  points = trend_points(results)
  tasks = list(results["finetuning"])
  opened, axes = plots.figure(len(tasks), width=6, height=4.2)
  for axis, task in zip(axes, tasks):
    rows = results["finetuning"][task]
    for name, steps_rows in points.items():
      axis.plot([steps for steps, _ in steps_rows],
                [100 * rows[row]["test_median"] for _, row in steps_rows], marker="o",
                label=name)
    axis.axhline(100 * rows["random_init"]["test_median"], color="grey", linestyle="--",
                 label="random init")
    plots.label_log_axis(axis, {steps for steps_rows in points.values()
                                for steps, _ in steps_rows})
    axis.set_title(task)
  return plots.save(opened, axes, path, "pretraining steps",
                    "test accuracy (%, median over seeds)")
