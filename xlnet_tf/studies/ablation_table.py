"""A transfer study's variants side by side (XLNet's Table 6 at this machine's scale): per
variant the held-out loss, the fine-tuning gain over random init on every task, and the
intrinsic scores (exact match on 2-4-word blanks in the objective's best order, cloze).

Read from a study's results (studies.transfer.run_study); writes nothing but what it returns
and the PNG it is asked for.
"""

from typing import Dict, List

import numpy as np

from xlnet_tf.utils import plots
from xlnet_tf.studies.budget_trend import intrinsic_cells, intrinsic_summary
from xlnet_tf.studies.infilling_evaluation import ORDERS_OF

RANDOM_INIT = "random_init"


def _variants(results: Dict) -> List[str]:
  """The fully pretrained variants (not the snapshot rows NAME@STEP), in study order."""
  return list(results["pretraining"])


def _objective(results: Dict, name: str) -> str:
  return results["pretraining"][name]["overrides"].get("objective", "perm")


def _gain(results: Dict, task: str, row: str) -> Dict[str, float]:
  """Test accuracy gain over random init in points: the median, and the seeds' min and max."""
  rows = results["finetuning"][task]
  base = rows[RANDOM_INIT]["test_median"]
  return {key: 100 * (rows[row][f"test_{key}"] - base) for key in ("median", "min", "max")}


def ablation_markdown(results: Dict) -> str:
  """One row per variant: held-out loss, test accuracy (gain) per task and their mean gain,
  then exact match and cloze on 2-4-word blanks when the study has intrinsic scores."""
  tasks = list(results["finetuning"])
  intrinsic = results.get("intrinsic") or {}
  header = (["variant", "held-out loss"] + [f"{task} (gain)" for task in tasks]
            + ["mean gain"] + (["exact, 2-4 words (order)", "cloze, 2-4"] if intrinsic else []))
  lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
  base = [f"{100 * results['finetuning'][task][RANDOM_INIT]['test_median']:.1f}"
          for task in tasks]
  lines.append("| " + " | ".join([RANDOM_INIT, ""] + base + [""]
                                 + (["", ""] if intrinsic else [])) + " |")
  for name in _variants(results):
    cells = [name, f"{results['pretraining'][name]['held_out'][-1]['loss']:.3f}"]
    gains = []
    for task in tasks:
      gains.append(_gain(results, task, name)["median"])
      cells.append(f"{100 * results['finetuning'][task][name]['test_median']:.1f} "
                   f"({gains[-1]:+.1f})")
    cells.append(f"{np.mean(gains):+.1f}")
    if intrinsic:
      cells += intrinsic_cells(intrinsic.get(name, {}), _objective(results, name))
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def exact_by_span(scores: Dict, objective: str) -> Dict[int, float]:
  """{span words: exact match} in the order that is best on 2-4-word blanks (for 1 word, and
  for a study without longer spans, the best order at that length)."""
  summary = intrinsic_summary(scores, objective)
  by_span = {}
  for words, score in scores.items():
    orders = [o for o in ORDERS_OF[objective] if o in score["infilling"]]
    order = summary["order"] if summary and summary["order"] in orders else max(
        orders, key=lambda o: score["infilling"][o]["exact"])
    by_span[int(words)] = score["infilling"][order]["exact"]
  return dict(sorted(by_span.items()))


def plot_ablation(results: Dict, path: str) -> str:
  """PNG: the fine-tuning gain over random init per variant and task (bar: median; line:
  the seeds' min to max), and, with intrinsic scores, exact match against span length."""
  tasks = list(results["finetuning"])
  names = _variants(results)
  intrinsic = results.get("intrinsic") or {}
  opened, axes = plots.figure(2 if intrinsic else 1, width=6.5, height=4.5)
  width = 0.8 / len(tasks)
  for index, task in enumerate(tasks):
    gains = [_gain(results, task, name) for name in names]
    positions = np.arange(len(names)) + (index - (len(tasks) - 1) / 2) * width
    medians = np.array([g["median"] for g in gains])
    spread = np.array([[g["median"] - g["min"] for g in gains],
                       [g["max"] - g["median"] for g in gains]])
    axes[0].bar(positions, medians, width, yerr=spread, capsize=3, label=task)
  axes[0].axhline(0, color="grey", linewidth=0.8)
  axes[0].set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
  axes[0].set_title("Fine-tuning: test accuracy gain over random init")
  axes[0].set_xlabel("variant")
  axes[0].set_ylabel("points (median; min-max over seeds)")
  if intrinsic:
    for name in names:
      if name in intrinsic:
        by_span = exact_by_span(intrinsic[name], _objective(results, name))
        axes[1].plot(list(by_span), [100 * v for v in by_span.values()], marker="o", label=name)
    axes[1].set_xticks(sorted({int(w) for s in intrinsic.values() for w in s}))
    axes[1].set_title("Span infilling on held-out text (best order)")
    axes[1].set_xlabel("blank length (words)")
    axes[1].set_ylabel("exact match of the whole span (%)")
  return plots.save(opened, axes, path, xlabel=None, ylabel=None, legend_size=7)
