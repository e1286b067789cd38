"""xlnet_tf's int8 rows in run/benchmark.py (xlnet_tf_int8): the backbone after
XLNetModel.quantize("int8"), its forward (traced in constant_int8_weights: oneDNN's int8
kernel on constant weights, the fastest int8 path on CPU, docs/performance.md), its exported
SavedModel (--modes=serve) and the int8 LM's generation (--modes=generate), each against its
float model on the same inputs.
"""

import contextlib

import tensorflow as tf

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.modeling.ops import constant_int8_weights
from xlnet_tf.benchmarks import decoding_steps, rows, serving_steps, steps


def measure_int8(spec):
  """An xlnet_tf_int8 row (rows.timed): forward and serve with the relative error of the int8
  output against the float model's, generate with the share of new tokens the float LM
  generates too (same_tokens)."""
  run, reference = build_int8_step(spec)
  if spec["mode"] == "generate":
    new = spec["new_tokens"]
    same = float((run()[:, -new:] == reference[:, -new:]).mean())
    return dict(rows.timed(run, spec), same_tokens=same)
  result = rows.timed(run, spec)
  return dict(result, relative_error=rows.relative_error(reference, run()))


def build_int8_step(spec):
  """(run, the float model's output on the same inputs, computed before quantizing): the
  backbone's forward after XLNetModel.quantize("int8"), weights from steps.distinct_weights,
  traced in constant_int8_weights without XLA unless spec["jit"] is True (the default int8
  path under XLA); --modes=serve: the SavedModel of export_saved_model(quantize="int8"), what
  TF Serving runs; --modes=generate: decoding_steps.generation_step of the int8 LM (its output
  the generated ids)."""
  if spec["mode"] == "generate":
    return decoding_steps.generation_step(spec, int8=True)
  jit = bool(spec.get("jit"))
  vocab = spec.get("vocab", rows.VOCAB)
  model = XLNetModel(XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.0, dropatt=0.0))
  steps.distinct_weights(model)
  inputs = steps.xlnet_tf_inputs(spec["batch"], spec["seq_len"], vocab)
  reference = model(inputs, training=False)["sequence_output"].numpy()
  if spec["mode"] == "serve":  # export_saved_model quantizes it
    return serving_steps.serving_step(model, inputs, spec["seq_len"], xla=False,
                                      quantize="int8"), reference
  model.quantize("int8")
  forward = tf.function(lambda x: model(x, training=False)["sequence_output"], jit_compile=jit)
  with contextlib.nullcontext() if jit else constant_int8_weights():
    forward(inputs)  # traced here
  return lambda: forward(inputs).numpy(), reference
