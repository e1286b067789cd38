"""Checkpoint files written the way their own tools write them, for the loader tests.

Shapes follow the original modeling.py; the TF1 file is written by a tf.compat.v1 Saver in a
graph, the Hugging Face files by the `safetensors` package with HF's parameter names, as
torch.save's zip + pickle (built opcode by opcode, no torch) and as Keras 2's HDF5 layout of
HF's TF models (with h5py); a hub repository as huggingface_hub's cache holds it.
"""

import json
import os
import shutil
import struct
from typing import NamedTuple
import zipfile

import numpy as np
import tensorflow as tf

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for
from xlnet_reference import xlnet_forward
from xlnet_tf.checkpoints import conversion
from xlnet_tf.heads import registry
from xlnet_tf.modeling.backbone import XLNetModel

T = "model/transformer/"
HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"
LENGTH = 8


def convert_checkpoint(*arguments, **keywords):
  """checkpoints.conversion.convert_checkpoint with the model classes run/convert_checkpoint.py
  hands it."""
  return conversion.convert_checkpoint(*arguments, backbone_class=XLNetModel,
                                       load_saved=registry.load_saved, **keywords)


def reference_inputs(rng, config):
  """Batch 3, left padding, three segment ids, a factorization order with 3 targets."""
  inputs = padded_pair_batch(rng, 3, LENGTH, config.n_token, pad_lengths=[0, 2, 1])
  perm_mask, targets, _ = factorization_perm_mask(rng, 3, LENGTH, num_targets=3)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, LENGTH))
  return inputs


def assert_matches_reference(model, weights, config, rng):
  """Both streams of `model` equal the float64 NumPy reference run on the original weights."""
  inputs = reference_inputs(rng, config)
  ours = model(inputs)
  reference = xlnet_forward(weights, config, **inputs)
  for key in ("sequence_output", "query_output"):
    np.testing.assert_allclose(ours[key].numpy(), reference[key], atol=1e-5, rtol=0)


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
  write_huggingface_config(directory, config)
  save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
            os.path.join(directory, "model.safetensors"))


def write_huggingface_config(directory, config):
  """config.json as transformers writes it for an XLNet model of `config` (transformers names
  the tanh gelu "gelu_new", its "gelu" is the erf form)."""
  os.makedirs(directory, exist_ok=True)
  activation = {"gelu": "gelu_new", "gelu_exact": "gelu"}.get(config.ff_activation,
                                                               config.ff_activation)
  hf_config = {"model_type": "xlnet", "vocab_size": config.n_token, "d_model": config.d_model,
               "n_layer": config.n_layer, "n_head": config.n_head, "d_inner": config.d_inner,
               "ff_activation": activation, "untie_r": True, "attn_type": "bi",
               "initializer_range": 0.02, "layer_norm_eps": 1e-12, "dropout": 0.1,
               "mem_len": None, "reuse_len": None, "bi_data": False, "clamp_len": -1,
               "same_length": False}
  with open(os.path.join(directory, "config.json"), "w") as handle:
    json.dump(hf_config, handle)


# ---- pytorch_model.bin, written as torch.save writes it (no torch needed) ----

class Global(NamedTuple):
  """A pickled reference to module.name (the GLOBAL opcode; STACK_GLOBAL with stack=True)."""
  module: str
  name: str
  stack: bool = False


class Call(NamedTuple):
  """function(*args) on unpickling (REDUCE)."""
  function: object
  args: tuple


class Instance(NamedTuple):
  """module.name(*args) through the protocol-0 INST opcode."""
  module: str
  name: str
  args: tuple


class PersistentId(NamedTuple):
  """An object the unpickler's persistent_load resolves (BINPERSID)."""
  pid: tuple


class WithItems(NamedTuple):
  """mapping, then SETITEMS with items (how pickle fills an OrderedDict)."""
  mapping: object
  items: dict


class WithState(NamedTuple):
  """value, then BUILD with state (how an OrderedDict's `_metadata` attribute is pickled)."""
  value: object
  state: object


def _emit(value, out):
  if isinstance(value, Global):
    if value.stack:
      _emit(value.module, out)
      _emit(value.name, out)
      out += b"\x93"  # STACK_GLOBAL
    else:
      out += b"c" + f"{value.module}\n{value.name}\n".encode()
  elif isinstance(value, Call):
    _emit(value.function, out)
    _emit(value.args, out)
    out += b"R"
  elif isinstance(value, Instance):
    out += b"("
    for item in value.args:
      _emit(item, out)
    out += b"i" + f"{value.module}\n{value.name}\n".encode()
  elif isinstance(value, PersistentId):
    _emit(value.pid, out)
    out += b"Q"
  elif isinstance(value, WithItems):
    _emit(value.mapping, out)
    _emit_setitems(value.items, out)
  elif isinstance(value, WithState):
    _emit(value.value, out)
    _emit(value.state, out)
    out += b"b"
  elif isinstance(value, bool):
    out += b"\x88" if value else b"\x89"
  elif isinstance(value, int):
    out += b"J" + struct.pack("<i", value)
  elif isinstance(value, str):
    out += b"X" + struct.pack("<I", len(value.encode())) + value.encode()
  elif value is None:
    out += b"N"
  elif isinstance(value, tuple):
    out += b"("
    for item in value:
      _emit(item, out)
    out += b"t"
  elif isinstance(value, dict):
    out += b"}"
    _emit_setitems(value, out)
  else:
    raise TypeError(type(value))


def _emit_setitems(items, out):
  out += b"("
  for key, item in items.items():
    _emit(key, out)
    _emit(item, out)
  out += b"u"


def pickle_bytes(value, protocol=2):
  """The opcodes of `value` built from the types above (torch.save uses protocol 2)."""
  out = bytearray(b"\x80" + bytes([protocol]))
  _emit(value, out)
  return bytes(out + b".")


STORAGE_TYPES = {"float32": ("FloatStorage", "<f4"), "float16": ("HalfStorage", "<f2"),
                 "bfloat16": ("BFloat16Storage", None)}


def _storage_bytes(values, dtype):
  if dtype == "bfloat16":
    import ml_dtypes
    return values.astype(ml_dtypes.bfloat16).tobytes()
  return values.astype(STORAGE_TYPES[dtype][1]).tobytes()


def torch_state_dict(tensors, dtype="float32"):
  """(pickle object, {storage key: bytes}) laid out as torch lays out a model's state dict.

  Identical tensors share one storage (tied weights); 2-D `ff` weights are transposed views of
  a [in, out] storage (stride [1, out]); all 1-D tensors live in one storage at offsets.
  """
  storage_type = Global("torch", STORAGE_TYPES[dtype][0])
  storages, entries, keys_of = {}, {}, []
  flat = [value for value in tensors.values() if value.ndim == 1]
  flat_key, flat_offsets = "flat", {}
  offset = 0
  for name, value in tensors.items():
    if value.ndim == 1:
      flat_offsets[name] = offset
      offset += value.size
  if flat:
    storages[flat_key] = _storage_bytes(np.concatenate(flat), dtype)

  def rebuild(key, numel, storage_offset, size, stride):
    storage = PersistentId(("storage", storage_type, key, "cpu", numel))
    return Call(Global("torch._utils", "_rebuild_tensor_v2"),
                (storage, storage_offset, tuple(size), tuple(stride), False,
                 Call(Global("collections", "OrderedDict"), ())))

  for name, value in tensors.items():
    if value.ndim == 1:
      entries[name] = rebuild(flat_key, offset, flat_offsets[name], value.shape, (1,))
      continue
    shared = next((key for key, earlier in keys_of if earlier.shape == value.shape
                   and np.array_equal(earlier, value)), None)
    transposed = value.ndim == 2 and ".ff." in name
    if shared is None:
      shared = str(len(storages))
      storages[shared] = _storage_bytes(value.T if transposed else value, dtype)
      keys_of.append((shared, value))
    stride = [int(np.prod(value.shape[i + 1:])) for i in range(value.ndim)]
    if transposed:
      stride = [1, value.shape[0]]
    entries[name] = rebuild(shared, value.size, 0, value.shape, stride)
  return entries, storages


def write_pytorch_bin(path, tensors, dtype="float32", folder="archive", ordered=False,
                      pickled=None):
  """A torch.save zip: <folder>/data.pkl, <folder>/data/<key>, version and byteorder records.

  ordered: an OrderedDict with `_metadata`, as older transformers saved the state dict.
  pickled: data.pkl's object instead of the state dict (to test what is refused).
  """
  entries, storages = torch_state_dict(tensors, dtype)
  if pickled is None:
    pickled = entries
    if ordered:
      pickled = WithState(WithItems(Call(Global("collections", "OrderedDict"), ()), entries),
                          {"_metadata": {"": {"version": 1}}})
  with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
    archive.writestr(f"{folder}/data.pkl", pickle_bytes(pickled))
    archive.writestr(f"{folder}/byteorder", "little")
    for key, raw in storages.items():
      archive.writestr(f"{folder}/data/{key}", raw)
    archive.writestr(f"{folder}/version", "3\n")
  return path


# ---- tf_model.h5, written as Keras 2 save_weights writes Hugging Face's TF models ----

def huggingface_tf_weights(weights, config):
  """{HF TF name without the model's name: array}: Dense kernels [in, out], per-layer biases."""
  tf_weights = {"transformer/word_embedding/weight:0": weights[T + "word_embedding/lookup_table"],
                "transformer/mask_emb:0": weights[T + "mask_emb/mask_emb"]}
  for i in range(config.n_layer):
    scope, layer = f"{T}layer_{i}/", f"transformer/layer_._{i}/"
    for name in "qkvro":
      tf_weights[f"{layer}rel_attn/{name}:0"] = weights[f"{scope}rel_attn/{name}/kernel"]
    for bias in ("r_r_bias", "r_s_bias", "r_w_bias"):
      value = weights[T + bias]
      tf_weights[f"{layer}rel_attn/{bias}:0"] = value[i] if value.ndim == 3 else value
    tf_weights[f"{layer}rel_attn/seg_embed:0"] = weights[T + "seg_embed"][i]
    for norm, original in (("rel_attn/layer_norm", "rel_attn/LayerNorm"),
                           ("ff/layer_norm", "ff/LayerNorm")):
      tf_weights[f"{layer}{norm}/gamma:0"] = weights[f"{scope}{original}/gamma"]
      tf_weights[f"{layer}{norm}/beta:0"] = weights[f"{scope}{original}/beta"]
    for dense in ("layer_1", "layer_2"):
      tf_weights[f"{layer}ff/{dense}/kernel:0"] = weights[f"{scope}ff/{dense}/kernel"]
      tf_weights[f"{layer}ff/{dense}/bias:0"] = weights[f"{scope}ff/{dense}/bias"]
  return tf_weights


def write_keras_h5(path, tf_weights, model_name="tfxl_net_lm_head_model", dtype=np.float32,
                   shared_with_lm_loss=True, names_as="str", attribute_chunks=1):
  """Keras 2 `save_weights(h5)` layout: a group per top-level layer (`transformer`, `lm_loss`,
  heads), its `weight_names` attribute listing full names, each a dataset at that path.

  shared_with_lm_loss: `lm_loss` also lists the word embedding it is tied to, as HF's
  TFXLNetLMHeadModel does (its layer tracks the embedding layer).
  names_as: "str" (variable-length strings, as tf_keras 2.21 writes them) or "bytes" (fixed
  length, older Keras).
  attribute_chunks: split each names attribute into name0, name1, ... as Keras does past 64 KB.
  """
  import h5py
  groups = {}
  for name, value in tf_weights.items():
    groups.setdefault(name.split("/")[0], {})[f"{model_name}/{name}"] = value
  if shared_with_lm_loss and "lm_loss" in groups:
    embedding = "transformer/word_embedding/weight:0"
    groups["lm_loss"][f"{model_name}/{embedding}"] = tf_weights[embedding]

  def set_names(node, attribute, names):
    names = (np.array(names, dtype=h5py.string_dtype()) if names_as == "str"
             else np.array([name.encode() for name in names]))
    if attribute_chunks == 1:
      node.attrs[attribute] = names
    else:
      for chunk, part in enumerate(np.array_split(names, attribute_chunks)):
        node.attrs[f"{attribute}{chunk}"] = part

  with h5py.File(path, "w") as handle:
    set_names(handle, "layer_names", list(groups))
    handle.attrs["backend"] = "tensorflow"
    handle.attrs["keras_version"] = "2.21.0"
    for layer_name, layer_weights in groups.items():
      group = handle.create_group(layer_name)
      set_names(group, "weight_names", list(layer_weights))
      for name, value in layer_weights.items():
        group.create_dataset(name, data=np.asarray(value, dtype))
  return path


def write_tf_shard_h5(path, tf_weights):
  """One shard of HF's sharded TF save: datasets at the shortened names, listed in the root's
  `layer_names` (no per-layer groups)."""
  import h5py
  with h5py.File(path, "w") as handle:
    for name, value in tf_weights.items():
      handle.create_dataset(name, data=value)
    handle.attrs["layer_names"] = np.array([name.encode() for name in tf_weights])
  return path


def write_sharded(directory, file_name, tensors, write_shard, num_shards=2):
  """`{stem}-0000k-of-0000n{suffix}` shards and `{file_name}.index.json`, as HF shards a save."""
  stem, suffix = os.path.splitext(file_name)
  names = list(tensors)
  weight_map = {}
  for shard in range(num_shards):
    shard_name = f"{stem}-{shard + 1:05d}-of-{num_shards:05d}{suffix}"
    part = {name: tensors[name] for name in names[shard::num_shards]}
    write_shard(os.path.join(directory, shard_name), part)
    weight_map.update({name: shard_name for name in part})
  with open(os.path.join(directory, file_name + ".index.json"), "w") as handle:
    json.dump({"metadata": {}, "weight_map": weight_map}, handle)


def write_hub_cache(cache, repo_id, files):
  """The cache as huggingface_hub lays it out: blobs named by their hash, the revision's
  snapshot linking to them, refs/main naming the revision."""
  repository = cache / ("models--" + repo_id.replace("/", "--"))
  snapshot = repository / "snapshots" / HUB_COMMIT
  (repository / "blobs").mkdir(parents=True)
  snapshot.mkdir(parents=True)
  for index, path in enumerate(files):
    blob = repository / "blobs" / f"{index:040x}"
    shutil.copyfile(path, blob)
    os.symlink(os.path.relpath(blob, snapshot), snapshot / os.path.basename(path))
  (repository / "refs").mkdir()
  (repository / "refs" / "main").write_text(HUB_COMMIT)
