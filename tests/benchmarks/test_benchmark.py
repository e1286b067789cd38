"""run/benchmark.py end to end at a tiny size: every worker runs and the report is written."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from forked_tools import run_forked
from repository import ROOT


def _benchmark(output, *flags):
  """Runs run/benchmark.py at the tiny size, float32, xlnet_tf only, the rows that import
  TensorFlow forked (--fork_rows; the PyTorch and ONNX Runtime rows start fresh): its JSON
  report."""
  result = run_forked([os.path.join(ROOT, "run", "benchmark.py"), "--sizes=tiny",
                       "--shapes=2x16", "--dtypes=float32", "--implementations=xlnet_tf",
                       "--repeats=1", "--fork_rows", f"--output={output}", *flags])
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads((output.parent / (output.name + ".json")).read_text())


@pytest.mark.slow
def test_benchmark_measures_and_reports(tmp_path):
  # Every mode, the dropout rows and the data stage in one round, with ONNX Runtime's float32
  # and int8 forward rows (one export, shared) and, where keras-hub is installed, its int8
  # row; the rounds' bookkeeping on the cheapest row (each measurement is a process of its
  # own: rows cost seconds each).
  output = tmp_path / "bench"
  int8_peers = ["ort_int8"] + (["keras_hub_int8"] if importlib.util.find_spec("keras_hub")
                               else [])
  report = _benchmark(output, "--modes=forward,train,serve,serve_xla,generate",
                      "--implementations=" + ",".join(["xlnet_tf", "ort"] + int8_peers),
                      "--new_tokens=4", "--rounds=1", "--data_copies=1")
  rows = report["results"]
  assert [(r["mode"], r["implementation"], r.get("error")) for r in rows] == [
      ("forward", implementation, None) for implementation in ["xlnet_tf", "ort"] + int8_peers
  ] + [(mode, "xlnet_tf", None) for mode in ("train", "serve", "serve_xla", "generate")]
  assert all(r["tokens_per_sec"] > 0 and r["peak_rss_gb"] > 0 for r in rows)
  for row in rows:  # the int8 rows' error against their float model, on the same inputs
    assert ("relative_error" in row) == (row["implementation"] in int8_peers), row
    assert 0 < row.get("relative_error", 1e-3) < 0.05, row
    assert "onnx_dir" not in row  # the run's temporary folder, removed
  # A row that fails (a vocabulary of 0) is reported with its error's line; the others run,
  # here on one thread (set in the row's process before its first op, else the row fails).
  rounds = _benchmark(tmp_path / "rounds", "--modes=forward", "--rounds=2", "--nodropout",
                      "--data_copies=0", "--jit_compile=false", "--vocab_sizes=32000,0",
                      "--threads=1")["results"]
  assert [(r.get("vocab"), r["cpu_threads"]) for r in rounds] == [(None, 1), (0, 1)]
  assert "| forward | xlnet_tf (1 thread) |" in (tmp_path / "rounds.md").read_text()
  assert all(len(r["round_seconds"]) == 2 and r["seconds"] == min(r["round_seconds"])
             for r in rounds[:1])  # each row is its best round
  assert "UserInputError" in rounds[1]["error"] and "n_token" in rounds[1]["error"], rounds[1]
  assert report["matmul_gflops"]["float32"] > 0
  assert [(d["layer"], d["xla"]) for d in report["dropout"] if "error" not in d] == [
      ("keras", False), ("keras", True), ("xlnet_tf", False), ("xlnet_tf", True)]
  stage = report["data_stage"]
  assert stage["corpus_tokens"] > 100_000 and stage["example_tokens"] > 0
  assert stage["corpus_tokens_per_sec"] == pytest.approx(stage["corpus_tokens"] / stage["seconds"])
  table = (tmp_path / "bench.md").read_text()
  assert "| tiny | 2x16 | float32 | train | xlnet_tf |" in table
  assert "| tiny | 2x16 | float32 | forward | ort_int8 |" in table
  assert " peak RSS (GB) | int8 vs float |" in table
  assert "| tiny | 2x16 | float32 | serve | xlnet_tf |" in table
  assert "| tiny | 2x16+4 | float32 | generate | xlnet_tf |" in table
  assert rows[-1]["tokens_per_sec"] == pytest.approx(2 * 4 / rows[-1]["seconds"])
  assert rows[-1]["product_gbs"] > 0  # its products' read rate at 4 rows (2 texts)
  assert " products' read rate (GB/s) | weights at that rate (ms) |" in table
  assert "corpus tokens/s" in table
  assert "| dropout layer | XLA | ms per call (0.3M elements) |" in table  # --sizes' first


@pytest.mark.slow
def test_benchmark_times_table7_evaluation_with_memory_and_vanilla(tmp_path):
  output = tmp_path / "table7"
  result = run_forked([os.path.join(ROOT, "run", "benchmark.py"), "--sizes=tiny",
                       "--shapes=1x32", "--dtypes=float32", "--implementations=xlnet_tf",
                       "--modes=lm_eval,lm_eval_vanilla", "--repeats=1", "--nodropout",
                       "--fork_rows",
                       "--data_copies=0", f"--output={output}"])
  assert result.returncode == 0, result.stderr[-3000:]
  rows = json.loads((tmp_path / "table7.json").read_text())["results"]
  memory, vanilla = rows
  assert memory["tokens_per_sec"] == pytest.approx(4 * 128 / memory["seconds"])
  assert vanilla["tokens_per_sec"] == pytest.approx(4 / vanilla["seconds"])
  assert "| tiny | 1x32 | float32 | lm_eval | xlnet_tf |" in (tmp_path / "table7.md").read_text()


@pytest.mark.slow
def test_profile_step_lists_op_times():
  result = run_forked([os.path.join(ROOT, "run", "profile_step.py"), "--size=tiny",
                       "--shape=2x16", "--mode=train", "--top=8"])
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.splitlines()
  assert "s per step" in lines[0]
  rows = [line.split() for line in lines[2:]]
  assert len(rows) == 8 and all(float(row[0]) >= 0 and int(row[1]) > 0 for row in rows)


USAGE_ERRORS = {
    # case: (flags, the first line of standard error)
    "forked rows for the memory table": (
        ["--memory", "--fork_rows"], "error: --fork_rows: not with --memory (a forked row's "
        "peak RSS misses pages of the TensorFlow import)"),
    "threads for JAX's rows": (
        ["--threads=0,1", "--implementations=xlnet_tf,keras_hub_jax"], "error: --threads: the "
        "keras_hub_jax rows run on JAX's own threads; time them with --threads=0"),
    "a negative number of threads": (
        ["--threads=-1"], "FATAL Flags parsing error: flag --threads=['-1']: --threads: numbers "
        "of threads >= 0"),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_bad_flags_are_refused_before_anything_is_measured(case, tmp_path):
  flags, expected = USAGE_ERRORS[case]
  result = run_forked([os.path.join(ROOT, "run", "benchmark.py"), *flags,
                       f"--output={tmp_path / 'out'}"])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[0] == expected
  assert result.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_baseline_row_times_the_other_revisions_model_with_this_revisions_steps(tmp_path):
  # The baseline: this package with the benchmark code removed and a model that says where it
  # comes from when built. The row fails with that model's error, not a missing module: the
  # steps are this revision's, the model the baseline's.
  source = tmp_path / "baseline"
  shutil.copytree(os.path.join(ROOT, "xlnet_tf"), source / "xlnet_tf",
                  ignore=shutil.ignore_patterns("__pycache__"))
  shutil.rmtree(source / "xlnet_tf" / "benchmarks")
  with open(source / "xlnet_tf" / "modeling" / "backbone.py", "a") as handle:
    handle.write("\n\ndef _refuse(self, *args, **kwargs):\n"
                 "  raise RuntimeError('the baseline revision builds this model')\n\n\n"
                 "XLNetModel.__init__ = _refuse\n")
  spec = {"implementation": "xlnet_tf", "size": "tiny", "batch": 2, "seq_len": 16,
          "dtype": "float32", "mode": "forward", "repeats": 1, "revision": "copy",
          "source": str(source)}
  result = run_forked([os.path.join(ROOT, "run", "benchmark.py"),
                       f"--worker={json.dumps(spec)}"])
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      "RuntimeError: the baseline revision builds this model")


def test_the_orchestrator_and_the_peers_rows_import_no_tensorflow():
  # A PyTorch or ONNX Runtime row's peak memory and threads are its runtime's alone.
  code = ("import sys; import xlnet_tf.benchmarks.runs, xlnet_tf.benchmarks.peers, "
          "xlnet_tf.benchmarks.onnx_rows; print(sorted(name for name in sys.modules "
          "if name.split('.')[0] in ('tensorflow', 'keras')))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
  assert result.stdout.strip() == "[]"
