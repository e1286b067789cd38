"""Speed and memory of XLNet here and in its peers, measured in one run.

Each measurement runs in its own process (so its peak RSS is its own): forward tokens/s and
permutation-LM train-step tokens/s (num_predict = seq_len / 6, AdamW step included) for
xlnet_tf and, when importable, its peers: Hugging Face transformers' PyTorch XLNet (float32, and
bfloat16 autocast) and keras-hub's XLNetBackbone (forward only: it runs the content stream, with
no query stream or target mapping to train the permutation LM with). Forward rows also time
ONNX Runtime on the project's own ONNX export of the backbone (ort: float32; ort_int8: the same
file after xlnet_tf.serving.onnx_quantization.quantize_onnx_int8, int8 weights and dynamic
activations; exported once per model shape, untimed, into a temporary folder; intra-op threads =
this machine's CPUs, every graph optimization) and the int8 models of xlnet_tf and keras-hub
after Keras' quantize("int8") (xlnet_tf_int8, keras_hub_int8; xlnet_tf_int8 traced in
constant_int8_weights, oneDNN's int8 kernel, and with --modes=serve its SavedModel exported with
quantize="int8"), and keras-hub on Keras' JAX backend (keras_hub_jax, keras_hub_jax_int8: its
predict function, jax.jit-compiled; needs jax, no dependency of the project); the int8 rows are
float32 only and report the relative error of their output against their float model's on the
same inputs (relative_error). The serving table of docs/benchmarks.md:

  python run/benchmark.py --sizes=base --shapes=4x128,2x512 --dtypes=float32 \
      --modes=forward,serve \
      --implementations=xlnet_tf,xlnet_tf_int8,ort,ort_int8,keras_hub,keras_hub_int8,hf_torch \
      --dropout=false --data_copies=0 --repeats=3 --rounds=3 \
      --output=docs/benchmarks/int8_serving_base_4x128_2x512_CPU     # name it after the CPU

It also measures this machine's dense matmul rate to report model-FLOPs use, and the speed of
the pretraining data stage (text -> TFRecords). --modes=serve (serve_xla) adds xlnet_tf's
exported SavedModel (what TF Serving runs; with XLA-compiled regions), timed through its
serve_ids signature.
--modes=infill,infill_recompute time xlnet_tf.inference.fill (greedy, left to right) of 8 blank
spans of 4 pieces per text with the XLNet LM, reusing the context's states or recomputing the
whole text at every step; tokens/s counts the filled pieces:

  python run/benchmark.py --modes=infill,infill_recompute --shapes=8x128 --dtypes=float32 \
      --implementations=xlnet_tf --dropout=false --data_copies=0 --repeats=2

--modes=lm_eval,lm_eval_vanilla time Transformer-XL's Table 7 with a left-to-right LM, shape
1xL for an attention length L: scoring segments of 128 tokens over a memory of L, against the
vanilla model re-running a window of L tokens for every prediction; tokens/s counts the tokens
scored (their ratio is the table's speed-up):

  python run/benchmark.py --modes=lm_eval,lm_eval_vanilla --shapes=1x512,1x1024,1x2048 \
      --dtypes=float32 --implementations=xlnet_tf --dropout=false --data_copies=0 \
      --output=docs/benchmarks/lm_evaluation_memory_vs_vanilla_base

--modes=generate times greedy generation of --new_tokens tokens after prompts of seq_len tokens
with the XLNet LM (bi attention, the query stream predicting the next token):
xlnet_tf.inference.generate against Hugging Face's XLNetLMHeadModel.generate; tokens/s counts
the new tokens.

  python run/benchmark.py --modes=generate --shapes=1x128,8x128 --dtypes=float32 \
      --dropout=false --data_copies=0 --repeats=2 \
      --output=docs/benchmarks/generation_base_1x128_8x128

  python run/benchmark.py --sizes=base --shapes=4x128,2x512 --rounds=2 \
      --output=docs/benchmarks/peers_base_4x128_2x512

--memory measures instead the peak memory of ONE fine-tuning step (classifier head, forward +
backward + the project's AdamW update, dropout on), each --shapes point x --dtypes x
--recompute in a fresh process (host peak RSS; on a GPU TensorFlow's device-memory peak), fits
peak = fixed + per_example * batch per row and reports the largest batch that fits
--memory_budget_gb (xlnet_tf/benchmarks/finetuning_memory.py; docs/benchmarks.md, "Fine-tuning
memory"):

  python run/benchmark.py --memory --sizes=base,large --shapes=1x128,2x128,4x128,1x512,2x512 \
      --dtypes=float32,bfloat16 --recompute=false,true \
      --output=docs/benchmarks/finetuning_memory_base_large

--threads=0,1 times every row twice: with each runtime's own threads (every CPU) and with one
thread (TensorFlow's intra- and inter-op threads, torch.set_num_threads, ONNX Runtime's intra-op
threads); a row's "vs fastest peer" is against the peers' fastest setting. Batch-1 int8
generation runs fastest on one thread on a 2-core machine (docs/performance.md):

  python run/benchmark.py --modes=generate --shapes=1x128,8x128 --dtypes=float32 \
      --implementations=xlnet_tf,xlnet_tf_int8,hf_torch --threads=0,1 --dropout=false \
      --data_copies=0 --repeats=2 --output=docs/benchmarks/generation_base_1x128_8x128

With --rounds=N every row is measured N times, the implementations taking turns, and the table
keeps each row's best (all rounds' times are in the JSON).

--baseline=REV also measures every xlnet_tf row with the package as it was at git revision REV
(checked out into a temporary worktree; the timing code is this revision's), taking turns with
this revision, and prints this revision's speed as a ratio to it. Run it before landing a change
to layers/, ops/, model.py, heads/ or the training loop (docs/performance.md):

  python run/benchmark.py --baseline=main --sizes=base --shapes=4x128 --modes=forward,train \
      --implementations=xlnet_tf --dropout=false --data_copies=0 --rounds=2

The smoke row .ci/run prints (tiny model, 32k vocabulary, seconds; not a pass/fail check):

  python run/benchmark.py --baseline=REV --sizes=tiny --shapes=4x128 --dtypes=float32 \
      --modes=train --implementations=xlnet_tf --dropout=false --data_copies=0 --rounds=3
"""

import contextlib
import importlib.util
import itertools
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.benchmarks import finetuning_memory, report
from xlnet_tf.benchmarks.report import SIZES
from xlnet_tf.benchmarks import steps
from xlnet_tf.benchmarks.steps import VOCAB, build_xlnet_tf_step, random_inputs
from xlnet_tf.utils import plots

flags.DEFINE_list("sizes", ["base"], "Model sizes: base, large.")
flags.DEFINE_list("shapes", ["4x128", "2x512"], "batch x seq_len pairs.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Precisions.")
flags.DEFINE_list("vocab_sizes", ["32000"], "Vocabulary sizes (the LM head's width).")
flags.DEFINE_list("modes", ["forward", "train"], "What to time: forward, train, serve / "
                  "serve_xla (xlnet_tf's exported SavedModel, regions plain / XLA-compiled).")
flags.DEFINE_list("implementations", ["xlnet_tf", "hf_torch", "keras_hub"],
                  "Which to run (skipped when not importable): xlnet_tf, hf_torch, keras_hub, "
                  "and for float32 forward rows ort, ort_int8 (ONNX Runtime on the project's "
                  "ONNX export, float32 / int8), xlnet_tf_int8, keras_hub_int8 (Keras' "
                  "quantize('int8'); xlnet_tf_int8 also serve and generate), keras_hub_jax, "
                  "keras_hub_jax_int8 (keras-hub on Keras' JAX backend; needs jax).")
flags.DEFINE_bool("dropout", True, "Also time keras.layers.Dropout against FastDropout.")
flags.DEFINE_integer("data_copies", 8, "Time the data stage on the Python documentation repeated "
                     "this many times (0: skip it).")
flags.DEFINE_integer("new_tokens", 128, "--modes=generate: tokens generated per prompt.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions after one warm-up.")
flags.DEFINE_integer("rounds", 1, "Measure every row this many times, the implementations "
                     "taking turns, and keep each row's best: this shared machine's speed "
                     "drifts, and turns spread the drift over both sides of a ratio.")
flags.DEFINE_enum("jit_compile", "auto", ["auto", "true", "false"],
                  "Compile xlnet_tf's step with XLA: auto = float32 only (XLA's CPU matmuls do "
                  "not use the bfloat16 units).")
flags.DEFINE_bool("keras_optimizer", False, "Train rows: Keras' own AdamW, the whole step "
                  "(forward, backward and update) in one XLA function, as a user writes it; "
                  "default: the project's optimizer and step as run/pretrain.py runs them.")
flags.DEFINE_enum("torch_device", "cpu", ["cpu", "cuda"], "Where the PyTorch peer runs: cuda "
                  "times Hugging Face on the GPU (and the dense matmul rate there, for its MFU); "
                  "xlnet_tf's rows run where TensorFlow puts them.")
flags.DEFINE_string("output", None, "Write OUTPUT.json and OUTPUT.md.")
flags.DEFINE_string("baseline", None, "A git revision: also time xlnet_tf as it was there, "
                    "taking turns with this revision, and print the ratio.")
flags.DEFINE_bool("memory", False, "Measure the peak memory of one fine-tuning step per "
                  "--sizes x --shapes x --dtypes x --recompute point instead (see above).")
flags.DEFINE_list("recompute", ["false", "true"], "--memory: the backbone's recompute_blocks "
                  "settings to measure.")
flags.DEFINE_float("memory_budget_gb", 16.0, "--memory: the largest batch that fits this.")
flags.DEFINE_float("memory_limit_gb", 20.0, "--memory: skip a point whose peak the row's "
                   "points so far predict above this (it would exhaust the machine).")
flags.DEFINE_list("threads", ["0"], "CPU threads of each row's runtime, "
                  "every row timed at each value: 0 = the runtime's default (every CPU); N = "
                  "TensorFlow's intra- and inter-op threads, torch.set_num_threads and ONNX "
                  "Runtime's intra-op threads set to N (not the keras_hub_jax rows).")
flags.register_validator("threads", lambda values: all(v.isdigit() for v in values),
                         "--threads: numbers of threads >= 0")
flags.DEFINE_bool("fork_rows", False, "Fork the rows that import TensorFlow from a process "
                  "that has imported it once (2-3 s less per row; their peak RSS then misses "
                  "the import's untouched pages, ~0.25 GB: for quick checks, not the memory "
                  "column). Not with --memory.")
flags.DEFINE_string("worker", None, "Internal: run one measurement (JSON spec).")
flags.DEFINE_string("report_only", None, "Rebuild OUTPUT.md from a saved JSON, no measuring.")
flags.DEFINE_string("chart", None, "Also draw tokens/s of every implementation as this PNG "
                    "(with --report_only: from the saved JSON; needs matplotlib, the plots "
                    "extra).")
FLAGS = flags.FLAGS

# ---- workers ---------------------------------------------------------------------------------

def run_xlnet_tf(spec):
  if spec["implementation"] == "xlnet_tf_int8":
    run, reference = steps.build_xlnet_tf_int8_step(spec)
    if spec["mode"] == "generate":  # the share of new tokens the float LM generates too
      new = spec["new_tokens"]
      same = float((run()[:, -new:] == reference[:, -new:]).mean())
      return dict(_time(run, spec), same_tokens=same)
    return _with_relative_error(_time(run, spec), reference, run)
  return _time(build_xlnet_tf_step(spec), spec)


def _with_relative_error(result, reference, run):
  """`result` with the relative error of run()'s output against the float model's
  `reference` (imported after timing: the import adds nothing to the row's peak memory)."""
  from xlnet_tf.serving.onnx_quantization import relative_error
  return dict(result, relative_error=relative_error(reference, run()))


def run_onnx_runtime(spec):
  """ONNX Runtime on the backbone's ONNX file (ort: float32; ort_int8: its int8 version),
  exported by the first row of this model shape in a process of its own (untimed; this
  process's peak memory is the session's alone) into spec["onnx_dir"], a temporary folder the
  run's rows share."""
  with _onnx_directory(spec) as directory:
    float_path, int8_path = steps.onnx_files(spec, directory)
    if not os.path.exists(int8_path):
      exported = measure({"implementation": "onnx_export", "size": spec["size"],
                          "seq_len": spec["seq_len"], "onnx_dir": directory,
                          **({"vocab": spec["vocab"]} if "vocab" in spec else {})})
      if "error" in exported:
        raise RuntimeError(f"ONNX export: {exported['error']}")
    int8 = spec["implementation"] == "ort_int8"
    run = steps.build_onnx_runtime_step(spec, int8_path if int8 else float_path)
    result = dict(_time(run, spec), threads=spec.get("cpu_threads") or steps.onnx_runtime_threads())
    if int8:  # the float file on the same inputs, after timing
      result = _with_relative_error(result, steps.build_onnx_runtime_step(spec, float_path)(), run)
  return result


@contextlib.contextmanager
def _onnx_directory(spec):
  if spec.get("onnx_dir"):
    yield spec["onnx_dir"]
  else:
    with tempfile.TemporaryDirectory() as directory:
      yield directory


def run_onnx_export(spec):
  return dict(spec, check_error=steps.export_onnx_files(spec))


def run_hf_torch(spec):
  import torch
  import transformers
  torch.manual_seed(0)
  s = SIZES[spec["size"]]
  vocab = spec.get("vocab", VOCAB)
  config = transformers.XLNetConfig(vocab_size=vocab, d_model=s["d_model"], n_layer=s["n_layer"],
                                    n_head=s["n_head"], d_inner=s["d_inner"],
                                    ff_activation="gelu_new")
  batch, seq_len = spec["batch"], spec["seq_len"]
  device = spec.get("device", "cpu")
  ids, perm_mask, target_mapping = random_inputs(batch, seq_len, vocab=vocab)
  ids = torch.tensor(ids, dtype=torch.long, device=device)
  common = dict(input_ids=ids, token_type_ids=torch.zeros_like(ids),
                attention_mask=torch.ones(batch, seq_len, device=device))
  autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=spec["dtype"] == "bfloat16")
  if spec["mode"] == "generate":  # its defaults: the hidden states of past tokens as 'mems'
    model = transformers.XLNetLMHeadModel(config).to(device).eval()

    def run():
      with torch.no_grad(), autocast:
        model.generate(ids, max_new_tokens=spec["new_tokens"], min_new_tokens=spec["new_tokens"],
                       do_sample=False, pad_token_id=5, eos_token_id=None)
  elif spec["mode"] == "forward":
    model = transformers.XLNetModel(config).to(device).eval()

    def run():
      with torch.no_grad(), autocast:
        model(**common)
  else:
    model = transformers.XLNetLMHeadModel(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6)
    perm_mask = torch.tensor(perm_mask, device=device)
    target_mapping_t = torch.tensor(target_mapping, device=device)
    labels = torch.gather(ids, 1, target_mapping_t.argmax(-1))

    def run():
      with autocast:
        loss = model(**common, perm_mask=perm_mask,
                     target_mapping=target_mapping_t, labels=labels).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      optimizer.zero_grad()
  if device == "cuda":
    return _time(_synchronized(run), spec, device_memory=torch.cuda.max_memory_allocated)
  return _time(run, spec)


def _synchronized(run):
  """`run` timed to the end of its GPU work (kernels launch asynchronously)."""
  import torch

  def run_and_wait():
    run()
    torch.cuda.synchronize()
  return run_and_wait


def run_keras_hub(spec):
  """keras-hub's XLNetBackbone forward on Keras' TensorFlow backend, compiled as xlnet_tf's
  (XLA for float32 only), or on its JAX backend (keras_hub_jax*: Keras' predict function, which
  jax.jit compiles, at every precision); for the *_int8 rows after its quantize("int8")
  (Keras' int8 Dense, EinsumDense and Embedding)."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  on_jax = spec["implementation"].startswith("keras_hub_jax")
  os.environ["KERAS_BACKEND"] = "jax" if on_jax else "tensorflow"
  import functools
  import keras
  import keras_hub
  import numpy as np
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  s = SIZES[spec["size"]]
  model = keras_hub.models.XLNetBackbone(
      vocabulary_size=VOCAB, num_layers=s["n_layer"], num_heads=s["n_head"],
      hidden_dim=s["d_model"], intermediate_dim=s["d_inner"],
      activation=functools.partial(keras.activations.gelu, approximate=True))  # XLNet's gelu
  batch, seq_len = spec["batch"], spec["seq_len"]
  ids, _, _ = random_inputs(batch, seq_len)
  inputs = {"token_ids": ids, "segment_ids": np.zeros([batch, seq_len], np.int32),
            "padding_mask": np.ones([batch, seq_len], np.int32)}
  if not on_jax:
    import tensorflow as tf
    inputs = {name: tf.constant(value) for name, value in inputs.items()}
  reference = None
  if spec["implementation"].endswith("_int8"):  # the float model's output, eagerly
    reference = np.asarray(model(inputs, training=False))
    model.quantize("int8")
  if on_jax:
    forward = model.predict_on_batch
  else:  # traced after quantize: a trace holds the variables it was traced with
    compiled = tf.function(lambda x: model(x, training=False),
                           jit_compile=spec["dtype"] == "float32")
    forward = lambda x: compiled(x).numpy()  # noqa: E731
  result = _time(lambda: forward(inputs), spec)
  if reference is None:
    return result
  return _with_relative_error(result, reference, lambda: np.asarray(forward(inputs)))


def run_data_stage(spec):
  """The pretraining data stage (tokenize, spans, factorization orders, serialize, write) on
  the Python documentation repeated spec["copies"] times, 4 files, the default settings
  (seq_len 128, reuse 64, num_predict 21, bi_data); the SentencePiece model is trained first,
  untimed. Best of spec["repeats"] runs."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  import dataclasses
  import tempfile
  from xlnet_tf.pretraining.data import corpus
  from xlnet_tf.pretraining.data.stage import create_pretraining_data
  from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
  from xlnet_tf.text.sentencepiece_training import train_sentencepiece
  with tempfile.TemporaryDirectory() as directory:
    documents = corpus.python_docs_documents()
    files = corpus.write_corpus_files(documents * spec["copies"],
                                      os.path.join(directory, "corpus"), num_files=4)
    sp_path = train_sentencepiece(files, os.path.join(directory, "spiece"), vocab_size=2000)
    settings = PretrainingDataConfig()
    runs = [create_pretraining_data(files, sp_path, os.path.join(directory, f"out{index}"),
                                    settings) for index in range(spec["repeats"])]
  best = min(runs, key=lambda summary: summary.seconds)
  example_tokens = best.examples * settings.seq_len
  return dict(spec, seconds=best.seconds, corpus_tokens=best.tokens_read,
              example_tokens=example_tokens, workers=min(os.cpu_count() or 1, len(files)),
              settings=dataclasses.asdict(settings),
              corpus_tokens_per_sec=best.tokens_read / best.seconds,
              example_tokens_per_sec=example_tokens / best.seconds,
              peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)


def run_matmul(spec):
  if spec.get("device") == "cuda":  # the rate the GPU rows' MFU is taken against
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=getattr(torch, spec["dtype"]))
    return _time(_synchronized(lambda: a @ a), spec, flops=2 * n ** 3)
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  import tensorflow as tf
  n = 2048
  a = tf.cast(tf.random.normal([n, n]), spec["dtype"])
  step = tf.function(lambda x: tf.matmul(x, x))
  return _time(lambda: step(a).numpy(), spec, flops=2 * n ** 3)


def run_dropout(spec):
  """keras.layers.Dropout against FastDropout on one layer's dropout sites at 4x128 (the
  attention probabilities, the feed-forward's inner and outer activations) of the first
  --sizes (base: 5.3M elements)."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  import keras
  import tensorflow as tf
  from xlnet_tf.modeling.layers.dropout import FastDropout
  size = SIZES[spec.get("size", "base")]
  shapes = [[4, size["n_head"], 128, 128], [4, 128, size["d_inner"]], [4, 128, size["d_model"]]]
  inputs = [tf.random.normal(shape) for shape in shapes]
  layer = {"keras": keras.layers.Dropout, "xlnet_tf": FastDropout}[spec["layer"]](0.1, seed=0)
  step = tf.function(lambda xs: [tf.reduce_sum(layer(x, training=True)) for x in xs],
                     jit_compile=spec["xla"])
  result = _time(lambda: [v.numpy() for v in step(inputs)], spec)
  result["elements"] = sum(x.shape.num_elements() for x in inputs)
  return result


def _time(run, spec, flops=None, device_memory=None):
  run()  # warm-up: tracing and compilation
  times = []
  for _ in range(spec["repeats"]):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  seconds = min(times)
  result = dict(spec, seconds=seconds,
                peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)
  if flops:
    result["gflops"] = flops / seconds / 1e9
  if device_memory:
    result["peak_device_gb"] = device_memory() / 2 ** 30
  return result


WORKERS = {"xlnet_tf": run_xlnet_tf, "xlnet_tf_int8": run_xlnet_tf, "hf_torch": run_hf_torch,
           "keras_hub": run_keras_hub, "keras_hub_int8": run_keras_hub,
           "keras_hub_jax": run_keras_hub, "keras_hub_jax_int8": run_keras_hub,
           "ort": run_onnx_runtime, "ort_int8": run_onnx_runtime, "onnx_export": run_onnx_export,
           "matmul": run_matmul, "dropout": run_dropout, "data_stage": run_data_stage,
           "finetune_memory": finetuning_memory.step_memory}
MODES = {"forward": {"xlnet_tf", "hf_torch", "keras_hub", "ort", "ort_int8", "xlnet_tf_int8",
                     "keras_hub_int8", "keras_hub_jax", "keras_hub_jax_int8"},
         "train": {"xlnet_tf", "hf_torch"},  # keras-hub's backbone has no permutation-LM path
         "serve": {"xlnet_tf", "xlnet_tf_int8"}, "serve_xla": {"xlnet_tf"},
         "generate": {"xlnet_tf", "xlnet_tf_int8", "hf_torch"},
         "infill": {"xlnet_tf"}, "infill_recompute": {"xlnet_tf"},
         "lm_eval": {"xlnet_tf"}, "lm_eval_vanilla": {"xlnet_tf"}}
# ONNX files and the int8 models hold float32 (the int8 rows: float32 activations).
FLOAT32_ONLY = {"ort", "ort_int8", "xlnet_tf_int8", "keras_hub_int8", "keras_hub_jax_int8"}
flags.register_validator("modes", lambda modes: set(modes) <= set(MODES),
                         f"--modes: {', '.join(MODES)}")


# ---- orchestration ---------------------------------------------------------------------------

# --fork_rows: rows whose process imports TensorFlow anyway run in a child forked from a
# server that has imported it (multiprocessing's forkserver, TensorFlow preloaded, no op run:
# forking after TensorFlow's thread pools have started is unsafe), saving each row the 2-3 s
# import. The PyTorch and ONNX Runtime rows still start a fresh interpreter. A forked child's
# peak RSS misses the pages of the import it does not touch again (a tiny forward: 0.59 GB
# against 0.83 fresh), hence off by default and refused with --memory.
_TENSORFLOW_ROWS = {"xlnet_tf", "xlnet_tf_int8", "keras_hub", "keras_hub_int8", "onnx_export",
                    "dropout", "data_stage"}
_forkserver = {}


def measure(spec):
  """Runs one spec in a process of its own: its own peak RSS, and (for a --baseline row) its
  own xlnet_tf package."""
  implementation = spec.get("implementation")
  fork = FLAGS.is_parsed() and FLAGS.fork_rows
  if fork and (implementation in _TENSORFLOW_ROWS or (implementation == "matmul"
                                                      and spec.get("device") != "cuda")):
    measured = _measure_forked(spec)
  else:
    measured = _measure_fresh(spec)
  if implementation != "onnx_export":
    measured.pop("onnx_dir", None)  # the run's temporary folder: gone when the report is read
  return measured


def _measure_fresh(spec):
  result = subprocess.run([sys.executable, __file__, f"--worker={json.dumps(spec)}"],
                          capture_output=True, text=True)
  lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
  if result.returncode != 0 or not lines:
    return dict(spec, error=(result.stderr.strip().splitlines() or ["failed"])[-1][:200])
  return json.loads(lines[-1][len("RESULT "):])


def _measure_forked(spec):
  if "context" not in _forkserver:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["xlnet_tf.utils.cli", "tensorflow"])  # imported quietly
    _forkserver["context"] = context
  context = _forkserver["context"]
  receiver, sender = context.Pipe(duplex=False)
  with tempfile.NamedTemporaryFile(prefix="xlnet_tf_benchmark_", suffix=".log") as log:
    process = context.Process(target=_forked_worker, args=(spec, sender, log.name))
    process.start()
    sender.close()  # the child's end: recv() sees the end of the pipe if the child dies
    try:
      measured = receiver.recv()
    except EOFError:  # it died: its output's last line, as a fresh process's stderr
      measured = None
    process.join()
    if measured is None:
      lines = log.read().decode(errors="replace").strip().splitlines()
      measured = dict(spec, error=(lines or [f"exit code {process.exitcode}"])[-1][:200])
  return measured


def _forked_worker(spec, sender, log_path):
  """A forked row: its output into log_path, its result (or its error's line) back through
  `sender`."""
  log = os.open(log_path, os.O_WRONLY | os.O_TRUNC)
  os.dup2(log, 1)
  os.dup2(log, 2)
  try:
    result = _work(spec)
  except Exception as error:  # noqa: BLE001  (any failure is the row's error, as a fresh run's)
    result = dict(spec, error=traceback.format_exception_only(error)[-1].strip()[:200])
  sender.send(result)


def _work(spec):
  """Measures one row in this process: its runtime's threads set first (spec["cpu_threads"],
  before any op runs; ONNX Runtime's are options of its InferenceSession), then the package of a
  --baseline row imported (this revision's sets TensorFlow's threads: an old one may not)."""
  threads = spec.get("cpu_threads")
  if threads and spec["implementation"] == "hf_torch":
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
  elif threads and not spec["implementation"].startswith("ort"):
    from xlnet_tf.utils.threads import set_cpu_threads
    set_cpu_threads(threads)
  if "source" in spec:
    _import_xlnet_tf_from(spec["source"])
  return WORKERS[spec["implementation"]](spec)


def _baseline_worktree(revision):
  """Checks `revision` out into a temporary git worktree: {"revision", "source"} for the
  specs of its rows."""
  repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  source = tempfile.mkdtemp(prefix="xlnet_tf_baseline_")
  checkout = subprocess.run(["git", "-C", repository, "worktree", "add", "--detach", "--force",
                             source, revision], capture_output=True, text=True)
  if checkout.returncode != 0:
    shutil.rmtree(source, ignore_errors=True)
    raise app.UsageError(f"--baseline={revision}: git worktree add failed: "
                         f"{checkout.stderr.strip().splitlines()[-1:]}")
  commit = subprocess.run(["git", "-C", source, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
  return {"revision": f"{revision} ({commit})" if commit and commit != revision else revision,
          "source": source}


def _remove_worktree(source):
  repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  subprocess.run(["git", "-C", repository, "worktree", "remove", "--force", source],
                 capture_output=True)
  shutil.rmtree(source, ignore_errors=True)


def _import_xlnet_tf_from(source):
  """Makes `import xlnet_tf` load the package in `source` (a --baseline worktree). The modules
  imported so far (cli, config: no TensorFlow yet) are dropped so none of this revision's
  stays."""
  for name in [name for name in sys.modules if name.split(".")[0] == "xlnet_tf"]:
    del sys.modules[name]
  sys.path.insert(0, source)


PACKAGES = {"xlnet_tf": ["tensorflow"], "xlnet_tf_int8": ["tensorflow"],
            "hf_torch": ["transformers", "torch"], "keras_hub": ["keras_hub"],
            "keras_hub_int8": ["keras_hub"], "keras_hub_jax": ["keras_hub", "jax"],
            "keras_hub_jax_int8": ["keras_hub", "jax"],
            # the export (tf2onnx), the session, and the quantization tool (onnx)
            "ort": ["tensorflow", "tf2onnx", "onnxruntime"],
            "ort_int8": ["tensorflow", "tf2onnx", "onnxruntime", "onnx"]}


def available(implementation):
  """Whether the packages of `implementation` are installed (found, not imported: an import of
  TensorFlow or PyTorch costs seconds); keras-hub's XLNet is checked in a process of its own."""
  if implementation not in PACKAGES:
    raise app.UsageError(f"--implementations: {implementation!r} is not one of "
                         f"{', '.join(PACKAGES)}")
  if not all(importlib.util.find_spec(package) for package in PACKAGES[implementation]):
    return False
  if not implementation.startswith("keras_hub"):
    return True
  probe = "import keras_hub; keras_hub.models.XLNetBackbone"
  backend = "jax" if implementation.startswith("keras_hub_jax") else "tensorflow"
  return subprocess.run([sys.executable, "-c", probe], capture_output=True,
                        env=dict(os.environ, KERAS_BACKEND=backend)).returncode == 0


def main(argv):
  del argv
  if FLAGS.worker:
    print("RESULT " + json.dumps(_work(json.loads(FLAGS.worker))))
    return
  if any(map(int, FLAGS.threads)) and any(i.startswith("keras_hub_jax")
                                          for i in FLAGS.implementations):
    raise app.UsageError("--threads: the keras_hub_jax rows run on JAX's own threads; time "
                         "them with --threads=0")
  if FLAGS.chart:
    if FLAGS.memory:
      raise app.UsageError("--chart draws tokens/s: not with --memory")
    plots.check_matplotlib("--chart")
  if FLAGS.memory and FLAGS.fork_rows:
    raise app.UsageError("--fork_rows: not with --memory (a forked row's peak RSS misses "
                         "pages of the TensorFlow import)")
  if FLAGS.memory:
    measure_memory()
    return
  if FLAGS.report_only:
    with open(FLAGS.report_only) as handle:
      saved = json.load(handle)
    for result in saved["results"]:
      if "error" not in result:
        report.add_rates(result, saved["matmul_gflops"])
    print(report.write_report(FLAGS.output, saved["results"], saved["matmul_gflops"],
                              saved.get("command", ""), saved.get("dropout", []),
                              saved.get("data_stage")))
    _draw_chart(saved["results"])
    return
  dropout = []
  if FLAGS.dropout:
    for layer in ("keras", "xlnet_tf"):
      for xla in (False, True):
        dropout.append(measure({"implementation": "dropout", "layer": layer, "xla": xla,
                                "size": FLAGS.sizes[0], "repeats": 5}))
  data_stage = None
  if FLAGS.data_copies:
    data_stage = measure({"implementation": "data_stage", "copies": FLAGS.data_copies,
                          "repeats": 2})
  implementations = [i for i in FLAGS.implementations if available(i)]
  baseline = _baseline_worktree(FLAGS.baseline) if FLAGS.baseline else None
  # The ONNX files the ort rows share (one export per model shape), removed after the run.
  onnx_dir = (tempfile.mkdtemp(prefix="xlnet_tf_benchmark_onnx_")
              if {"ort", "ort_int8"} & set(implementations) else None)
  try:
    _measure_all(implementations, baseline, dropout, data_stage, onnx_dir)
  finally:
    if baseline:
      _remove_worktree(baseline["source"])
    if onnx_dir:
      shutil.rmtree(onnx_dir, ignore_errors=True)


def measure_memory():
  """--memory: every point in its own process; the table rewritten after each point (a long
  run's results so far survive an interruption)."""
  command = f"python run/benchmark.py {' '.join(sys.argv[1:])}"
  results, table = [], ""
  for spec in finetuning_memory.memory_specs(FLAGS.sizes, FLAGS.shapes, FLAGS.dtypes, [
      value.lower() == "true" for value in FLAGS.recompute]):
    point = dict(spec, implementation="finetune_memory")
    if FLAGS.jit_compile != "auto":
      point["jit"] = FLAGS.jit_compile == "true"
    predicted = finetuning_memory.too_big(results, point, FLAGS.memory_limit_gb)
    result = (dict(point, skipped=f"predicted {predicted:.1f} GB") if predicted is not None
              else measure(point))
    print(json.dumps(result), flush=True)
    results.append(result)
    table = report.write_memory_report(FLAGS.output, results, FLAGS.memory_budget_gb, command)
  print(table)


def _measure_all(implementations, baseline, dropout, data_stage, onnx_dir=None):
  specs = []
  for size in FLAGS.sizes:
    for shape in FLAGS.shapes:
      batch, seq_len = (int(v) for v in shape.split("x"))
      for dtype, mode, vocab, threads in itertools.product(
          FLAGS.dtypes, FLAGS.modes, map(int, FLAGS.vocab_sizes), map(int, FLAGS.threads)):
        extra = {"new_tokens": FLAGS.new_tokens} if mode == "generate" else {}
        if vocab != VOCAB:
          extra["vocab"] = vocab
        if threads:
          extra["cpu_threads"] = threads
        row = dict(size=size, batch=batch, seq_len=seq_len, dtype=dtype, mode=mode,
                   repeats=FLAGS.repeats, **extra)
        if FLAGS.jit_compile != "auto":
          row["jit"] = FLAGS.jit_compile == "true"
        if FLAGS.keras_optimizer and mode == "train":
          row["keras_optimizer"] = True
        specs.extend(dict(row, implementation=implementation, **_device(implementation),
                          **({"onnx_dir": onnx_dir} if implementation.startswith("ort") else {}))
                     for implementation in implementations if implementation in MODES[mode]
                     and (dtype == "float32" or implementation not in FLOAT32_ONLY))
        if baseline and "xlnet_tf" in implementations and "xlnet_tf" in MODES[mode]:
          specs.append(dict(row, implementation="xlnet_tf", **baseline))
  matmul, best = {}, [None] * len(specs)
  for _ in range(FLAGS.rounds):
    for dtype in FLAGS.dtypes:
      rate = measure({"implementation": "matmul", "dtype": dtype, "repeats": 5,
                      **_device("hf_torch")}).get("gflops")
      if rate is not None and not rate <= matmul.get(dtype, 0.0):  # the best round's rate
        matmul[dtype] = rate
    for index, spec in enumerate(specs):
      result = measure(spec)
      print(json.dumps(result), flush=True)
      best[index] = report.better_round(best[index], result)
  for dtype in FLAGS.dtypes:
    matmul.setdefault(dtype, float("nan"))
  results = []
  for result in best:
    if "error" not in result:
      report.add_rates(result, matmul)
    results.append(result)
  print(report.write_report(FLAGS.output, results, matmul,
                            f"python run/benchmark.py {' '.join(sys.argv[1:])}", dropout,
                            data_stage))
  _draw_chart(results)


def _device(implementation):
  """The spec's device field: only the PyTorch peer moves, with --torch_device=cuda."""
  on_gpu = implementation == "hf_torch" and FLAGS.torch_device == "cuda"
  return {"device": "cuda"} if on_gpu else {}


def _draw_chart(results):
  if FLAGS.chart:
    print(f"Chart: {report.plot_tokens_per_second(results, FLAGS.chart)}")




if __name__ == "__main__":
  cli.run(main)
