"""int8 against float: the forward of one random-weight model in each of its ways, in one
process, alternating rounds (docs/performance.md#quantization).

  python -m xlnet_tf.benchmarks.quantization --size=base --batch=4 --seq_len=128 --rounds=8

Rows: float32 under XLA (the project's float32 default), bfloat16 without XLA (its bfloat16
default), the int8 model (XLNetModel.quantize("int8")) under XLA, without XLA, and traced in
ops.quantized_matmul.constant_int8_weights (oneDNN's u8 x s8 kernel). ONNX Runtime, float32 and
int8, is run/benchmark.py's peer (--implementations=ort,ort_int8).
Each row: best and median time per forward of the rounds, tokens/s of the best, and the
relative error ||y - y_float32|| / ||y_float32|| of sequence_output.
"""

import argparse
import os
import statistics
import time


def _inputs(batch, seq_len, n_token):
  import numpy as np
  rng = np.random.default_rng(0)
  half = seq_len // 2
  segments = [0] * half + [1] * (seq_len - half - 1) + [2]  # A <sep> B <sep> <cls>
  return {"input_ids": rng.integers(10, n_token, size=[batch, seq_len]).astype(np.int32),
          "segment_ids": np.array([segments] * batch, np.int32),
          "input_mask": np.ones([batch, seq_len], np.float32)}


def _distinct_kernels(model, init_std):
  """A fresh draw for every projection kernel: a new model's q, k, v, r and o kernels of a
  layer are equal (one unseeded initializer object reused)."""
  import numpy as np
  rng = np.random.default_rng(1)
  for variable in model.weights:
    if variable.name in ("q", "k", "v", "r", "o", "kernel"):
      variable.assign(rng.normal(0.0, init_std, variable.shape).astype(np.float32))


def _runners(size, batch, seq_len):
  """{row: a callable returning sequence_output as NumPy}, float32 XLA first."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import keras
  import numpy as np
  import tensorflow as tf
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.modeling.ops.quantized_matmul import constant_int8_weights

  config = XLNetConfig.preset(size, dropout=0.0, dropatt=0.0)
  inputs = _inputs(batch, seq_len, config.n_token)
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

  runners = {"float32, XLA": forward(float_model, True),
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


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--size", default="base")
  parser.add_argument("--batch", type=int, default=4)
  parser.add_argument("--seq_len", type=int, default=128)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--calls", type=int, default=3, help="forwards per round")
  args = parser.parse_args(argv)
  import numpy as np

  runners = _runners(args.size, args.batch, args.seq_len)
  outputs = {name: run() for name, run in runners.items()}  # warm-up: traces, compilations
  reference = outputs["float32, XLA"]
  times = {name: [] for name in runners}
  for _ in range(args.rounds):  # alternating: each round runs every row in turn
    for name, run in runners.items():
      started = time.perf_counter()
      for _ in range(args.calls):
        run()
      times[name].append((time.perf_counter() - started) / args.calls)
  tokens = args.batch * args.seq_len
  print(f"\n{args.size}, {args.batch}x{args.seq_len}, forward; {args.rounds} rounds of "
        f"{args.calls} calls\n")
  print("| model | best ms | median ms | tokens/s (best) | vs float32 XLA | relative error |")
  print("|---|---:|---:|---:|---:|---:|")
  base = min(times["float32, XLA"])
  for name, values in times.items():
    error = float(np.linalg.norm(outputs[name] - reference) / np.linalg.norm(reference))
    print(f"| {name} | {min(values) * 1e3:.0f} | {statistics.median(values) * 1e3:.0f} | "
          f"{tokens / min(values):,.0f} | {base / min(values):.2f}x | {error:.2%} |")


if __name__ == "__main__":
  main()
