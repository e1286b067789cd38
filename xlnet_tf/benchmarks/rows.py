"""The rows run/benchmark.py measures: what each implementation and mode times, which module
of this package measures it, the random inputs every row shares, and the timing itself.

A row is a spec (dict: implementation, size, batch, seq_len, dtype, mode, repeats, and
optionally vocab, new_tokens, cpu_threads, jit, fused, keras_optimizer, device, onnx_dir; a
--baseline row adds revision and source), measured in a process of its own by the function
`row_function` names. This module imports neither TensorFlow nor the rest of xlnet_tf: the
orchestrating process and the PyTorch rows never load TensorFlow, and a --baseline row's
process imports it before the other revision's package.
"""

import resource
import time

import numpy as np

VOCAB = 32000  # the released models'; --vocab_sizes for others

# What each mode times, and which implementations have it.
MODES = {"forward": {"xlnet_tf", "hf_torch", "hf_torch_int8", "keras_hub", "ort", "ort_int8",
                     "xlnet_tf_int8", "keras_hub_int8", "keras_hub_jax", "keras_hub_jax_int8"},
         "train": {"xlnet_tf", "hf_torch"},  # keras-hub's backbone has no permutation-LM path
         "serve": {"xlnet_tf", "xlnet_tf_int8"}, "serve_text": {"xlnet_tf", "xlnet_tf_int8"},
         "serve_xla": {"xlnet_tf", "xlnet_tf_int8"},
         "generate": {"xlnet_tf", "xlnet_tf_int8", "hf_torch", "hf_torch_int8"},
         "infill": {"xlnet_tf"}, "infill_recompute": {"xlnet_tf"},
         "lm_eval": {"xlnet_tf"}, "lm_eval_vanilla": {"xlnet_tf"}}
# ONNX files and the int8 models hold float32 (the int8 rows: float32 activations).
FLOAT32_ONLY = {"ort", "ort_int8", "xlnet_tf_int8", "keras_hub_int8", "keras_hub_jax_int8",
                "hf_torch_int8"}
# The packages an implementation needs (found, not imported, before a run).
PACKAGES = {"xlnet_tf": ["tensorflow"], "xlnet_tf_int8": ["tensorflow"],
            "hf_torch": ["transformers", "torch"], "hf_torch_int8": ["transformers", "torch"],
            "keras_hub": ["keras_hub"],
            "keras_hub_int8": ["keras_hub"], "keras_hub_jax": ["keras_hub", "jax"],
            "keras_hub_jax_int8": ["keras_hub", "jax"],
            # the export (tf2onnx), the session, and the quantization tool (onnx)
            "ort": ["tensorflow", "tf2onnx", "onnxruntime"],
            "ort_int8": ["tensorflow", "tf2onnx", "onnxruntime", "onnx"]}
# The rows whose process imports TensorFlow (--fork_rows forks them; the matmul row too, but
# for the GPU's, which runs in PyTorch).
TENSORFLOW_ROWS = {"xlnet_tf", "xlnet_tf_int8", "keras_hub", "keras_hub_int8", "onnx_export",
                   "dropout", "data_stage", "bandwidth", "products"}

# Blanks per text for --modes=infill: INFILL_SPANS spans of INFILL_SPAN pieces (32 pieces).
INFILL_SPANS, INFILL_SPAN = 8, 4
# mode -> infilling.fill's use_cache: the context's states reused, or everything recomputed.
INFILL_MODES = {"infill": True, "infill_recompute": False}
# Transformer-XL's Table 7 (--modes=lm_eval,lm_eval_vanilla), shape 1xL: batch 1, attention
# length L. With memory, LM_EVAL_SEGMENTS segments of LM_EVAL_SEGMENT tokens over a memory of
# L per call; vanilla, LM_EVAL_WINDOWS predictions, each re-running a window of L tokens.
LM_EVAL_MODES = ("lm_eval", "lm_eval_vanilla")
LM_EVAL_SEGMENT, LM_EVAL_SEGMENTS, LM_EVAL_WINDOWS = 128, 4, 4
SERVE_MODES = ("serve", "serve_text", "serve_xla")
DECODING_MODES = ("generate",) + tuple(INFILL_MODES) + LM_EVAL_MODES

# {implementation: (module of xlnet_tf.benchmarks, its function measuring one row)}; xlnet_tf's
# own rows by mode (_XLNET_TF_FUNCTIONS), the matmul row by device.
_FUNCTIONS = {"xlnet_tf_int8": ("int8_steps", "measure_int8"),
              "hf_torch": ("peers", "measure_hf_torch"),
              "hf_torch_int8": ("peers", "measure_hf_torch"),
              "keras_hub": ("peers", "measure_keras_hub"),
              "keras_hub_int8": ("peers", "measure_keras_hub"),
              "keras_hub_jax": ("peers", "measure_keras_hub"),
              "keras_hub_jax_int8": ("peers", "measure_keras_hub"),
              "ort": ("onnx_rows", "measure_onnx_runtime"),
              "ort_int8": ("onnx_rows", "measure_onnx_runtime"),
              "onnx_export": ("onnx_export", "export_onnx_files"),
              "matmul": ("component_rows", "measure_matmul"),
              "bandwidth": ("component_rows", "measure_bandwidth"),
              "products": ("component_rows", "measure_products"),
              "dropout": ("component_rows", "measure_dropout"),
              "data_stage": ("component_rows", "measure_data_stage"),
              "finetune_memory": ("steps", "finetuning_step_memory")}


def row_function(spec):
  """(module of xlnet_tf.benchmarks, function name) measuring the row `spec` in its process.

  A row's process imports that module alone (and what it imports): a --baseline row of the
  forward or train mode needs of the other revision only what `steps` imports (its
  top-level names, the pretrainer's loss and the optimizer)."""
  implementation = spec["implementation"]
  if implementation == "xlnet_tf":
    if spec["mode"] in SERVE_MODES:
      return "serving_steps", "measure_serving"
    if spec["mode"] in DECODING_MODES:
      return "decoding_steps", "measure_decoding"
    return "steps", "measure_xlnet_tf"
  if implementation == "matmul" and spec.get("device") == "cuda":
    return "peers", "measure_gpu_matmul"
  return _FUNCTIONS[implementation]


def lm_eval_tokens(mode: str) -> int:
  """Tokens scored by one call of an LM_EVAL_MODES step."""
  return LM_EVAL_SEGMENTS * LM_EVAL_SEGMENT if mode == "lm_eval" else LM_EVAL_WINDOWS


def random_inputs(batch, seq_len, seed=0, vocab=VOCAB):
  """Random ids; per row seq_len/6 targets in a random order (the original's mask semantics)."""
  rng = np.random.default_rng(seed)
  predictions = max(seq_len // 6, 1)
  ids = rng.integers(10, vocab, size=[batch, seq_len]).astype(np.int32)
  perm_mask = np.zeros([batch, seq_len, seq_len], np.float32)
  target_mapping = np.zeros([batch, predictions, seq_len], np.float32)
  for row in range(batch):
    targets = rng.choice(seq_len, predictions, replace=False)
    rank = np.full(seq_len, -1)
    rank[targets] = rng.permutation(predictions)
    is_target = rank >= 0
    # j is hidden from i when j is a target and i is not a later target.
    perm_mask[row] = is_target[None, :] & (~is_target[:, None] | (rank[None, :] >= rank[:, None]))
    target_mapping[row, np.arange(predictions), targets] = 1.0
  return ids, perm_mask, target_mapping


def peak_rss_gb() -> float:
  """This process's peak resident set so far, GiB (ru_maxrss: KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def timed(run, spec, flops=None, device_memory=None):
  """`spec` with the best of spec["repeats"] calls of `run` after one warm-up (tracing and
  compilation) as seconds, every call's time (call_seconds: the latency percentiles of the
  serving rows), this process's peak RSS, and with `flops` the rate in GFLOP/s, with
  `device_memory` (a callable returning bytes) the device's peak."""
  run()  # warm-up: tracing and compilation
  times = []
  for _ in range(spec["repeats"]):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  seconds = min(times)
  result = dict(spec, seconds=seconds, call_seconds=times, peak_rss_gb=peak_rss_gb())
  if flops:
    result["gflops"] = flops / seconds / 1e9
  if device_memory:
    result["peak_device_gb"] = device_memory() / 2 ** 30
  return result


def with_step_time(result, prompt_run, weight_bytes):
  """A generate row's `result` (timed) with the time of one decoding step: (the call's time -
  prompt_run's, best of result["repeats"] after a warm-up) / (new tokens - 1), prompt_run
  generating one token after the same prompt; and `weight_bytes`, the bytes of weights a step
  reads (the report sets them against the machine's memory bandwidth)."""
  prompt_run()  # warm-up: its own traces (another cache size)
  prompt = []
  for _ in range(result["repeats"]):
    start = time.perf_counter()
    prompt_run()
    prompt.append(time.perf_counter() - start)
  steps = max(result["new_tokens"] - 1, 1)
  return dict(result, prompt_seconds=min(prompt), weight_bytes=int(weight_bytes),
              step_seconds=max(result["seconds"] - min(prompt), 0.0) / steps)
