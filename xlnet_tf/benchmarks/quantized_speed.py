"""int8 against float, and every path a user takes after quantize("int8"): the forward of one
random-weight model in each of its ways, in one process, alternating rounds
(docs/performance.md#speed-on-cpu; the command: run/quantized_speed.py).

Rows: float32 under XLA (the project's float32 default), bfloat16 without XLA (its bfloat16
default), and the int8 model (XLNetModel.quantize("int8")) through Keras' `predict`, a plain
`tf.function`, a `tf.function(jit_compile=True)`, and its exported SavedModel (loaded with
tf.saved_model.load and called through serve_ids, without XLA, as TF Serving runs it by
default; and exported with `xla=True`, its element-wise regions XLA-compiled, as TF Serving
runs it with --xla_cpu_compilation_enabled=true); with
ONNX Runtime and tf2onnx installed, ONNX Runtime int8 on the project's ONNX export of the same
float model (serving.onnx_quantization.quantize_onnx_int8), the int8 rows' peer. Each row:
best and median time per forward of the rounds, tokens/s of the best, and the relative error
||y - y_float32|| / ||y_float32|| of sequence_output.
"""

import importlib.util
import os
import statistics
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.serving.onnx_litert import verification_inputs, write_onnx
from xlnet_tf.serving.onnx_quantization import quantize_onnx_int8
from xlnet_tf.benchmarks import onnx_rows, serving_steps
from xlnet_tf.benchmarks.onnx_export import ONNX_SEP_ID

FLOAT32_XLA = "float32, XLA"
ORT_INT8 = "ONNX Runtime int8"


def forward_inputs(batch, seq_len, n_token):
  """Random ids [batch, seq_len] packed as A <sep> B <sep> <cls> (three segment ids)."""
  rng = np.random.default_rng(0)
  half = seq_len // 2
  segments = [0] * half + [1] * (seq_len - half - 1) + [2]  # A <sep> B <sep> <cls>
  return {"input_ids": rng.integers(10, n_token, size=[batch, seq_len]).astype(np.int32),
          "segment_ids": np.array([segments] * batch, np.int32),
          "input_mask": np.ones([batch, seq_len], np.float32)}


def _distinct_kernels(model, init_std):
  """A fresh draw for every projection kernel: a new model's q, k, v, r and o kernels of a
  layer are equal (one unseeded initializer object reused)."""
  rng = np.random.default_rng(1)
  for variable in model.weights:
    if variable.name in ("q", "k", "v", "r", "o", "kernel"):
      variable.assign(rng.normal(0.0, init_std, variable.shape).astype(np.float32))


def forward_runners(size, batch, seq_len, onnx_dir=None):
  """{row: a callable returning sequence_output as NumPy}, float32 XLA first; prints how long
  quantize("int8") took. With `onnx_dir` (and ONNX Runtime and tf2onnx installed), the ONNX
  Runtime int8 row, its files written there."""
  config = XLNetConfig.preset(size, dropout=0.0, dropatt=0.0)
  inputs = forward_inputs(batch, seq_len, config.n_token)
  keras.utils.set_random_seed(0)
  tensors = {name: tf.constant(value) for name, value in inputs.items()}
  float_model = XLNetModel(config)
  _distinct_kernels(float_model, config.init_std)
  weights = float_model.get_weights()
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  bfloat16_model = XLNetModel(config)
  keras.mixed_precision.set_global_policy("float32")
  bfloat16_model.set_weights(weights)
  int8_model = XLNetModel(config)
  int8_model.set_weights(weights)
  started = time.perf_counter()
  int8_model.quantize("int8")
  print(f"quantize('int8'): {time.perf_counter() - started:.1f} s")

  def forward(model, jit):
    function = tf.function(lambda x: model(x, training=False)["sequence_output"],
                           jit_compile=jit)
    return lambda: np.asarray(tf.cast(function(tensors), tf.float32))

  runners = {FLOAT32_XLA: forward(float_model, True),
             "bfloat16, no XLA": forward(bfloat16_model, False),
             "int8, predict": lambda: int8_model.predict(
                 tensors, batch_size=batch, verbose=0)["sequence_output"],
             "int8, tf.function": forward(int8_model, False),
             "int8, tf.function XLA": forward(int8_model, True),
             "int8, SavedModel": serving_steps.serving_step(int8_model, tensors, seq_len,
                                                            xla=False),
             "int8, SavedModel --xla": serving_steps.serving_step(int8_model, tensors,
                                                                  seq_len, xla=True)}
  if onnx_dir and all(importlib.util.find_spec(package)
                      for package in ("onnxruntime", "tf2onnx", "onnx")):
    float_path = write_onnx(float_model, os.path.join(onnx_dir, "float.onnx"), seq_len,
                            ONNX_SEP_ID)
    int8_path, _ = quantize_onnx_int8(float_path, os.path.join(onnx_dir, "int8.onnx"),
                                      check_inputs=verification_inputs(float_model, seq_len))
    runners[ORT_INT8] = onnx_rows.onnx_runtime_step(int8_path, inputs)
  return runners


def measure(size="base", batch=4, seq_len=128, rounds=5, calls=3, onnx=True):
  """{row: {"seconds": [per round: the mean of `calls` forwards], "relative_error"}}: every
  row of forward_runners (the ONNX Runtime row with `onnx`) warmed up, then timed in `rounds`
  rounds, each running every row in turn (a shared machine's drift spreads over all rows)."""
  with tempfile.TemporaryDirectory() as onnx_dir:
    runners = forward_runners(size, batch, seq_len, onnx_dir if onnx else None)
    return _timed_in_turns(runners, rounds, calls)


def _timed_in_turns(runners, rounds, calls):
  outputs = {name: run() for name, run in runners.items()}  # warm-up: traces, compilations
  reference = outputs[FLOAT32_XLA]
  times = {name: [] for name in runners}
  for _ in range(rounds):
    for name, run in runners.items():
      started = time.perf_counter()
      for _ in range(calls):
        run()
      times[name].append((time.perf_counter() - started) / calls)
  return {name: {"seconds": values, "relative_error": float(
      np.linalg.norm(outputs[name] - reference) / np.linalg.norm(reference))}
          for name, values in times.items()}


def markdown(rows, tokens):
  """The rows (measure) as a markdown table; `tokens` per forward (batch x seq_len). With
  the ONNX Runtime int8 row, every row's speed against it too."""
  peer = min(rows[ORT_INT8]["seconds"]) if ORT_INT8 in rows else None
  lines = ["| model | best ms | median ms | tokens/s (best) | vs float32 XLA |"
           + (" vs ONNX Runtime int8 |" if peer else "") + " relative error |",
           "|---|---:|---:|---:|---:|" + ("---:|" if peer else "") + "---:|"]
  base = min(rows[FLOAT32_XLA]["seconds"])
  for name, row in rows.items():
    best = min(row["seconds"])
    lines.append(f"| {name} | {best * 1e3:.0f} | {statistics.median(row['seconds']) * 1e3:.0f} "
                 f"| {tokens / best:,.0f} | {base / best:.2f}x |"
                 + (f" {peer / best:.2f}x |" if peer else "")
                 + f" {row['relative_error']:.2%} |")
  return "\n".join(lines)
