"""The figures' helpers (styles no two alike, tick labels that do not collide) and the tools
that draw: without matplotlib they stop at once, with one line naming the extra to install,
and leave nothing behind."""

import os

import pytest

from xlnet_tf.utils import plots

from cli_output import run_tool

CASES = {  # (tool, its flags, what the line names); {tmp}: the test's folder, {out}: none yet
    "context study": ("run/context_study.py", ["--corpus_dir={tmp}/corpus", "--output_dir={out}"],
                      "run/context_study.py (perplexity.png, recl.png)"),
    "transfer study": ("run/transfer.py", ["--input_glob={tmp}/corpus.txt", "--task=t:{tmp}",
                                           "--output_dir={out}"],
                       "run/transfer.py (held_out_loss.png, variants.png)"),
    "RECL figure": ("run/evaluate_lm.py", ["--models={tmp}/a,{tmp}/b", "--output_dir={out}",
                                            "--recl_png={out}/recl.png"], "--recl_png"),
    "benchmark chart": ("run/benchmark.py", ["--report_only={tmp}/saved.json",
                                             "--output={out}/report", "--chart={out}/chart.png"],
                        "--chart"),
}


@pytest.fixture
def without_matplotlib(tmp_path):
  """Environment variables under which `import matplotlib` fails as if it were not installed."""
  package = tmp_path / "python_path" / "matplotlib"
  package.mkdir(parents=True)
  (package / "__init__.py").write_text(
      'raise ModuleNotFoundError("No module named \'matplotlib\'", name="matplotlib")\n')
  return {"PYTHONPATH": os.pathsep.join(filter(None, [str(package.parent),
                                                      os.environ.get("PYTHONPATH")]))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tool_that_draws_stops_at_once_without_matplotlib(tmp_path, without_matplotlib, case):
  script, flags, what = CASES[case]
  (tmp_path / "corpus.txt").write_text("A line of text.\n")
  (tmp_path / "saved.json").write_text('{"matmul_gflops": {}, "results": []}')
  out = tmp_path / "out"
  result = run_tool(script, *[flag.format(tmp=tmp_path, out=out) for flag in flags],
                    extra_environment=without_matplotlib)
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.strip().splitlines() == [
      f"error: {what} needs matplotlib, which cannot be imported; install the 'plots' extra: "
      'pip install -e ".[plots]"']
  assert result.stdout == ""
  assert not out.exists() and not (tmp_path / "corpus").exists()


def test_the_extra_named_exists():
  setup = open(os.path.join(os.path.dirname(__file__), "..", "..", "setup.cfg")).read()
  assert f"\n{plots.PLOTS_EXTRA} =\n    matplotlib\n" in setup


def test_distinct_styles_never_repeat():
  styles = plots.distinct_styles(25)
  assert len({tuple(sorted(style.items())) for style in styles}) == 25
  assert len({style["color"] for style in styles[:10]}) == 10  # ten colours first


def test_combined_styles_give_each_property_its_channel():
  keys = [("relative", True, "full"), ("relative", False, "half"), ("shaw", True, "half")]
  first, second, third = plots.combined_styles(keys)
  assert first["color"] == second["color"] != third["color"]
  assert first["linestyle"] == third["linestyle"] != second["linestyle"]
  assert first["marker"] != second["marker"] == third["marker"]


def test_a_log_axis_is_labelled_at_its_values_only(tmp_path):
  assert [plots.steps_label(v) for v in (500, 1000, 2500, 8000, 1_200_000)] == [
      "500", "1k", "2.5k", "8k", "1.2M"]
  opened, (axis,) = plots.figure()
  axis.plot([500, 1000, 2000, 4000, 8000], [1, 2, 3, 4, 5], label="a")
  plots.label_log_axis(axis, [500, 1000, 2000, 4000, 8000])
  opened.canvas.draw()
  labels = [label.get_text() for label in axis.get_xticklabels() if label.get_text()]
  assert labels == ["500", "1k", "2k", "4k", "8k"]
  assert not axis.xaxis.get_minor_ticks()
  path = plots.save(opened, [axis], str(tmp_path / "trend.png"), "steps", "score",
                    legend_outside=True)
  assert os.path.getsize(path) > 0
