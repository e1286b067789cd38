"""Checkpoint files written the way their own tools write them, for the loader tests.

Shapes follow the original modeling.py; the TF1 file is written by a tf.compat.v1 Saver in a
graph, the Hugging Face file by the `safetensors` package with HF's parameter names.
"""

import json
import os

import numpy as np
import tensorflow as tf

T = "model/transformer/"


def original_weights(config, seed=0):
  rng = np.random.default_rng(seed)
  L, D, N, H, F = config.n_layer, config.d_model, config.n_head, config.d_head, config.d_inner

  def normal(*shape, scale=0.3):
    return (scale * rng.standard_normal(shape)).astype(np.float32)

  bias = (L, N, H) if config.untie_r else (N, H)
  weights = {T + "word_embedding/lookup_table": normal(config.n_token, D, scale=1.0),
             T + "mask_emb/mask_emb": normal(1, 1, D, scale=1.0),
             T + "r_w_bias": normal(*bias), T + "r_r_bias": normal(*bias),
             T + "r_s_bias": normal(*bias), T + "seg_embed": normal(L, 2, N, H)}
  for i in range(L):
    scope = f"{T}layer_{i}/"
    for name in "qkvro":
      weights[f"{scope}rel_attn/{name}/kernel"] = normal(D, N, H)
    for norm in ("rel_attn/LayerNorm", "ff/LayerNorm"):
      weights[f"{scope}{norm}/gamma"] = 1.0 + normal(D, scale=0.2)
      weights[f"{scope}{norm}/beta"] = normal(D, scale=0.2)
    weights[f"{scope}ff/layer_1/kernel"] = normal(D, F)
    weights[f"{scope}ff/layer_1/bias"] = normal(F)
    weights[f"{scope}ff/layer_2/kernel"] = normal(F, D)
    weights[f"{scope}ff/layer_2/bias"] = normal(D)
  return weights


def write_tf1_checkpoint(weights, prefix):
  graph = tf.Graph()
  with graph.as_default():
    variables = [tf.compat.v1.Variable(value, name=name) for name, value in weights.items()]
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, prefix, write_meta_graph=False)


def read_tf1_checkpoint(prefix, names_and_shapes):
  """Restores with a tf.compat.v1 Saver into graph variables, as the original code does."""
  graph = tf.Graph()
  with graph.as_default():
    variables = {name: tf.compat.v1.Variable(tf.zeros(shape), name=name)
                 for name, shape in names_and_shapes.items()}
    saver = tf.compat.v1.train.Saver(list(variables.values()))
    with tf.compat.v1.Session(graph=graph) as session:
      saver.restore(session, prefix)
      return {name: session.run(variable) for name, variable in variables.items()}


def huggingface_tensors(weights, config, prefix="transformer."):
  """HF XLNetLMHeadModel parameter names: per-layer biases, torch Linear [out, in]."""
  hf = {prefix + "word_embedding.weight": weights[T + "word_embedding/lookup_table"],
        prefix + "mask_emb": weights[T + "mask_emb/mask_emb"]}
  for i in range(config.n_layer):
    scope, layer = f"{T}layer_{i}/", f"{prefix}layer.{i}."
    for name in "qkvro":
      hf[f"{layer}rel_attn.{name}"] = weights[f"{scope}rel_attn/{name}/kernel"]
    for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
      value = weights[T + bias]
      hf[f"{layer}rel_attn.{bias}"] = value[i] if value.ndim == 3 else value
    hf[f"{layer}rel_attn.seg_embed"] = weights[T + "seg_embed"][i]
    hf[f"{layer}rel_attn.layer_norm.weight"] = weights[f"{scope}rel_attn/LayerNorm/gamma"]
    hf[f"{layer}rel_attn.layer_norm.bias"] = weights[f"{scope}rel_attn/LayerNorm/beta"]
    for dense in ("layer_1", "layer_2"):
      hf[f"{layer}ff.{dense}.weight"] = np.ascontiguousarray(weights[f"{scope}ff/{dense}/kernel"].T)
      hf[f"{layer}ff.{dense}.bias"] = weights[f"{scope}ff/{dense}/bias"]
    hf[f"{layer}ff.layer_norm.weight"] = weights[f"{scope}ff/LayerNorm/gamma"]
    hf[f"{layer}ff.layer_norm.bias"] = weights[f"{scope}ff/LayerNorm/beta"]
  return hf


def write_huggingface_directory(directory, tensors, config):
  from safetensors.numpy import save_file
  os.makedirs(directory, exist_ok=True)
  save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
            os.path.join(directory, "model.safetensors"))
  hf_config = {"model_type": "xlnet", "vocab_size": config.n_token, "d_model": config.d_model,
               "n_layer": config.n_layer, "n_head": config.n_head, "d_inner": config.d_inner,
               "ff_activation": "gelu", "untie_r": True, "attn_type": "bi",
               "initializer_range": 0.02, "layer_norm_eps": 1e-12, "dropout": 0.1,
               "mem_len": None, "reuse_len": None, "bi_data": False, "clamp_len": -1,
               "same_length": False}
  with open(os.path.join(directory, "config.json"), "w") as handle:
    json.dump(hf_config, handle)
