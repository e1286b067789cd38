"""ONNX Runtime's rows in run/benchmark.py (ort, ort_int8): the project's ONNX export of the
backbone and that file after quantize_onnx_int8, run by ONNX Runtime on the CPU. The files are
written once per model shape, untimed, by an onnx_export row in a process of its own
(xlnet_tf.benchmarks.onnx_export, before the run's rows: xlnet_tf.benchmarks.runs) into a
temporary folder the run's rows share; a row's process imports no TensorFlow, so its peak
memory is the session's alone.
"""

import os

import numpy as np

from xlnet_tf.benchmarks import rows
from xlnet_tf.utils.relative_error import relative_error


def onnx_paths(spec, directory):
  """(float32 file, int8 file) of the backbone of spec's size, seq_len and vocabulary in
  `directory`: the rows of one model share them."""
  name = f"xlnet_{spec['size']}_t{spec['seq_len']}_v{spec.get('vocab', rows.VOCAB)}"
  return os.path.join(directory, name + ".onnx"), os.path.join(directory, name + ".int8.onnx")


def onnx_runtime_threads():
  """The CPUs this process may run on: ONNX Runtime's intra-op threads."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def onnx_runtime_step(path, feeds, threads=None):
  """A callable running the ONNX file at `path` in ONNX Runtime on the CPU on `feeds` (input
  name -> array), intra-op threads = `threads` or onnx_runtime_threads(), every graph
  optimization: returns the sequence output."""
  import onnxruntime  # optional: the export extra
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = threads or onnx_runtime_threads()
  options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
  session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
  return lambda: session.run(["sequence_output"], feeds)[0]


def build_onnx_runtime_step(spec, path):
  """onnx_runtime_step of the ONNX file at `path` (onnx_paths) with spec["cpu_threads"]
  threads if set, on the inputs of the xlnet_tf forward rows."""
  ids, _, _ = rows.random_inputs(spec["batch"], spec["seq_len"],
                                 vocab=spec.get("vocab", rows.VOCAB))
  feeds = {"input_ids": ids, "segment_ids": np.zeros_like(ids),
           "input_mask": np.ones(ids.shape, np.float32)}
  return onnx_runtime_step(path, feeds, spec.get("cpu_threads"))


def measure_onnx_runtime(spec):
  """An ort or ort_int8 row (rows.timed) on the files of spec["onnx_dir"]; ort_int8 with the
  relative error of its output against the float file's on the same inputs (after timing)."""
  float_path, int8_path = onnx_paths(spec, spec["onnx_dir"])
  int8 = spec["implementation"] == "ort_int8"
  path = int8_path if int8 else float_path
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: the run's ONNX export did not write it")
  run = build_onnx_runtime_step(spec, path)
  result = dict(rows.timed(run, spec), threads=spec.get("cpu_threads") or onnx_runtime_threads())
  if int8:
    result["relative_error"] = relative_error(build_onnx_runtime_step(spec, float_path)(),
                                                   run())
  return result
