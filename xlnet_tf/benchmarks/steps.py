"""The model steps run/benchmark.py times and run/profile_step.py profiles: one forward or
train step of xlnet_tf, one fine-tuning step of the classifier head (run/benchmark.py --memory),
for a benchmark spec (xlnet_tf.benchmarks.rows: size, batch, seq_len, dtype, mode, and
optionally jit, fused, vocab, keras_optimizer).

A --baseline row imports this module after pointing `xlnet_tf` at another revision (run/
benchmark.py), so it times that revision's model with this revision's step: it imports the
package's top-level names, the pretrainer's loss and the optimizer, which every revision has.
"""

import time

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel, XLNetPretrainer
from xlnet_tf.heads.pretrainer import masked_lm_loss
from xlnet_tf.training.optimization import create_optimizer
from xlnet_tf.benchmarks import rows


def measure_xlnet_tf(spec):
  """The forward or train row of xlnet_tf (rows.timed)."""
  return rows.timed(build_xlnet_tf_step(spec), spec)


def xlnet_tf_inputs(batch, seq_len, vocab=rows.VOCAB):
  """The backbone's inputs on rows.random_inputs' ids: one segment, no padding."""
  ids, _, _ = rows.random_inputs(batch, seq_len, vocab=vocab)
  return {"input_ids": tf.constant(ids), "segment_ids": tf.zeros_like(ids),
          "input_mask": tf.ones([batch, seq_len])}


def jit_of(spec):
  """Whether the step is XLA-compiled: spec["jit"], else float32 only (XLA's CPU backend runs
  bfloat16 matmuls at the float32 rate, while TensorFlow's oneDNN kernels use the bfloat16
  units)."""
  jit = spec.get("jit")
  return spec["dtype"] == "float32" if jit is None else jit


def build_xlnet_tf_step(spec):
  """A callable running one forward or train step of xlnet_tf for `spec` (see the module
  docstring): the forward's sequence output, or the train step's loss."""
  if spec["mode"] not in ("forward", "train"):
    raise ValueError(f"build_xlnet_tf_step times forward and train; got mode {spec['mode']!r}")
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  jit = jit_of(spec)
  vocab = spec.get("vocab", rows.VOCAB)
  config = XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.1, dropatt=0.1)
  batch, seq_len = spec["batch"], spec["seq_len"]
  inputs = xlnet_tf_inputs(batch, seq_len, vocab)
  # profile_step.py --nofused; passed only when asked (a --baseline revision may predate it)
  backbone = XLNetModel(config, **({"fused": spec["fused"]} if "fused" in spec else {}))
  if spec["mode"] == "forward":
    forward = tf.function(lambda x: backbone(x, training=False)["sequence_output"],
                          jit_compile=jit)
    return lambda: forward(inputs).numpy()
  _, perm_mask, target_mapping = rows.random_inputs(batch, seq_len, vocab=vocab)
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
  """Gives every weight of the backbone `model` but the LayerNorms' its own draw from
  N(0, init_std^2). A fresh XLNetModel's q, k, v, r and o kernels of a layer hold equal
  values, and tf2onnx merges equal constants: its file would compute one projection where the
  model computes three."""
  rng = np.random.default_rng(seed)
  std = model.config.init_std
  for variable in model.weights:
    if not variable.path.endswith(("gamma", "beta")):
      variable.assign(rng.normal(0.0, std, tuple(variable.shape)).astype(np.float32))


def train_step(model, loss_of, optimizer, jit):
  """A tf.function running one training step as run/pretrain.py's loop does: the loss
  `loss_of(inputs)` and its gradients (XLA-compiled with `jit`), then the optimizer's update."""

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
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  config = XLNetConfig.preset(spec["size"], n_token=spec.get("vocab", rows.VOCAB)).for_finetuning(
      dropout=0.1, dropatt=0.1)
  backbone = XLNetModel(config, recompute_blocks=spec["recompute"])
  if spec.get("freeze_layers") is not None:
    backbone.freeze_layers(spec["freeze_layers"])
  model = XLNetClassifier(backbone, num_classes=2)
  batch, seq_len = spec["batch"], spec["seq_len"]
  ids, _, _ = rows.random_inputs(batch, seq_len, vocab=config.n_token)
  half = (seq_len - 1) // 2
  segments = np.array([0] * half + [1] * (seq_len - 1 - half) + [2], np.int32)
  inputs = {"input_ids": tf.constant(ids),
            "segment_ids": tf.constant(np.tile(segments, [batch, 1])),
            "input_mask": tf.ones([batch, seq_len])}
  labels = tf.constant(np.arange(batch) % 2, tf.int32)
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  step = train_step(model, lambda x: loss(labels, model(x, training=True)),
                    create_optimizer(model, 2e-5, 1000, weight_decay=0.01), jit_of(spec))
  return lambda: step(inputs).numpy()


def finetuning_step_memory(spec):
  """Runs one fine-tuning step (build_finetuning_step) in this process: spec plus peak_gb (on
  a GPU TensorFlow's device-memory peak, elsewhere this process's peak RSS:
  xlnet_tf.benchmarks.finetuning_memory says what counts), memory ("host RSS" or "GPU:0"),
  idle_rss_gb (the peak before the model: TensorFlow imported) and seconds (the step,
  compilation included). Call it in a fresh process: the peak of a process never goes down."""
  idle = rows.peak_rss_gb()
  gpu = bool(tf.config.list_physical_devices("GPU"))
  if gpu:
    tf.config.experimental.reset_memory_stats("GPU:0")
  start = time.perf_counter()
  build_finetuning_step(spec)()
  seconds = time.perf_counter() - start
  if gpu:
    peak, memory = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2 ** 30, "GPU:0"
  else:
    peak, memory = rows.peak_rss_gb(), "host RSS"
  return dict(spec, peak_gb=peak, memory=memory, idle_rss_gb=idle, seconds=seconds)
