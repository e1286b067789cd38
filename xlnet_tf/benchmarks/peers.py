"""The peers' rows in run/benchmark.py: Hugging Face transformers' PyTorch XLNet (hf_torch:
forward, the permutation-LM train step, generate; on the CPU or, with --torch_device=cuda, the
GPU, whose dense matmul rate the GPU rows' MFU is taken against; hf_torch_int8: forward and
generate after PyTorch's quantize_dynamic of its nn.Linear layers, the int8 an HF user reaches
for) and keras-hub's XLNetBackbone
(keras_hub*: forward only, on Keras' TensorFlow or JAX backend, float or after its
quantize("int8")).

torch, transformers, keras-hub and jax are no dependencies of the project: each is imported by
the row that runs it, and Keras after the row has chosen its backend. This module imports no
TensorFlow: a PyTorch row's process never loads it.
"""

import functools
import os

import numpy as np

from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.benchmarks import rows
from xlnet_tf.utils.relative_error import relative_error


def measure_hf_torch(spec):
  """A Hugging Face row (rows.timed): XLNetModel's forward, XLNetLMHeadModel's train step
  (perm_mask, target_mapping, AdamW, gradient clipping) or its generate (greedy, its default
  'mems' of past tokens; with the step time, rows.with_step_time), float32 or bfloat16
  autocast, on spec["device"] (default cpu). hf_torch_int8: the model after
  torch.ao.quantization.quantize_dynamic of its nn.Linear layers (qint8: the feed-forward's
  and the LM head's; XLNet's attention kernels are plain parameters and stay float), with
  the relative error of its forward output (generate: the share of the float model's
  greedy tokens it generates)."""
  import torch
  import transformers
  torch.manual_seed(0)
  s = SIZE_PRESETS[spec["size"]]
  vocab = spec.get("vocab", rows.VOCAB)
  config = transformers.XLNetConfig(vocab_size=vocab, d_model=s["d_model"], n_layer=s["n_layer"],
                                    n_head=s["n_head"], d_inner=s["d_inner"],
                                    ff_activation="gelu_new")
  batch, seq_len = spec["batch"], spec["seq_len"]
  device = spec.get("device", "cpu")
  ids, perm_mask, target_mapping = rows.random_inputs(batch, seq_len, vocab=vocab)
  ids = torch.tensor(ids, dtype=torch.long, device=device)
  common = dict(input_ids=ids, token_type_ids=torch.zeros_like(ids),
                attention_mask=torch.ones(batch, seq_len, device=device))
  autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=spec["dtype"] == "bfloat16")
  int8 = spec["implementation"] == "hf_torch_int8"
  if spec["mode"] == "generate":  # its defaults: the hidden states of past tokens as 'mems'
    model = transformers.XLNetLMHeadModel(config).to(device).eval()

    def generate(new_tokens):
      with torch.no_grad(), autocast:
        return model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                              do_sample=False, pad_token_id=5, eos_token_id=None).numpy()
    reference = generate(spec["new_tokens"]) if int8 else None
    model = _quantized(model) if int8 else model
    run = functools.partial(generate, spec["new_tokens"])
    result = rows.with_step_time(rows.timed(run, spec), functools.partial(generate, 1),
                                 _torch_weight_bytes(model))
    if int8:
      new = spec["new_tokens"]
      result["same_tokens"] = float((run()[:, -new:] == reference[:, -new:]).mean())
    return result
  if spec["mode"] == "forward":
    model = transformers.XLNetModel(config).to(device).eval()

    def run():
      with torch.no_grad(), autocast:
        return model(**common).last_hidden_state.float().numpy()
    if int8:
      reference = run()
      model = _quantized(model)
      return dict(rows.timed(run, spec), relative_error=relative_error(reference, run()))
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
    return rows.timed(_synchronized(run), spec, device_memory=torch.cuda.max_memory_allocated)
  return rows.timed(run, spec)


def _quantized(model):
  """PyTorch's dynamic int8 quantization of the model's nn.Linear layers (a copy)."""
  import torch
  return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def _torch_weight_bytes(model):
  """The bytes of weights a decoding step of `model` reads: its parameters (the tied
  embedding once, read by the LM head), or with a quantized LM head its int8 weights (their
  scales are a few numbers), the float parameters but the embedding (then only looked up)."""
  import torch
  quantized = [module for module in model.modules()
               if isinstance(module, torch.ao.nn.quantized.dynamic.Linear)]
  parameters = {id(p): p for p in model.parameters()}.values()
  total = sum(p.numel() * p.element_size() for p in parameters)
  if quantized:
    total -= model.transformer.word_embedding.weight.numel() * 4
    total += sum(module.weight().numel() for module in quantized)
  return total


def measure_gpu_matmul(spec):
  """The GPU's dense matmul rate (8192², PyTorch, spec["dtype"]): what the GPU rows' MFU is
  taken against."""
  import torch
  n = 8192
  a = torch.randn(n, n, device="cuda", dtype=getattr(torch, spec["dtype"]))
  return rows.timed(_synchronized(lambda: a @ a), spec, flops=2 * n ** 3)


def _synchronized(run):
  """`run` timed to the end of its GPU work (kernels launch asynchronously)."""
  import torch

  def run_and_wait():
    run()
    torch.cuda.synchronize()
  return run_and_wait


def measure_keras_hub(spec):
  """keras-hub's XLNetBackbone forward (rows.timed) on Keras' TensorFlow backend, compiled as
  xlnet_tf's (XLA for float32 only), or on its JAX backend (keras_hub_jax*: Keras' predict
  function, which jax.jit compiles, at every precision); for the *_int8 rows after its
  quantize("int8") (Keras' int8 Dense, EinsumDense and Embedding), with the relative error of
  the output against the float model's on the same inputs."""
  on_jax = spec["implementation"].startswith("keras_hub_jax")
  os.environ["KERAS_BACKEND"] = "jax" if on_jax else "tensorflow"  # read when Keras loads
  import keras
  import keras_hub
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  s = SIZE_PRESETS[spec["size"]]
  model = keras_hub.models.XLNetBackbone(
      vocabulary_size=rows.VOCAB, num_layers=s["n_layer"], num_heads=s["n_head"],
      hidden_dim=s["d_model"], intermediate_dim=s["d_inner"],
      activation=functools.partial(keras.activations.gelu, approximate=True))  # XLNet's gelu
  batch, seq_len = spec["batch"], spec["seq_len"]
  ids, _, _ = rows.random_inputs(batch, seq_len)
  inputs = {"token_ids": ids, "segment_ids": np.zeros([batch, seq_len], np.int32),
            "padding_mask": np.ones([batch, seq_len], np.int32)}
  if not on_jax:
    import tensorflow as tf  # Keras' backend here
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
  result = rows.timed(lambda: forward(inputs), spec)
  if reference is None:
    return result
  return dict(result, relative_error=relative_error(reference,
                                                         np.asarray(forward(inputs))))
