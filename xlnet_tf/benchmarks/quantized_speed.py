"""int8 against float: the forward of one random-weight model in each of its ways, in one
process, alternating rounds (docs/performance.md#speed-on-cpu; the command:
run/quantized_speed.py).

Rows: float32 under XLA (the project's float32 default), bfloat16 without XLA (its bfloat16
default), the int8 model (XLNetModel.quantize("int8")) under XLA, without XLA, and traced in
constant_int8_weights (oneDNN's u8 x s8 kernel). ONNX Runtime, float32 and int8, is
run/benchmark.py's peer (--implementations=ort,ort_int8). Each row: best and median time per
forward of the rounds, tokens/s of the best, and the relative error
||y - y_float32|| / ||y_float32|| of sequence_output.
"""

import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.modeling.ops import constant_int8_weights

FLOAT32_XLA = "float32, XLA"


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


def forward_runners(size, batch, seq_len):
  """{row: a callable returning sequence_output as NumPy}, float32 XLA first; prints how long
  quantize("int8") and the constant-weights trace took."""
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
             "int8, XLA": forward(int8_model, True),
             "int8, no XLA": forward(int8_model, False)}
  with constant_int8_weights():
    constant = forward(int8_model, False)
    started = time.perf_counter()
    constant()  # traced inside the context
    print(f"int8 constant weights, first call (trace): {time.perf_counter() - started:.1f} s")
  runners["int8, constant weights (oneDNN)"] = constant
  return runners


def measure(size="base", batch=4, seq_len=128, rounds=5, calls=3):
  """{row: {"seconds": [per round: the mean of `calls` forwards], "relative_error"}}: every
  row of forward_runners warmed up, then timed in `rounds` rounds, each running every row in
  turn (a shared machine's drift spreads over all rows)."""
  runners = forward_runners(size, batch, seq_len)
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
  """The rows (measure) as a markdown table; `tokens` per forward (batch x seq_len)."""
  lines = ["| model | best ms | median ms | tokens/s (best) | vs float32 XLA | relative error |",
           "|---|---:|---:|---:|---:|---:|"]
  base = min(rows[FLOAT32_XLA]["seconds"])
  for name, row in rows.items():
    best = min(row["seconds"])
    lines.append(f"| {name} | {best * 1e3:.0f} | {statistics.median(row['seconds']) * 1e3:.0f} "
                 f"| {tokens / best:,.0f} | {base / best:.2f}x | {row['relative_error']:.2%} |")
  return "\n".join(lines)
