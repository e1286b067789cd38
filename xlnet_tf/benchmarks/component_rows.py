"""The rows of run/benchmark.py that time a part rather than a model: this machine's dense
matmul rate (what MFU is taken against), its memory bandwidth (what a decoding step's weights
are set against), the rate at which TensorFlow's products read a kernel at a decoding step's
few rows, keras.layers.Dropout against the project's FastDropout, and the pretraining data
stage (text -> TFRecords).
"""

import dataclasses
import os
import tempfile

import keras
import tensorflow as tf

from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.inference.generation import TRANSPOSED_KERNEL_ROWS
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.ops.int8_packing import constant_int8_weights, quantize_kernel
from xlnet_tf.modeling.ops.int8_products import int8_matmul
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.benchmarks import rows


def measure_matmul(spec):
  """TensorFlow's rate on a 2048² matmul at spec["dtype"] (rows.timed, gflops)."""
  n = 2048
  a = tf.cast(tf.random.normal([n, n]), spec["dtype"])
  step = tf.function(lambda x: tf.matmul(x, x))
  return rows.timed(lambda: step(a).numpy(), spec, flops=2 * n ** 3)


def measure_bandwidth(spec):
  """This machine's memory read rate, GB/s: a sum over 1 GiB of float32 in TensorFlow (every
  CPU thread), best of spec["repeats"] (rows.timed, gbs)."""
  values = tf.ones([2 ** 28], tf.float32)
  step = tf.function(tf.reduce_sum)
  result = rows.timed(lambda: step(values).numpy(), spec)
  return dict(result, gbs=2 ** 30 / result["seconds"] / 1e9)


# Kernels per product-rate call: a feed-forward pair (d_model x d_inner, d_inner x d_model)
# this many times, 18.9M weights at base (75 MB in float32): larger than the caches, as a
# decoding step's weights are.
_PRODUCT_PAIRS = 4


def measure_products(spec):
  """The rate (GB/s of kernel bytes) at which the products of a decoding step read their
  kernels at spec["rows"] rows (a step's: two per text): a chain of feed-forward products of
  spec["size"], float32 compiled by XLA as the float32 steps are (their kernels transposed
  from TRANSPOSED_KERNEL_ROWS rows), or with spec["int8"] int8 kernels through
  ops.int8_products as the int8 steps call them (constant_int8_weights: oneDNN's u8 x s8
  product). A step's weights over this rate estimate the time of its products (the step's
  own kernels have other shapes), beside the bandwidth's bound (rows.timed, gbs)."""
  size = SIZE_PRESETS[spec.get("size", "base")]
  shapes = [(size["d_model"], size["d_inner"]), (size["d_inner"], size["d_model"])]
  generator = tf.random.Generator.from_seed(0)
  kernels = [generator.normal(shape) * 0.02 for shape in shapes * _PRODUCT_PAIRS]
  inputs = generator.normal([spec["rows"], size["d_model"]])
  if spec["int8"]:
    quantized = [quantize_kernel(kernel.numpy()) for kernel in kernels]

    def chain(states):
      for values, scale in quantized:
        states = tf.nn.relu(int8_matmul(states, values, scale))
      return states

    with constant_int8_weights():
      step = tf.function(chain)
      step.get_concrete_function(inputs)  # traced here: the kernels become constants
    kernel_bytes = sum(values.size + 4 * scale.size for values, scale in quantized)
  else:
    # From TRANSPOSED_KERNEL_ROWS rows the float32 steps read their feed-forward kernels
    # transposed (XLA's dot runs faster so at those rows), and so does this chain.
    transposed = spec["rows"] >= TRANSPOSED_KERNEL_ROWS
    if transposed:
      kernels = [tf.transpose(kernel) for kernel in kernels]

    def chain(states):
      for kernel in kernels:
        states = tf.nn.relu(tf.matmul(states, kernel, transpose_b=transposed))
      return states

    step = tf.function(chain, jit_compile=True)
    kernel_bytes = sum(4 * kernel.shape.num_elements() for kernel in kernels)
  result = rows.timed(lambda: step(inputs).numpy(), spec)
  return dict(result, kernel_bytes=kernel_bytes, gbs=kernel_bytes / result["seconds"] / 1e9)


def measure_dropout(spec):
  """keras.layers.Dropout against FastDropout on one layer's dropout sites at 4x128 (the
  attention probabilities, the feed-forward's inner and outer activations) of the first
  --sizes (base: 5.3M elements)."""
  size = SIZE_PRESETS[spec.get("size", "base")]
  shapes = [[4, size["n_head"], 128, 128], [4, 128, size["d_inner"]], [4, 128, size["d_model"]]]
  inputs = [tf.random.normal(shape) for shape in shapes]
  layer = {"keras": keras.layers.Dropout, "xlnet_tf": FastDropout}[spec["layer"]](0.1, seed=0)
  step = tf.function(lambda xs: [tf.reduce_sum(layer(x, training=True)) for x in xs],
                     jit_compile=spec["xla"])
  result = rows.timed(lambda: [v.numpy() for v in step(inputs)], spec)
  result["elements"] = sum(x.shape.num_elements() for x in inputs)
  return result


def measure_data_stage(spec):
  """The pretraining data stage (tokenize, spans, factorization orders, serialize, write) on
  the Python documentation repeated spec["copies"] times, 4 files, the default settings
  (seq_len 128, reuse 64, num_predict 21, bi_data); the SentencePiece model is trained first,
  untimed. Best of spec["repeats"] runs."""
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
              peak_rss_gb=rows.peak_rss_gb())
