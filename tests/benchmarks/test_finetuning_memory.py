"""The fine-tuning memory table (xlnet_tf.benchmarks.finetuning_memory, run/benchmark.py
--memory): the grid, the linear fit and its residual, the largest batch in a budget, what is
measured and what extrapolated; one real point through the CLI."""

import json
import os
import subprocess
import sys

import pytest

from xlnet_tf.benchmarks import finetuning_memory as memory
from repository import ROOT



def point(batch, peak, recompute=False, **extra):
  return dict(size="base", seq_len=512, dtype="float32", recompute=recompute, batch=batch,
              peak_gb=peak, **extra)


def test_the_grid_groups_a_rows_batches_in_ascending_order():
  specs = memory.memory_specs(["base"], ["4x128", "1x512", "2x128", "1x128"], ["float32"],
                              [False, True])
  assert [(s["seq_len"], s["recompute"], s["batch"]) for s in specs] == [
      (128, False, 1), (128, False, 2), (128, False, 4), (128, True, 1), (128, True, 2),
      (128, True, 4), (512, False, 1), (512, True, 1)]


def test_the_fit_recovers_a_line_and_reports_the_worst_residual():
  fit = memory.linear_fit([1, 2, 4], [3.0 + 0.5, 3.0 + 1.0, 3.0 + 2.0])
  assert fit["fixed_gb"] == pytest.approx(3.0) and fit["per_example_gb"] == pytest.approx(0.5)
  assert fit["max_residual_gb"] == pytest.approx(0.0, abs=1e-9) and fit["points"] == 3
  # One point off the line by 0.3: least squares over 1, 2, 3 spreads it (residuals
  # 0.05, -0.1, 0.05 plus 0.3 at the middle point -> worst |0.2|).
  bent = memory.linear_fit([1, 2, 3], [1.0, 2.3, 3.0])
  assert bent["per_example_gb"] == pytest.approx(1.0)
  assert bent["max_residual_gb"] == pytest.approx(0.2)
  assert memory.linear_fit([2, 2], [1.0, 1.1])["per_example_gb"] is None  # no slope


def test_the_largest_batch_under_the_budget():
  fit = {"fixed_gb": 4.0, "per_example_gb": 1.5}
  assert memory.largest_batch(fit, 16.0) == 8  # 4 + 1.5 * 8 = 16
  assert memory.largest_batch({"fixed_gb": 17.0, "per_example_gb": 1.0}, 16.0) == 0
  assert memory.largest_batch({"fixed_gb": 1.0, "per_example_gb": 0.0}, 16.0) is None
  assert memory.largest_batch({"fixed_gb": None, "per_example_gb": None}, 16.0) is None


def test_a_point_predicted_over_the_limit_is_skipped_and_extrapolated():
  results = [point(1, 5.0), point(2, 8.0), point(1, 4.0, recompute=True)]
  assert memory.too_big(results, point(4, None), 12.0) == pytest.approx(14.0)
  assert memory.too_big(results, point(3, None), 12.0) is None  # 11 GB
  assert memory.too_big(results, point(4, None, recompute=True), 12.0) is None  # one point
  results.append(dict(point(4, None), skipped="predicted 14.0 GB"))
  results.append(dict(point(2, None, recompute=True), error="killed"))
  rows = memory.memory_table(results, 16.0)
  assert [(r["recompute"], r["measured"], r["largest_batch"]) for r in rows] == [
      (False, {1: 5.0, 2: 8.0}, 4), (True, {1: 4.0}, None)]  # 2 + 3 * 4 <= 16
  assert rows[1]["errors"] == {2: "killed"}
  table = memory.memory_markdown(rows, 16.0, table_batches=(1, 2, 4))
  lines = table.splitlines()
  assert lines[0].startswith("| size | seq | dtype | recompute | B=1 | B=2 | B=4 |")
  assert lines[2] == ("| base | 512 | float32 | no | **5.00** | **8.00** | 14.0 | "
                      "2.00 + 3.000 B | 0.000 | 4 |")
  assert lines[3] == "| base | 512 | float32 | yes | **4.00** | error |  |  |  |  |"


@pytest.mark.slow
def test_one_point_measured_in_its_own_process(tmp_path):
  output = tmp_path / "memory"
  subprocess.run([sys.executable, os.path.join(ROOT, "run", "benchmark.py"), "--memory",
                  "--sizes=tiny", "--shapes=2x8", "--dtypes=float32", "--recompute=true",
                  f"--output={output}"], check=True, capture_output=True)
  report = json.loads((tmp_path / "memory.json").read_text())
  (result,) = report["results"]
  assert result["recompute"] is True and result["memory"] == "host RSS"
  assert result["peak_gb"] > result["idle_rss_gb"] > 0.1  # TensorFlow alone is more
  assert "| tiny | 8 | float32 | yes |" in (tmp_path / "memory.md").read_text()
