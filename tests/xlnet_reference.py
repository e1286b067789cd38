"""An independent float64 NumPy implementation of the original XLNet forward pass.

Written from the paper and the definitions in zihangdai/xlnet `modeling.py` (time-major there,
batch loops here), NOT from xlnet_tf's layers: relative distances are computed explicitly
instead of by rel-shift, the causal mask is built with the original's band-matrix recipe, and
the query stream is evaluated at every position and mapped through target_mapping as the
original does. Weights are a dict keyed by the original TF1 variable names.
"""

import math

import numpy as np

PREFIX = "model/transformer/"


def gelu_tanh(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
  from math import erf
  return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


ACTIVATIONS = {"gelu": gelu_tanh, "gelu_exact": gelu_erf, "relu": lambda x: np.maximum(x, 0)}


def layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def softmax(x, axis=-1):
  shifted = x - x.max(axis=axis, keepdims=True)
  e = np.exp(shifted)
  return e / e.sum(axis=axis, keepdims=True)


def causal_mask_original(qlen, mlen, same_length):
  """The original `_create_mask`: 1 = blocked, [qlen, mlen + qlen]."""
  ones = np.ones([qlen, qlen])
  mask_u = np.triu(ones)          # band_part(0, -1)
  mask_dia = np.diag(np.diag(ones))  # band_part(0, 0)
  ret = np.concatenate([np.zeros([qlen, mlen]), mask_u - mask_dia], 1)
  if same_length:
    mask_l = np.tril(ones)        # band_part(-1, 0)
    ret = np.concatenate([ret[:, :qlen] + mask_l - mask_dia, ret[:, qlen:]], 1)
  return ret


def sinusoid(distance, d_model):
  inv_freq = 1.0 / (10000.0 ** (np.arange(0, d_model, 2.0) / d_model))
  angle = distance * inv_freq
  return np.concatenate([np.sin(angle), np.cos(angle)])


def xlnet_forward(weights, cfg, input_ids, segment_ids=None, input_mask=None, perm_mask=None,
                  target_mapping=None, mems=None):
  """Returns dict(sequence_output, query_output or None, new_mems or None), float64.

  cfg: an object with the XLNetConfig fields. input_mask: 1 = real token (the public
  convention); it is turned into the original's 1 = padding here.
  """
  w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
  ids = np.asarray(input_ids)
  batch, qlen = ids.shape
  d_model, d_head = cfg.d_model, cfg.d_head
  mlen = 0 if mems is None else np.asarray(mems[0]).shape[1]
  klen = mlen + qlen
  scale = 1.0 / math.sqrt(d_head)
  activation = ACTIVATIONS[cfg.ff_activation]

  # ---- masks, exactly as the original combines them (1 = blocked) ----
  attn_mask = None
  if cfg.attn_type == "uni":
    attn_mask = np.broadcast_to(causal_mask_original(qlen, mlen, cfg.same_length)[None],
                                [batch, qlen, klen]).copy()
  data_mask = None
  if input_mask is not None:
    data_mask = np.broadcast_to((1.0 - np.asarray(input_mask, np.float64))[:, None, :],
                                [batch, qlen, qlen]).copy()
  if perm_mask is not None:
    pm = np.asarray(perm_mask, np.float64)
    data_mask = pm if data_mask is None else data_mask + pm
  if data_mask is not None:
    data_mask = np.concatenate([np.zeros([batch, qlen, mlen]), data_mask], 2)
    attn_mask = data_mask if attn_mask is None else attn_mask + data_mask
  if attn_mask is not None:
    attn_mask = (attn_mask > 0).astype(np.float64)
    non_tgt = np.concatenate([np.zeros([qlen, mlen]), -np.eye(qlen)], 1)
    non_tgt_mask = ((attn_mask + non_tgt[None]) > 0).astype(np.float64)
  else:
    non_tgt_mask = None

  # ---- relative position vectors per (example, query, key) ----
  pos_encoding = getattr(cfg, "pos_encoding", "relative")
  relative = np.zeros([batch, qlen, klen, d_model])
  for b in range(batch):
    for i in range(qlen):
      for j in range(klen):
        distance = (mlen + i) - j
        if cfg.bi_data and b >= batch // 2:
          distance = -distance
        if cfg.clamp_len > 0:
          distance = max(-cfg.clamp_len, min(cfg.clamp_len, distance))
        relative[b, i, j] = sinusoid(float(distance), d_model)

  # ---- segment "different or not", memory as segment 0 ----
  mismatch = None
  if segment_ids is not None:
    seg = np.asarray(segment_ids)
    key_seg = np.concatenate([np.zeros([batch, mlen], seg.dtype), seg], 1)
    mismatch = (seg[:, :, None] != key_seg[:, None, :]).astype(np.int64)

  def bias(name, layer):
    value = w[PREFIX + name]
    return value[layer] if value.ndim == 3 else value

  def attention(layer, query_heads, kv_input, mask, b, pos_rows):
    """query_heads [Q, N, H] at content positions pos_rows; returns [Q, N, H]."""
    base = f"{PREFIX}layer_{layer}/rel_attn/"
    keys = np.einsum("kd,dnh->knh", kv_input, w[base + "k/kernel"])
    values = np.einsum("kd,dnh->knh", kv_input, w[base + "v/kernel"])
    r_w, r_r = bias("r_w_bias", layer), bias("r_r_bias", layer)
    if pos_encoding != "relative":  # Transformer-XL's ablations: no global bias terms
      r_w, r_r = np.zeros_like(r_w), np.zeros_like(r_r)
    out = np.zeros_like(query_heads)
    for row, i in enumerate(pos_rows):
      rel_keys = np.einsum("kd,dnh->knh", relative[b, i], w[base + "r/kernel"])
      if pos_encoding == "shaw":  # a learned key per clipped distance, shared by the heads
        table = w[PREFIX + "relative_key_embedding"][layer]
        rel_keys = np.stack([np.broadcast_to(table[min(mlen + i - j, cfg.clamp_len)],
                                             rel_keys.shape[1:]) if mlen + i >= j else
                             np.zeros(rel_keys.shape[1:]) for j in range(klen)])
      elif pos_encoding != "relative":  # absolute: positions are in the input only
        rel_keys = np.zeros_like(rel_keys)
      q = query_heads[row]
      score = (np.einsum("nh,knh->nk", q + r_w, keys)
               + np.einsum("nh,knh->nk", q + r_r, rel_keys))
      if mismatch is not None:
        seg_embed = w[PREFIX + "seg_embed"][layer]  # [2, N, H]
        r_s = bias("r_s_bias", layer)
        seg_term = np.einsum("nh,snh->ns", q + r_s, seg_embed)  # [N, 2]
        score = score + seg_term[:, mismatch[b, i]]
      score = score * scale
      if mask is not None:
        score = score - 1e30 * mask[b, i][None, :]
      prob = softmax(score, -1)
      out[row] = np.einsum("nk,knh->nh", prob, values)
    return out

  def post_attention(layer, stream, attended):
    base = f"{PREFIX}layer_{layer}/rel_attn/"
    projected = np.einsum("qnh,dnh->qd", attended, w[base + "o/kernel"])
    return layer_norm(projected + stream, w[base + "LayerNorm/gamma"], w[base + "LayerNorm/beta"])

  def feed_forward(layer, x):
    base = f"{PREFIX}layer_{layer}/ff/"
    inner = activation(x @ w[base + "layer_1/kernel"] + w[base + "layer_1/bias"])
    out = inner @ w[base + "layer_2/kernel"] + w[base + "layer_2/bias"]
    return layer_norm(out + x, w[base + "LayerNorm/gamma"], w[base + "LayerNorm/beta"])

  embedding = w[PREFIX + "word_embedding/lookup_table"]
  h = embedding[ids]  # [B, T, D]
  if pos_encoding == "absolute_sinusoid":  # Vaswani et al.'s scale of the word embeddings
    h = h * np.sqrt(d_model)
  if pos_encoding.startswith("absolute"):  # positions within this segment, 0..T-1
    for p in range(qlen):
      position = min(p, cfg.clamp_len) if cfg.clamp_len > 0 else p
      h[:, p] += (w[PREFIX + "position_embedding"][position] if pos_encoding.endswith("learned")
                  else sinusoid(float(position), d_model))
  g = None
  tm = None
  if target_mapping is not None:
    tm = np.asarray(target_mapping, np.float64)
    g = np.broadcast_to(w[PREFIX + "mask_emb/mask_emb"].reshape(1, 1, d_model),
                        [batch, tm.shape[1], d_model]).copy()
  mem_arrays = None if mems is None else [np.asarray(m, np.float64) for m in mems]
  new_mems = [] if cfg.mem_len > 0 else None

  for layer in range(cfg.n_layer):
    if new_mems is not None:
      current = h[:, :cfg.reuse_len] if cfg.reuse_len > 0 else h
      if mem_arrays is not None:
        current = np.concatenate([mem_arrays[layer], current], 1)
      new_mems.append(current[:, -cfg.mem_len:])
    base = f"{PREFIX}layer_{layer}/rel_attn/"
    new_h = np.zeros_like(h)
    new_g = None if g is None else np.zeros_like(g)
    for b in range(batch):
      kv_input = h[b] if mem_arrays is None else np.concatenate([mem_arrays[layer][b], h[b]], 0)
      q_h = np.einsum("td,dnh->tnh", h[b], w[base + "q/kernel"])
      attended = attention(layer, q_h, kv_input, non_tgt_mask, b, range(qlen))
      new_h[b] = feed_forward(layer, post_attention(layer, h[b], attended))
      if g is not None:
        q_g = np.einsum("pd,dnh->pnh", g[b], w[base + "q/kernel"])
        # The original scatters query heads to positions, attends there, and maps back.
        q_at_positions = np.einsum("pnh,pt->tnh", q_g, tm[b])
        attended_all = attention(layer, q_at_positions, kv_input, attn_mask, b, range(qlen))
        attended_g = np.einsum("tnh,pt->pnh", attended_all, tm[b])
        new_g[b] = feed_forward(layer, post_attention(layer, g[b], attended_g))
    h, g = new_h, new_g
  return {"sequence_output": h, "query_output": g, "new_mems": new_mems}


def keras_path_to_original(path: str) -> str:
  """'transformer/layer_0/rel_attn/q' -> 'model/transformer/layer_0/rel_attn/q/kernel' etc."""
  special = {"transformer/word_embedding": "word_embedding/lookup_table",
             "transformer/mask_emb": "mask_emb/mask_emb"}
  if path in special:
    return PREFIX + special[path]
  name = path[len("transformer/"):]
  if name.split("/")[-1] in ("q", "k", "v", "r", "o"):
    name += "/kernel"
  return PREFIX + name


def model_weights_by_original_name(model):
  return {keras_path_to_original(v.path): v.numpy() for v in model.weights}


def randomize_weights(model, seed, scale=0.3):
  """Gives every weight a random value large enough that every term of the score matters."""
  rng = np.random.default_rng(seed)
  for variable in model.weights:
    shape = tuple(variable.shape)
    if variable.path.endswith("gamma"):
      value = 1.0 + 0.2 * rng.standard_normal(shape)
    elif variable.path.endswith("word_embedding") or variable.path.endswith("mask_emb"):
      value = rng.standard_normal(shape)
    else:
      value = scale * rng.standard_normal(shape)
    variable.assign(value.astype(np.float32))
