"""A run of run/benchmark.py: the grid of rows its flags name, each measured in a process of
its own (a `measure` callable: xlnet_tf.benchmarks.processes), the implementations taking
turns round after round, each row's best round kept, and the report written
(xlnet_tf.benchmarks.report); or the fine-tuning memory grid (--memory); or a report rebuilt
from a saved JSON (--report_only).

This module imports no TensorFlow: the rows' processes do.
"""

import dataclasses
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence

from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.utils.json_files import read_json_object
from xlnet_tf.benchmarks import finetuning_memory, processes, report, rows

Measure = Callable[[Dict], Dict]  # a row's spec -> its result, measured in its own process


@dataclasses.dataclass
class SpeedRun:
  """What a speed run measures (run/benchmark.py's flags).

  Attributes:
    sizes: model sizes (XLNetConfig presets).
    shapes: "BATCHxSEQ_LEN" pairs.
    dtypes: precisions (float32, bfloat16).
    modes: what to time (rows.MODES).
    implementations: which to run (rows.PACKAGES), those not installed skipped.
    vocab_sizes: the LM head's widths.
    threads: CPU threads of each row's runtime, every row timed at each (0: its default).
    new_tokens: tokens generated per prompt (--modes=generate).
    repeats: timed repetitions of a row after one warm-up.
    rounds: times every row is measured, the implementations taking turns.
    jit: XLA for xlnet_tf's steps; None: float32 only.
    keras_optimizer: train rows with Keras' AdamW in one XLA function.
    torch_device: where the PyTorch peer runs (cpu, cuda).
    dropout: also time keras.layers.Dropout against FastDropout.
    data_copies: time the data stage on the Python documentation this many times (0: skip).
    baseline: a git revision whose xlnet_tf rows are also timed, or None.
    output: write OUTPUT.json and OUTPUT.md (None: print only).
    chart: also draw tokens/s as this PNG (None: no chart).
    command: the command line, written into the report.
  """
  sizes: Sequence[str]
  shapes: Sequence[str]
  dtypes: Sequence[str]
  modes: Sequence[str]
  implementations: Sequence[str]
  vocab_sizes: Sequence[int] = (rows.VOCAB,)
  threads: Sequence[int] = (0,)
  new_tokens: int = 128
  repeats: int = 3
  rounds: int = 1
  jit: Optional[bool] = None
  keras_optimizer: bool = False
  torch_device: str = "cpu"
  dropout: bool = True
  data_copies: int = 8
  baseline: Optional[str] = None
  output: Optional[str] = None
  chart: Optional[str] = None
  command: str = ""


def parse_shape(shape: str):
  """(batch, seq_len) of "BATCHxSEQ_LEN"."""
  parts = shape.split("x")
  require(len(parts) == 2 and all(part.isdigit() for part in parts), "--shapes",
          "BATCHxSEQ_LEN pairs such as 4x128", repr(shape))
  return int(parts[0]), int(parts[1])


def available(implementation: str) -> bool:
  """Whether the packages of `implementation` are installed (found, not imported: an import of
  TensorFlow or PyTorch costs seconds); keras-hub's XLNet is checked in a process of its own."""
  require(implementation in rows.PACKAGES, "--implementations",
          f"among {', '.join(rows.PACKAGES)}", repr(implementation))
  if not all(importlib.util.find_spec(package) for package in rows.PACKAGES[implementation]):
    return False
  if not implementation.startswith("keras_hub"):
    return True
  probe = "import keras_hub; keras_hub.models.XLNetBackbone"
  backend = "jax" if implementation.startswith("keras_hub_jax") else "tensorflow"
  return subprocess.run([sys.executable, "-c", probe], capture_output=True,
                        env=dict(os.environ, KERAS_BACKEND=backend)).returncode == 0


def speed_specs(run: SpeedRun, implementations: Sequence[str], baseline: Optional[Dict] = None,
                onnx_dir: Optional[str] = None) -> List[Dict]:
  """Every row of `run` for the available `implementations`, in the order they are measured
  each round; with `baseline` ({"revision", "source"}) an xlnet_tf row of that revision after
  each of this revision's."""
  specs = []
  for size in run.sizes:
    for shape in run.shapes:
      batch, seq_len = parse_shape(shape)
      for dtype, mode, vocab, threads in itertools.product(run.dtypes, run.modes,
                                                           run.vocab_sizes, run.threads):
        extra = {"new_tokens": run.new_tokens} if mode == "generate" else {}
        if vocab != rows.VOCAB:
          extra["vocab"] = vocab
        if threads:
          extra["cpu_threads"] = threads
        row = dict(size=size, batch=batch, seq_len=seq_len, dtype=dtype, mode=mode,
                   repeats=run.repeats, **extra)
        if run.jit is not None:
          row["jit"] = run.jit
        if run.keras_optimizer and mode == "train":
          row["keras_optimizer"] = True
        specs.extend(dict(row, implementation=implementation, **_device(run, implementation),
                          **({"onnx_dir": onnx_dir} if implementation.startswith("ort") else {}))
                     for implementation in implementations
                     if implementation in rows.MODES[mode]
                     and (dtype == "float32" or implementation not in rows.FLOAT32_ONLY))
        if baseline and "xlnet_tf" in implementations and "xlnet_tf" in rows.MODES[mode]:
          specs.append(dict(row, implementation="xlnet_tf", **baseline))
  return specs


def _device(run: SpeedRun, implementation: str) -> Dict:
  """The spec's device field: only the PyTorch peer moves, with torch_device cuda."""
  on_gpu = implementation == "hf_torch" and run.torch_device == "cuda"
  return {"device": "cuda"} if on_gpu else {}


def measure_speed(run: SpeedRun, measure: Measure, repository: str) -> str:
  """Measures `run` (the dropout rows, the data stage, then every row `rounds` times, each
  printed as a JSON line), writes its report and prints its tables (returned). `repository`:
  the git checkout a baseline revision is checked out from."""
  for shape in run.shapes:
    parse_shape(shape)
  dropout = []
  if run.dropout:
    for layer in ("keras", "xlnet_tf"):
      for xla in (False, True):
        dropout.append(measure({"implementation": "dropout", "layer": layer, "xla": xla,
                                "size": run.sizes[0], "repeats": 5}))
  data_stage = None
  if run.data_copies:
    data_stage = measure({"implementation": "data_stage", "copies": run.data_copies,
                          "repeats": 2})
  implementations = [i for i in run.implementations if available(i)]
  baseline = processes.baseline_worktree(repository, run.baseline) if run.baseline else None
  # The ONNX files the ort rows share (one export per model shape), removed after the run.
  onnx_dir = (tempfile.mkdtemp(prefix="xlnet_tf_benchmark_onnx_")
              if {"ort", "ort_int8"} & set(implementations) else None)
  try:
    specs = speed_specs(run, implementations, baseline, onnx_dir)
    export_errors = _export_onnx_files(specs, measure)
    results, matmul = _measure_rounds(run, specs, measure, export_errors)
  finally:
    if baseline:
      processes.remove_worktree(repository, baseline["source"])
    if onnx_dir:
      shutil.rmtree(onnx_dir, ignore_errors=True)
  table = report.write_report(run.output, results, matmul, run.command, dropout, data_stage)
  print(table)
  if run.chart:
    print(f"Chart: {report.plot_tokens_per_second(results, run.chart)}")
  return table


def _onnx_shape(spec):
  return spec["size"], spec["seq_len"], spec.get("vocab", rows.VOCAB)


def _export_onnx_files(specs: Sequence[Dict], measure: Measure) -> Dict:
  """Writes the ONNX files of every model shape the ort rows of `specs` run (an onnx_export
  row each, untimed, in a process of its own) into their onnx_dir: {shape: error} of the
  exports that failed."""
  errors = {}
  for spec in specs:
    shape = _onnx_shape(spec)
    if not spec["implementation"].startswith("ort") or shape in errors:
      continue
    exported = measure({"implementation": "onnx_export", "size": spec["size"],
                        "seq_len": spec["seq_len"], "onnx_dir": spec["onnx_dir"],
                        **({"vocab": spec["vocab"]} if "vocab" in spec else {})})
    errors[shape] = exported.get("error")
  return {shape: error for shape, error in errors.items() if error}


def _measure_rounds(run: SpeedRun, specs: Sequence[Dict], measure: Measure,
                    export_errors: Dict):
  """(results, matmul rates): every spec measured `rounds` times, the implementations taking
  turns, each row's best round kept, after each round's dense matmul rate per dtype (and,
  with generate rows, its memory bandwidth, and for xlnet_tf's the rate its products read
  kernels at the step's rows: the best round's, in each generate row)."""
  matmul, best, bandwidth, product_rates = {}, [None] * len(specs), None, {}
  decoding = any(spec["mode"] == "generate" for spec in specs)
  for _ in range(run.rounds):
    for dtype in run.dtypes:
      rate = measure({"implementation": "matmul", "dtype": dtype, "repeats": 5,
                      **_device(run, "hf_torch")}).get("gflops")
      if rate is not None and not rate <= matmul.get(dtype, 0.0):  # the best round's rate
        matmul[dtype] = rate
    if decoding:
      rate = measure({"implementation": "bandwidth", "repeats": 5}).get("gbs")
      bandwidth = max(rate or 0.0, bandwidth or 0.0) or None
      for key in {_product_key(spec) for spec in specs} - {None}:
        size, step_rows, int8, threads = key
        rate = measure({"implementation": "products", "size": size, "rows": step_rows,
                        "int8": int8, "repeats": 5,
                        **({"cpu_threads": threads} if threads else {})}).get("gbs")
        product_rates[key] = max(rate or 0.0, product_rates.get(key) or 0.0) or None
    for index, spec in enumerate(specs):
      error = (export_errors.get(_onnx_shape(spec)) if spec["implementation"].startswith("ort")
               else None)
      if error:
        result = {key: value for key, value in spec.items() if key != "onnx_dir"}
        result["error"] = f"ONNX export: {error}"
      else:
        result = measure(spec)
      print(json.dumps(result), flush=True)
      best[index] = report.better_round(best[index], result)
  for dtype in run.dtypes:
    matmul.setdefault(dtype, float("nan"))
  results = []
  for result in best:
    if "error" not in result:
      report.add_rates(result, matmul)
      if result["mode"] == "generate" and bandwidth:
        result["bandwidth_gbs"] = bandwidth
      if product_rates.get(_product_key(result)):
        result["product_gbs"] = product_rates[_product_key(result)]
    results.append(result)
  return results, matmul


def _product_key(spec):
  """(size, rows, int8, CPU threads) of the product-rate row a generate row of xlnet_tf is set
  against (a step runs two rows per text through its products; the row's threads, None for
  the default), or None for other rows (float32 steps only: bfloat16's products are another
  kernel)."""
  if spec["mode"] != "generate" or spec["implementation"] not in ("xlnet_tf", "xlnet_tf_int8"):
    return None
  if spec["dtype"] != "float32":
    return None
  return (spec["size"], 2 * spec["batch"], spec["implementation"] == "xlnet_tf_int8",
          spec.get("cpu_threads"))


def measure_memory(sizes: Sequence[str], shapes: Sequence[str], dtypes: Sequence[str],
                   recompute: Sequence[bool], measure: Measure, budget_gb: float,
                   limit_gb: float, jit: Optional[bool] = None, output: Optional[str] = None,
                   command: str = "") -> str:
  """The peak memory of one fine-tuning step at every point (finetuning_memory.memory_specs),
  each in its own process, a point that the row's points so far predict above `limit_gb`
  skipped; each point printed as a JSON line, the table rewritten after each point (so a long
  run's results so far survive an interruption) and printed at the end (returned)."""
  for shape in shapes:
    parse_shape(shape)
  results, table = [], ""
  for spec in finetuning_memory.memory_specs(sizes, shapes, dtypes, recompute):
    point = dict(spec, implementation="finetune_memory")
    if jit is not None:
      point["jit"] = jit
    predicted = finetuning_memory.too_big(results, point, limit_gb)
    result = (dict(point, skipped=f"predicted {predicted:.1f} GB") if predicted is not None
              else measure(point))
    print(json.dumps(result), flush=True)
    results.append(result)
    table = report.write_memory_report(output, results, budget_gb, command)
  print(table)
  return table


def rebuild_report(saved: str, output: Optional[str] = None,
                   chart: Optional[str] = None) -> str:
  """The tables of the run saved in the JSON file `saved` (measuring nothing), printed
  (returned) and written to OUTPUT.md and OUTPUT.json with `output`; its chart drawn with
  `chart`."""
  run = read_json_object(saved, "a run/benchmark.py report")
  if "results" not in run or "matmul_gflops" not in run:
    raise UserInputError(f"{saved}: not a run/benchmark.py report (no results, matmul_gflops)")
  for result in run["results"]:
    if "error" not in result:
      report.add_rates(result, run["matmul_gflops"])
  table = report.write_report(output, run["results"], run["matmul_gflops"],
                              run.get("command", ""), run.get("dropout", []),
                              run.get("data_stage"))
  print(table)
  if chart:
    print(f"Chart: {report.plot_tokens_per_second(run['results'], chart)}")
  return table
