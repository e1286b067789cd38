"""The model steps run/benchmark.py times and run/profile_step.py profiles.

One place for both tools, importable as a package module (no sys.path edits): random inputs
with the original's permutation-mask semantics, and a callable running one forward, train,
serving or generation step of xlnet_tf (or one classifier fine-tuning step, for
run/benchmark.py --memory: build_finetuning_step) for a benchmark spec (dict: size, batch, seq_len,
dtype, mode, and optionally jit, fused, vocab, new_tokens, keras_optimizer); the int8 forward
(XLNetModel.quantize), and ONNX Runtime's session on the project's ONNX export of the backbone,
float32 or int8 (xlnet_tf.serving.onnx_quantization).

Imports of TensorFlow and of the rest of the package happen inside the functions: the
benchmark's --baseline workers import this module first, then point `xlnet_tf` at another
revision, whose layers these steps then time.
"""

import os
import tempfile

VOCAB = 32000  # the released models'; --vocab_sizes for others
ONNX_SEP_ID = 4  # XLNet's <sep>, which write_onnx asks for (the backbone's outputs do not read it)


def random_inputs(batch, seq_len, seed=0, vocab=VOCAB):
  """Random ids; per row seq_len/6 targets in a random order (the original's mask semantics)."""
  import numpy as np
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


def build_xlnet_tf_step(spec):
  """A callable running one forward or train step of xlnet_tf for `spec` (see the module docstring).

  spec["jit"] overrides the default: XLA for float32; none for bfloat16, whose matmuls XLA's
  CPU backend runs at the float32 rate while TF's oneDNN kernels use the bfloat16 units."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  import keras
  import tensorflow as tf
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.heads import XLNetPretrainer
  from xlnet_tf.heads.pretrainer import masked_lm_loss
  from xlnet_tf.training.optimization import create_optimizer
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  jit = spec.get("jit")
  jit = spec["dtype"] == "float32" if jit is None else jit
  vocab = spec.get("vocab", VOCAB)
  config = XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.1, dropatt=0.1)
  batch, seq_len = spec["batch"], spec["seq_len"]
  ids, perm_mask, target_mapping = random_inputs(batch, seq_len, vocab=vocab)
  inputs = {"input_ids": tf.constant(ids), "segment_ids": tf.zeros_like(ids),
            "input_mask": tf.ones([batch, seq_len])}
  if spec["mode"] == "generate":
    return _generation_step(spec)
  if spec["mode"] in INFILL_MODES:
    return _infill_step(spec)
  if spec["mode"] in LM_EVAL_MODES:
    return _lm_evaluation_step(spec, jit)
  # profile_step.py --nofused; passed only when asked (a --baseline revision may predate it)
  backbone = XLNetModel(config, **({"fused": spec["fused"]} if "fused" in spec else {}))
  if spec["mode"] in ("serve", "serve_xla"):
    return _serving_step(backbone, inputs, seq_len, xla=spec["mode"] == "serve_xla")
  if spec["mode"] == "forward":
    model = backbone
    forward = tf.function(lambda x: model(x, training=False)["sequence_output"],
                          jit_compile=jit)
    return lambda: forward(inputs).numpy()
  model = XLNetPretrainer(backbone)
  inputs.update(perm_mask=tf.constant(perm_mask), target_mapping=tf.constant(target_mapping))
  target = tf.gather(inputs["input_ids"], tf.argmax(target_mapping, -1, output_type=tf.int32),
                     batch_dims=1)
  mask = tf.ones(target.shape)
  if spec.get("keras_optimizer"):
    keras_adamw = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, clipnorm=1.0)
    keras_adamw.build(model.trainable_variables)

    @tf.function(jit_compile=jit)
    def whole_step(x):
      with tf.GradientTape() as tape:
        loss = masked_lm_loss(model(x, training=True)["logits"], target, mask)
      keras_adamw.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
      return loss
    return lambda: whole_step(inputs).numpy()
  step = train_step(model, lambda x: masked_lm_loss(model(x, training=True)["logits"], target,
                                                    mask),
                     create_optimizer(model, 1e-4, 1000, 10), jit)
  return lambda: step(inputs).numpy()


def distinct_weights(model, seed=0):
  """Gives every weight but the LayerNorms' its own draw from N(0, init_std^2). A fresh
  XLNetModel's q, k, v, r and o kernels of a layer hold equal values, and tf2onnx merges equal
  constants: its file would compute one projection where the model computes three."""
  import numpy as np
  from xlnet_tf.checkpoints.naming import backbone_of
  rng = np.random.default_rng(seed)
  std = backbone_of(model).config.init_std
  for variable in model.weights:
    if not variable.path.endswith(("gamma", "beta")):
      variable.assign(rng.normal(0.0, std, tuple(variable.shape)).astype(np.float32))


def build_xlnet_tf_int8_step(spec):
  """The backbone's forward after XLNetModel.quantize("int8"), weights from distinct_weights:
  (run, the float model's sequence output on the same inputs, computed before quantizing).
  The forward is traced in ops.quantized_matmul.constant_int8_weights without XLA (oneDNN's
  int8 kernel on constant weights: the fastest int8 path on CPU, docs/performance.md) unless
  spec["jit"] is True (the default int8 path under XLA). --modes=serve: the SavedModel of
  export_saved_model(quantize="int8"), what TF Serving runs; --modes=generate: the int8 LM's
  generation (_generation_step)."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  if spec["mode"] == "generate":
    return _generation_step(spec, int8=True)
  import contextlib
  import tensorflow as tf
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.modeling.ops.quantized_matmul import constant_int8_weights
  jit = bool(spec.get("jit"))
  vocab = spec.get("vocab", VOCAB)
  model = XLNetModel(XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.0, dropatt=0.0))
  distinct_weights(model)
  ids, _, _ = random_inputs(spec["batch"], spec["seq_len"], vocab=vocab)
  inputs = {"input_ids": tf.constant(ids), "segment_ids": tf.zeros_like(ids),
            "input_mask": tf.ones(ids.shape)}
  reference = model(inputs, training=False)["sequence_output"].numpy()
  if spec["mode"] == "serve":  # export_saved_model quantizes it
    return _serving_step(model, inputs, spec["seq_len"], xla=False, quantize="int8"), reference
  model.quantize("int8")
  forward = tf.function(lambda x: model(x, training=False)["sequence_output"], jit_compile=jit)
  with contextlib.nullcontext() if jit else constant_int8_weights():
    forward(inputs)  # traced here
  return lambda: forward(inputs).numpy(), reference


def onnx_files(spec, directory):
  """(float32 file, int8 file) of the backbone of spec's size, seq_len and vocabulary in
  `directory`: the rows of one model share them."""
  name = f"xlnet_{spec['size']}_t{spec['seq_len']}_v{spec.get('vocab', VOCAB)}"
  return os.path.join(directory, name + ".onnx"), os.path.join(directory, name + ".int8.onnx")


def export_onnx_files(spec):
  """Writes the backbone of spec's size (float32, weights from distinct_weights, dropout off)
  as the project's ONNX file of the ids signature (xlnet_tf.serving.write_onnx, T = seq_len)
  and that file after quantize_onnx_int8 (checked against it on verification_inputs: padding,
  three segments) into spec["onnx_dir"] (onnx_files' names; each renamed into place when
  complete). Returns the int8 check's relative error."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.serving import write_onnx
  from xlnet_tf.serving.onnx_litert import verification_inputs
  from xlnet_tf.serving.onnx_quantization import quantize_onnx_int8
  vocab = spec.get("vocab", VOCAB)
  model = XLNetModel(XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.0, dropatt=0.0))
  distinct_weights(model)
  float_path, int8_path = onnx_files(spec, spec["onnx_dir"])
  partial = float_path + ".partial"
  write_onnx(model, partial, spec["seq_len"], ONNX_SEP_ID)
  os.replace(partial, float_path)
  _, error = quantize_onnx_int8(float_path, int8_path,
                                check_inputs=verification_inputs(model, spec["seq_len"]))
  return error


def onnx_runtime_threads():
  """The CPUs this process may run on: ONNX Runtime's intra-op threads."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def build_onnx_runtime_step(spec, path):
  """A callable running the ONNX file at `path` (onnx_files) in ONNX Runtime on the CPU,
  intra-op threads = spec["cpu_threads"] if set, else onnx_runtime_threads(), every graph
  optimization, on the inputs of build_xlnet_tf_step's forward: returns the sequence output."""
  import numpy as np
  import onnxruntime
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = spec.get("cpu_threads") or onnx_runtime_threads()
  options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
  session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
  ids, _, _ = random_inputs(spec["batch"], spec["seq_len"], vocab=spec.get("vocab", VOCAB))
  feeds = {"input_ids": ids, "segment_ids": np.zeros_like(ids),
           "input_mask": np.ones(ids.shape, np.float32)}
  return lambda: session.run(["sequence_output"], feeds)[0]


def train_step(model, loss_of, optimizer, jit):
  """A tf.function running one training step as run/pretrain.py's loop does: the loss
  `loss_of(inputs)` and its gradients (XLA-compiled with `jit`), then the optimizer's update."""
  import tensorflow as tf

  @tf.function(jit_compile=jit)
  def gradients(x):
    with tf.GradientTape() as tape:
      loss = loss_of(x)
    return loss, tape.gradient(loss, model.trainable_variables)

  @tf.function
  def step(x):
    loss, grads = gradients(x)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
  return step


def build_finetuning_step(spec):
  """A callable running one fine-tuning step of the classifier head (forward, backward and the
  project's AdamW update) for `spec`: size, batch, seq_len, dtype, recompute (the backbone's
  recompute_blocks), optionally jit (default as build_xlnet_tf_step), vocab, freeze_layers.
  Two-segment rows (A <sep> B <sep> <cls>), dropout 0.1, 2 classes."""
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  import keras
  import numpy as np
  import tensorflow as tf
  from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
  from xlnet_tf.training.optimization import create_optimizer
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  jit = spec.get("jit")
  jit = spec["dtype"] == "float32" if jit is None else jit
  config = XLNetConfig.preset(spec["size"], n_token=spec.get("vocab", VOCAB)).for_finetuning(
      dropout=0.1, dropatt=0.1)
  backbone = XLNetModel(config, recompute_blocks=spec["recompute"])
  if spec.get("freeze_layers") is not None:
    backbone.freeze_layers(spec["freeze_layers"])
  model = XLNetClassifier(backbone, num_classes=2)
  batch, seq_len = spec["batch"], spec["seq_len"]
  ids, _, _ = random_inputs(batch, seq_len, vocab=config.n_token)
  half = (seq_len - 1) // 2
  segments = np.array([0] * half + [1] * (seq_len - 1 - half) + [2], np.int32)
  inputs = {"input_ids": tf.constant(ids),
            "segment_ids": tf.constant(np.tile(segments, [batch, 1])),
            "input_mask": tf.ones([batch, seq_len])}
  labels = tf.constant(np.arange(batch) % 2, tf.int32)
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  step = train_step(model, lambda x: loss(labels, model(x, training=True)),
                    create_optimizer(model, 2e-5, 1000, weight_decay=0.01), jit)
  return lambda: step(inputs).numpy()


def _generation_step(spec, int8=False):
  """Greedy generation of spec["new_tokens"] tokens after random prompts [batch, seq_len] with
  the XLNet LM (XLNetPretrainer, objective perm; bi_data off, as generation needs). bfloat16:
  the weights themselves in bfloat16 (memory-bound steps read half the bytes). int8: (run, the
  float LM's generated ids), the LM quantized after generating them."""
  import keras
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.inference import generation
  from xlnet_tf.heads import XLNetPretrainer
  if spec["dtype"] == "bfloat16":  # bfloat16 weights: half the bytes a step reads
    keras.mixed_precision.set_global_policy("bfloat16")
  config = XLNetConfig.preset(spec["size"], n_token=VOCAB, bi_data=False)
  keras.utils.set_random_seed(0)  # the same LM in every row and run (same_tokens compares)
  model = XLNetPretrainer(XLNetModel(config))
  ids, _, _ = random_inputs(spec["batch"], spec["seq_len"])
  run = lambda: generation.generate(model, ids, spec["new_tokens"]).numpy()  # noqa: E731
  if not int8:
    return run
  reference = run()
  model.quantize("int8")
  return run, reference


# Blanks per text for --modes=infill: INFILL_SPANS spans of INFILL_SPAN pieces (32 pieces).
INFILL_SPANS, INFILL_SPAN = 8, 4
# mode -> infilling.fill's use_cache: the context's states reused, or everything recomputed.
INFILL_MODES = {"infill": True, "infill_recompute": False}


def infill_inputs(batch, seq_len, seed=0, vocab=VOCAB):
  """Random texts [batch, seq_len] ending in <sep> <cls>, each with INFILL_SPANS blank spans
  of INFILL_SPAN pieces at random, non-overlapping places: (input_ids, segment_ids,
  fill_mask)."""
  import numpy as np
  from xlnet_tf.inference import infilling
  rng = np.random.default_rng(seed)
  ids = rng.integers(10, vocab, size=[batch, seq_len]).astype(np.int32)
  ids[:, -2:] = [infilling.DEFAULT_SEP_ID, infilling.DEFAULT_CLS_ID]
  segments = np.zeros_like(ids)
  segments[:, -1] = 2
  fill_mask = np.zeros([batch, seq_len], np.float32)
  slots = (seq_len - 2) // INFILL_SPAN  # span-aligned places before <sep>
  for row in range(batch):
    for slot in rng.choice(slots, INFILL_SPANS, replace=False):
      fill_mask[row, slot * INFILL_SPAN:(slot + 1) * INFILL_SPAN] = 1
  return ids, segments, fill_mask


def _infill_step(spec):
  """Greedy left-to-right filling of the blanks of infill_inputs with the XLNet LM (objective
  perm, bi_data off), reusing the context's states or recomputing them (INFILL_MODES)."""
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.inference import infilling
  from xlnet_tf.heads import XLNetPretrainer
  config = XLNetConfig.preset(spec["size"], n_token=VOCAB, bi_data=False)
  model = XLNetPretrainer(XLNetModel(config))
  ids, segments, fill_mask = infill_inputs(spec["batch"], spec["seq_len"])
  use_cache = INFILL_MODES[spec["mode"]]
  return lambda: infilling.fill(model, ids, fill_mask, segment_ids=segments,
                                use_cache=use_cache).numpy()


# Transformer-XL's Table 7 (--modes=lm_eval,lm_eval_vanilla), shape 1xL: batch 1, attention
# length L. With memory, LM_EVAL_SEGMENTS segments of LM_EVAL_SEGMENT tokens over a memory of
# L per call; vanilla, LM_EVAL_WINDOWS predictions, each re-running a window of L tokens.
LM_EVAL_MODES = ("lm_eval", "lm_eval_vanilla")
LM_EVAL_SEGMENT, LM_EVAL_SEGMENTS, LM_EVAL_WINDOWS = 128, 4, 4


def lm_eval_tokens(mode: str) -> int:
  """Tokens scored by one call of an LM_EVAL_MODES step."""
  return LM_EVAL_SEGMENTS * LM_EVAL_SEGMENT if mode == "lm_eval" else LM_EVAL_WINDOWS


def _lm_evaluation_step(spec, jit):
  """One call of xlnet_tf.studies.evaluation_speed's memory or vanilla evaluation with a
  left-to-right LM (attn_type uni, objective clm) of spec["size"]."""
  import numpy as np
  from xlnet_tf import XLNetConfig, XLNetModel
  from xlnet_tf.heads import XLNetPretrainer
  from xlnet_tf.studies.evaluation_speed import memory_evaluation, vanilla_evaluation
  if spec["batch"] != 1:
    raise ValueError(f"--modes={spec['mode']} times batch 1 (Table 7); got --shapes "
                     f"{spec['batch']}x{spec['seq_len']}")
  length = spec["seq_len"]
  config = XLNetConfig.preset(spec["size"], n_token=VOCAB, attn_type="uni", bi_data=False)
  model = XLNetPretrainer(XLNetModel(config), objective="clm")
  calls = spec["repeats"] + 1
  ids = np.random.default_rng(0).integers(
      0, VOCAB, size=[1, length + (2 + calls * LM_EVAL_SEGMENTS) * LM_EVAL_SEGMENT + 1])
  ids = ids.astype(np.int32)
  if spec["mode"] == "lm_eval":
    return memory_evaluation(model, ids, length, LM_EVAL_SEGMENT, LM_EVAL_SEGMENTS, jit)
  return vanilla_evaluation(model, ids, length, LM_EVAL_WINDOWS, jit)


def _serving_step(model, inputs, seq_len, xla, quantize="none"):
  """The backbone exported for TF Serving (xlnet_tf.serving.saved_model), loaded back: its serve_ids
  signature, in the graph a model server runs (the policy's dtype; the element-wise regions
  as plain ops, or XLA-compiled with `xla`)."""
  import tensorflow as tf
  from xlnet_tf.pretraining.data import corpus
  from xlnet_tf.text.sentencepiece_training import train_sentencepiece
  from xlnet_tf.serving.saved_model import export_saved_model
  with tempfile.TemporaryDirectory() as directory:  # the export needs a SentencePiece model
    files = corpus.write_corpus_files(corpus.python_docs_documents()[:200],
                                      os.path.join(directory, "corpus"), num_files=1)
    sp_path = train_sentencepiece(files, os.path.join(directory, "spiece"), vocab_size=1000)
    path = export_saved_model(model, sp_path, directory, "bench", seq_len, warmup_requests=0,
                              xla=xla, **({"quantize": quantize} if quantize != "none" else {}))
    serve_ids = tf.saved_model.load(path).signatures["serve_ids"]
  return lambda: serve_ids(**inputs)["sequence_output"].numpy()
