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
      --output=docs/results/speed/serving/int8_serving_base_4x128_2x512_CPU  # the CPU

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
      --output=docs/results/speed/generation/lm_evaluation_memory_vs_vanilla_base_CPU

--modes=generate times greedy generation of --new_tokens tokens after prompts of seq_len tokens
with the XLNet LM (bi attention, the query stream predicting the next token):
xlnet_tf.inference.generate against Hugging Face's XLNetLMHeadModel.generate; tokens/s counts
the new tokens.

  python run/benchmark.py --modes=generate --shapes=1x128,8x128 --dtypes=float32 \
      --dropout=false --data_copies=0 --repeats=2 \
      --output=docs/results/speed/generation/generation_base_1x128_8x128_CPU

  python run/benchmark.py --sizes=base --shapes=4x128,2x512 --rounds=2 \
      --output=docs/results/speed/peers/peers_base_4x128_2x512_CPU

--memory measures instead the peak memory of ONE fine-tuning step (classifier head, forward +
backward + the project's AdamW update, dropout on), each --shapes point x --dtypes x
--recompute in a fresh process (host peak RSS; on a GPU TensorFlow's device-memory peak), fits
peak = fixed + per_example * batch per row and reports the largest batch that fits
--memory_budget_gb (xlnet_tf/benchmarks/finetuning_memory.py; docs/benchmarks.md, "Fine-tuning
memory"):

  python run/benchmark.py --memory --sizes=base,large --shapes=1x128,2x128,4x128,1x512,2x512 \
      --dtypes=float32,bfloat16 --recompute=false,true \
      --output=docs/results/memory/finetuning_memory_base_large_CPU

--threads=0,1 times every row twice: with each runtime's own threads (every CPU) and with one
thread (TensorFlow's intra- and inter-op threads, torch.set_num_threads, ONNX Runtime's intra-op
threads); a row's "vs fastest peer" is against the peers' fastest setting. Batch-1 int8
generation runs fastest on one thread on a 2-core machine (docs/performance.md):

  python run/benchmark.py --modes=generate --shapes=1x128,8x128 --dtypes=float32 \
      --implementations=xlnet_tf,xlnet_tf_int8,hf_torch --threads=0,1 --dropout=false \
      --data_copies=0 --repeats=2 \
      --output=docs/results/speed/generation/generation_base_1x128_8x128_CPU

With --rounds=N every row is measured N times, the implementations taking turns, and the table
keeps each row's best (all rounds' times are in the JSON).

--baseline=REV also measures every xlnet_tf row with the package as it was at git revision REV
(checked out into a temporary worktree; the timing code is this revision's, the package REV's),
taking turns with this revision, and prints this revision's speed as a ratio to it. Run it
before landing a change to modeling/, heads/ or the training loop (docs/performance.md):

  python run/benchmark.py --baseline=main --sizes=base --shapes=4x128 --modes=forward,train \
      --implementations=xlnet_tf --dropout=false --data_copies=0 --rounds=2

The smoke row .ci/run prints (tiny model, 32k vocabulary, seconds; not a pass/fail check):

  python run/benchmark.py --baseline=REV --sizes=tiny --shapes=4x128 --dtypes=float32 \
      --modes=train --implementations=xlnet_tf --dropout=false --data_copies=0 --rounds=3

Results kept in the repository go under docs/results/ by topic: speed/peers, speed/serving,
speed/generation, speed/revisions (--baseline checks), memory (--memory); each named by what it
measures and the machine (CPU above), never by a revision: OUTPUT.md names its baseline.
"""

import importlib
import importlib.util
import json
import os
import sys

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.utils import plots
from xlnet_tf.benchmarks import processes, rows, runs

flags.DEFINE_list("sizes", ["base"], "Model sizes: base, large.")
flags.DEFINE_list("shapes", ["4x128", "2x512"], "batch x seq_len pairs.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Precisions.")
flags.DEFINE_list("vocab_sizes", ["32000"], "Vocabulary sizes (the LM head's width).")
flags.DEFINE_list("modes", ["forward", "train"],
                  "What to time: forward, train, serve / serve_text / serve_xla (xlnet_tf's "
                  "exported SavedModel: serve_ids, serving_default on strings, regions "
                  "XLA-compiled), with p50/p99 latency over the --repeats calls.")
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
flags.DEFINE_string("output", None, "Write OUTPUT.json and OUTPUT.md (results kept in the "
                    "repository: under docs/results/, see above).")
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
flags.register_validator("modes", lambda modes: set(modes) <= set(rows.MODES),
                         f"--modes: {', '.join(rows.MODES)}")

# The checkout this script belongs to: where --baseline revisions are checked out from.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def work(spec):
  """Measures one row in this process (a --worker, or a child forked by --fork_rows): its
  runtime's threads set first (spec["cpu_threads"], before any op runs; ONNX Runtime's are
  options of its session), a --baseline row's package imported (this revision's sets
  TensorFlow's threads: an old one may not), then the module that measures the row imported,
  and only it: the PyTorch rows never load TensorFlow. These imports happen here, in the row's
  process, and nowhere else in the package's benchmark code."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # a row's error is its last line of output
  threads = spec.get("cpu_threads")
  if threads and spec["implementation"].startswith("hf_torch"):
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
  elif threads and not spec["implementation"].startswith("ort"):
    from xlnet_tf.utils.threads import set_cpu_threads
    set_cpu_threads(threads)
  if "source" in spec:
    _use_baseline_package(spec["source"])
  module, function = rows.row_function(spec)
  return getattr(importlib.import_module(f"xlnet_tf.benchmarks.{module}"), function)(spec)


def _use_baseline_package(source):
  """Makes `import xlnet_tf` load the package in `source` (a --baseline worktree), all but
  xlnet_tf.benchmarks, which stays this revision's: the baseline's model timed by this
  revision's steps (xlnet_tf.benchmarks.steps imports the top-level names every revision has).
  The modules imported so far (no TensorFlow yet) are dropped so that none of this revision's
  stays."""
  benchmarks = os.path.dirname(os.path.abspath(rows.__file__))
  for name in [name for name in sys.modules if name.split(".")[0] == "xlnet_tf"]:
    del sys.modules[name]
  sys.path.insert(0, source)
  package = importlib.import_module("xlnet_tf")
  spec = importlib.util.spec_from_file_location(
      "xlnet_tf.benchmarks", os.path.join(benchmarks, "__init__.py"),
      submodule_search_locations=[benchmarks])
  module = importlib.util.module_from_spec(spec)
  sys.modules["xlnet_tf.benchmarks"] = module
  spec.loader.exec_module(module)
  package.benchmarks = module


def measure(spec):
  """One row in a process of its own: a fresh `python run/benchmark.py --worker=SPEC`, or, with
  --fork_rows, a child of the forkserver."""
  return processes.measure(spec, __file__, work if FLAGS.fork_rows else None)


def main(argv):
  del argv
  if FLAGS.worker:
    print("RESULT " + json.dumps(work(json.loads(FLAGS.worker))))
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
  command = f"python run/benchmark.py {' '.join(sys.argv[1:])}"
  jit = None if FLAGS.jit_compile == "auto" else FLAGS.jit_compile == "true"
  if FLAGS.memory:
    runs.measure_memory(FLAGS.sizes, FLAGS.shapes, FLAGS.dtypes,
                        [value.lower() == "true" for value in FLAGS.recompute], measure,
                        FLAGS.memory_budget_gb, FLAGS.memory_limit_gb, jit, FLAGS.output, command)
  elif FLAGS.report_only:
    runs.rebuild_report(FLAGS.report_only, FLAGS.output, FLAGS.chart)
  else:
    runs.measure_speed(runs.SpeedRun(
        sizes=FLAGS.sizes, shapes=FLAGS.shapes, dtypes=FLAGS.dtypes, modes=FLAGS.modes,
        implementations=FLAGS.implementations, vocab_sizes=cli.list_flag("vocab_sizes"),
        threads=[int(value) for value in FLAGS.threads], new_tokens=FLAGS.new_tokens,
        repeats=FLAGS.repeats, rounds=FLAGS.rounds, jit=jit,
        keras_optimizer=FLAGS.keras_optimizer, torch_device=FLAGS.torch_device,
        dropout=FLAGS.dropout, data_copies=FLAGS.data_copies, baseline=FLAGS.baseline,
        output=FLAGS.output, chart=FLAGS.chart, command=command), measure, REPOSITORY)


if __name__ == "__main__":
  cli.run(main)
