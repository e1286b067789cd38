"""The serving rows of xlnet_tf in run/benchmark.py (--modes=serve, serve_text, serve_xla): the
backbone exported for TF Serving (xlnet_tf.serving.saved_model), loaded back with
tf.saved_model.load and called through a signature, in the graph a model server runs: serve_ids
(token ids) or, for serve_text, serving_default (raw strings, tokenized in the graph).
"""

import os
import tempfile

import keras
import tensorflow as tf

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.serving.saved_model import export_saved_model
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.benchmarks import rows, steps


def measure_serving(spec):
  """A serve, serve_text or serve_xla row of xlnet_tf (rows.timed): the policy's dtype, dropout
  0.1 in the config (off in serving), the element-wise regions as plain ops or XLA-compiled."""
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  vocab = spec.get("vocab", rows.VOCAB)
  config = XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.1, dropatt=0.1)
  backbone = XLNetModel(config, **({"fused": spec["fused"]} if "fused" in spec else {}))
  inputs = steps.xlnet_tf_inputs(spec["batch"], spec["seq_len"], vocab)
  run = serving_step(backbone, inputs, spec["seq_len"], xla=spec["mode"] == "serve_xla",
                     text=spec["mode"] == "serve_text")
  return rows.timed(run, spec)


def texts_of_pieces(batch, seq_len):
  """`batch` Python documentation texts, each longer than seq_len pieces of any vocabulary
  (the string signature truncates them to seq_len)."""
  documents = [" ".join(document) for document in corpus.python_docs_documents()]
  long_enough = [text for text in documents if len(text.split()) > 2 * seq_len]
  return [long_enough[row % len(long_enough)] for row in range(batch)]


def serving_step(model, inputs, seq_len, xla, quantize="none", text=False):
  """A callable running `model` exported for TF Serving and loaded back on `inputs`: its
  serve_ids signature's sequence output, or with `text` its serving_default signature's on
  as many texts of seq_len pieces (the policy's dtype; the element-wise regions as plain ops,
  or XLA-compiled with `xla`; int8 weights with quantize="int8")."""
  with tempfile.TemporaryDirectory() as directory:  # the export needs a SentencePiece model
    files = corpus.write_corpus_files(corpus.python_docs_documents()[:200],
                                      os.path.join(directory, "corpus"), num_files=1)
    sp_path = train_sentencepiece(files, os.path.join(directory, "spiece"), vocab_size=1000)
    path = export_saved_model(model, sp_path, directory, "bench", seq_len, warmup_requests=0,
                              xla=xla, **({"quantize": quantize} if quantize != "none" else {}))
    signatures = tf.saved_model.load(path).signatures
  if text:
    texts = tf.constant(texts_of_pieces(int(inputs["input_ids"].shape[0]), seq_len))
    return lambda: signatures["serving_default"](text=texts)["sequence_output"].numpy()
  return lambda: signatures["serve_ids"](**inputs)["sequence_output"].numpy()
