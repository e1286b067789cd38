"""xlnet_tf's int8 rows in run/benchmark.py (xlnet_tf_int8): the backbone after
XLNetModel.quantize("int8"), its forward (a plain tf.function, which a quantized model traces
with oneDNN's int8 kernel on constant weights where it exists, the fastest int8 path on CPU:
modeling.int8_inference, docs/performance.md), its exported SavedModel (--modes=serve,
serve_text) and the int8 LM's generation (--modes=generate), each against its float model on
the same inputs.
"""

import tensorflow as tf

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.benchmarks import decoding_steps, rows, serving_steps, steps
from xlnet_tf.utils.relative_error import relative_error


def measure_int8(spec):
  """An xlnet_tf_int8 row (rows.timed): forward and serve with the relative error of the int8
  output against the float model's, generate with the share of new tokens the float LM
  generates too (same_tokens)."""
  if spec["mode"] == "generate":
    generation = decoding_steps.generation_step(spec, int8=True)
    new = spec["new_tokens"]
    same = float((generation.run()[:, -new:] == generation.reference[:, -new:]).mean())
    return dict(decoding_steps.timed_generation(generation, spec), same_tokens=same)
  run, reference = build_int8_step(spec)
  result = rows.timed(run, spec)
  if reference is None:  # serve_text: strings in, no float output of the same tokens here
    return result
  return dict(result, relative_error=relative_error(reference, run()))


def build_int8_step(spec):
  """(run, the float model's output on the same inputs, computed before quantizing): the
  backbone's forward after XLNetModel.quantize("int8"), weights from steps.distinct_weights,
  a plain tf.function, or under XLA when spec["jit"] is True; --modes=serve (serve_text,
  serve_xla):
  the SavedModel of export_saved_model(quantize="int8"), what TF Serving runs (no reference
  for serve_text). Generation is measure_int8's (decoding_steps.generation_step)."""
  jit = bool(spec.get("jit"))
  vocab = spec.get("vocab", rows.VOCAB)
  model = XLNetModel(XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.0, dropatt=0.0))
  steps.distinct_weights(model)
  inputs = steps.xlnet_tf_inputs(spec["batch"], spec["seq_len"], vocab)
  reference = model(inputs, training=False)["sequence_output"].numpy()
  if spec["mode"] in rows.SERVE_MODES:  # export_saved_model quantizes it
    return serving_steps.serving_step(model, inputs, spec["seq_len"],
                                      xla=spec["mode"] == "serve_xla",
                                      quantize="int8", text=spec["mode"] == "serve_text"), (
                                          None if spec["mode"] == "serve_text" else reference)
  model.quantize("int8")
  # A plain tf.function: without XLA, the model's own default (modeling.int8_inference).
  forward = tf.function(lambda x: model(x, training=False)["sequence_output"], jit_compile=jit)
  return lambda: forward(inputs).numpy(), reference
