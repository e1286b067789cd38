"""pytorch_model.bin and tf_model.h5, read without torch or TF's Keras, reproduce the reference.

The files are written as torch.save and Keras 2 write them (tests/checkpoints/
checkpoint_files.py: the pickle opcode by opcode, the HDF5 groups with h5py); with torch
importable, a file torch itself wrote is read too.
"""

import os
import pickle
import shutil

import numpy as np
import pytest

from checkpoint_files import (Call, Global, Instance, PersistentId, assert_matches_reference,
                              convert_checkpoint,
                              huggingface_tensors, huggingface_tf_weights, original_weights,
                              pickle_bytes, write_huggingface_config, write_huggingface_directory,
                              write_keras_h5, write_pytorch_bin, write_sharded, write_tf_shard_h5)
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import XLNetModel, checkpoints
from xlnet_tf.checkpoints.naming import original_variable_map
from xlnet_tf.checkpoints.pytorch_bin_io import UnsafeCheckpointError, read_pytorch_bin
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering


def rounded_weights(config, dtype, seed):
  """Original-name weights exactly representable in `dtype` (the file's storage type)."""
  weights = original_weights(config, seed=seed)
  if dtype == "bfloat16":
    import ml_dtypes
    dtype = ml_dtypes.bfloat16
  return {name: value.astype(dtype).astype(np.float32) for name, value in weights.items()}


def write_directory(directory, weights, config, file_format, dtype="float32", **writer_options):
  """A Hugging Face directory holding config.json and one weights file of `file_format`."""
  tensors = huggingface_tensors(weights, config)
  tensors["lm_loss.bias"] = np.linspace(-1, 1, config.n_token, dtype=np.float32)
  write_huggingface_config(str(directory), config)
  if file_format == "bin":
    tensors["lm_loss.weight"] = tensors["transformer.word_embedding.weight"]  # tied, shared
    return write_pytorch_bin(os.path.join(directory, "pytorch_model.bin"), tensors, dtype,
                             **writer_options)
  tf_weights = huggingface_tf_weights(weights, config)
  tf_weights["lm_loss/bias:0"] = tensors["lm_loss.bias"]
  return write_keras_h5(os.path.join(directory, "tf_model.h5"), tf_weights,
                        dtype=np.float16 if dtype == "float16" else np.float32, **writer_options)


@pytest.mark.parametrize("dtype,folder,ordered", [("float32", "archive", False),
                                                  ("float16", "pytorch_model", True),
                                                  ("bfloat16", "archive", True)])
def test_pytorch_bin_loads_and_reproduces_reference(tmp_path, rng, dtype, folder, ordered):
  config = tiny_config()
  weights = rounded_weights(config, dtype, seed=5)
  path = write_directory(tmp_path, weights, config, "bin", dtype, folder=folder,
                         ordered=ordered)
  model = XLNetModel(config)
  report = checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert report.source == path
  assert set(report.skipped) == {"lm_loss.weight", "model/lm_loss/bias"}
  assert_matches_reference(model, weights, config, rng)


@pytest.mark.parametrize("dtype,names_as,attribute_chunks", [("float32", "str", 1),
                                                              ("float16", "bytes", 2)])
def test_tf_model_h5_loads_and_reproduces_reference(tmp_path, rng, dtype, names_as,
                                                    attribute_chunks):
  config = tiny_config()
  weights = rounded_weights(config, dtype, seed=6)
  path = write_directory(tmp_path, weights, config, "h5", dtype, names_as=names_as,
                         attribute_chunks=attribute_chunks)
  model = XLNetModel(config)
  report = checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert report.source == path
  assert set(report.skipped) == {"model/lm_loss/bias"}
  assert_matches_reference(model, weights, config, rng)


@pytest.mark.parametrize("file_name", ["pytorch_model.bin", "tf_model.h5"])
def test_sharded_directory_loads(tmp_path, rng, file_name):
  config = tiny_config()
  weights = original_weights(config, seed=11)
  write_huggingface_config(str(tmp_path), config)
  if file_name == "pytorch_model.bin":
    write_sharded(str(tmp_path), file_name, huggingface_tensors(weights, config),
                  write_pytorch_bin)
  else:
    write_sharded(str(tmp_path), file_name, huggingface_tf_weights(weights, config),
                  write_tf_shard_h5)
  model = XLNetModel(config)
  report = checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert report.source == str(tmp_path / f"{file_name}.index.json")
  assert_matches_reference(model, weights, config, rng)


def test_safetensors_with_tf_names_loads(tmp_path, rng):
  """What HF's TF models write with save_pretrained(safe_serialization=True)."""
  config = tiny_config()
  weights = original_weights(config, seed=12)
  write_huggingface_directory(str(tmp_path), huggingface_tf_weights(weights, config), config)
  model = XLNetModel(config)
  checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert_matches_reference(model, weights, config, rng)


def test_untied_attention_biases_into_tied_model_from_h5(tmp_path, rng):
  config = tiny_config(untie_r=False)
  weights = original_weights(config, seed=7)  # tied: every layer holds the same bias
  write_directory(tmp_path, weights, config, "h5", shared_with_lm_loss=False)
  model = XLNetModel(config)
  checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert_matches_reference(model, weights, config, rng)


def test_a_directory_is_read_in_the_order_safetensors_bin_h5(tmp_path):
  config = tiny_config()
  weights = {file_format: original_weights(config, seed=seed)
             for seed, file_format in enumerate(["safetensors", "bin", "h5"])}
  write_keras_h5(str(tmp_path / "tf_model.h5"), huggingface_tf_weights(weights["h5"], config))
  write_pytorch_bin(str(tmp_path / "pytorch_model.bin"),
                    huggingface_tensors(weights["bin"], config))
  write_huggingface_directory(str(tmp_path), huggingface_tensors(weights["safetensors"], config),
                              config)
  for file_format, file_name in [("safetensors", "model.safetensors"),
                                 ("bin", "pytorch_model.bin"), ("h5", "tf_model.h5")]:
    model = XLNetModel(config)
    report = checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
    assert report.source == str(tmp_path / file_name)
    np.testing.assert_array_equal(model.seg_embed.numpy(),
                                  weights[file_format]["model/transformer/seg_embed"])
    os.remove(report.source)


def test_convert_reads_pytorch_bin_and_tf_model_h5(tmp_path, rng):
  config = tiny_config()
  for file_format in ["bin", "h5"]:
    weights = original_weights(config, seed=8)
    write_directory(tmp_path / file_format, weights, config, file_format)
    report = convert_checkpoint(str(tmp_path / file_format), "huggingface",
                                str(tmp_path / f"own_{file_format}"), "own")
    assert ("pytorch_model.bin" if file_format == "bin" else "tf_model.h5") in report
    model = XLNetModel.from_pretrained(str(tmp_path / f"own_{file_format}"), dropout=0.0,
                                        dropatt=0.0)
    assert_matches_reference(model, weights, config, rng)


def _head_tensors(rng, names_and_shapes):
  return {name: (0.3 * rng.standard_normal(shape)).astype(np.float32)
          for name, shape in names_and_shapes.items()}


@pytest.mark.parametrize("file_format", ["bin", "h5"])
def test_classifier_head_weights_land_on_their_variables(tmp_path, rng, file_format):
  config = tiny_config()
  weights = original_weights(config, seed=9)
  kernels = _head_tensors(rng, {"summary": [32, 32], "logits": [32, 3]})  # Keras [in, out]
  biases = _head_tensors(rng, {"summary": [32], "logits": [3]})
  if file_format == "bin":
    tensors = huggingface_tensors(weights, config)
    tensors.update({"sequence_summary.summary.weight": kernels["summary"].T,
                    "sequence_summary.summary.bias": biases["summary"],
                    "logits_proj.weight": kernels["logits"].T,
                    "logits_proj.bias": biases["logits"]})
    write_huggingface_config(str(tmp_path), config)
    write_pytorch_bin(str(tmp_path / "pytorch_model.bin"), tensors)
  else:
    tf_weights = huggingface_tf_weights(weights, config)
    tf_weights.update({"sequence_summary/summary/kernel:0": kernels["summary"],
                       "sequence_summary/summary/bias:0": biases["summary"],
                       "logits_proj/kernel:0": kernels["logits"],
                       "logits_proj/bias:0": biases["logits"]})
    write_huggingface_config(str(tmp_path), config)
    write_keras_h5(str(tmp_path / "tf_model.h5"), tf_weights,
                   model_name="tfxl_net_for_sequence_classification")
  model = XLNetClassifier(XLNetModel(config), 3, task_name="mnli")
  report = checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert not report.skipped
  expected = dict(weights, **{
      "model/sequnece_summary/summary/kernel": kernels["summary"],
      "model/sequnece_summary/summary/bias": biases["summary"],
      "model/classification_mnli/logit/kernel": kernels["logits"],
      "model/classification_mnli/logit/bias": biases["logits"]})
  variables = original_variable_map(model)
  assert set(variables) == set(expected)
  for name, variable in variables.items():
    np.testing.assert_array_equal(variable.numpy(), expected[name], err_msg=name)
  inputs = padded_pair_batch(rng, 2, 8, config.n_token, pad_lengths=[0, 3])
  assert np.isfinite(model(inputs).numpy()).all()


def test_question_answering_head_from_pytorch_bin(tmp_path, rng):
  config = tiny_config()
  weights = original_weights(config, seed=10)
  model = XLNetQuestionAnswering(XLNetModel(config), start_n_top=3, end_n_top=2)
  head_variables = model.original_head_variables()
  expected = _head_tensors(rng, {name: variable.shape
                                 for name, variable in head_variables.items()})
  tensors = huggingface_tensors(weights, config)
  for hf_name, (original, transpose) in model.huggingface_head_names().items():
    tensors[hf_name] = expected[original].T if transpose else expected[original]
  write_huggingface_config(str(tmp_path), config)
  write_pytorch_bin(str(tmp_path / "pytorch_model.bin"), tensors)
  checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  for name, variable in head_variables.items():
    np.testing.assert_array_equal(variable.numpy(), expected[name], err_msg=name)
  np.testing.assert_array_equal(model.backbone.seg_embed.numpy(),
                                weights["model/transformer/seg_embed"])


# ---- strictness: what is missing, unexpected or misshaped is named; nothing is loaded ----

BIN_PROBLEMS = {
    "missing": ("transformer.layer.1.ff.layer_1.weight", None,
                r"missing: model/transformer/layer_1/ff/layer_1/kernel "
                r"\(transformer.layer.1.ff.layer_1.weight\)"),
    "unexpected": ("transformer.layer.0.rel_attn.qq", np.zeros([32, 4, 8], np.float32),
                   r"unexpected: transformer.layer.0.rel_attn.qq, shape \[32, 4, 8\]"),
    "misshaped": ("transformer.mask_emb", np.zeros([1, 32], np.float32),
                  r"misshaped: model/transformer/mask_emb/mask_emb \(transformer.mask_emb\): "
                  r"checkpoint \[1, 32\]"),
}
H5_PROBLEMS = {
    "missing": ("transformer/layer_._1/ff/layer_1/kernel:0", None,
                r"missing: model/transformer/layer_1/ff/layer_1/kernel "
                r"\(transformer.layer.1.ff.layer_1.weight\)"),
    "unexpected": ("transformer/layer_._0/rel_attn/qq:0", np.zeros([32, 4, 8], np.float32),
                   r"unexpected: transformer/layer_._0/rel_attn/qq:0, shape \[32, 4, 8\]"),
    "misshaped": ("transformer/layer_._0/ff/layer_2/kernel:0", np.zeros([48, 31], np.float32),
                  r"misshaped: model/transformer/layer_0/ff/layer_2/kernel "
                  r"\(transformer/layer_._0/ff/layer_2/kernel:0\): checkpoint \[48, 31\]"),
}


@pytest.mark.parametrize("file_format,problem", [(f, p) for f in ["bin", "h5"]
                                                 for p in sorted(BIN_PROBLEMS)])
def test_mismatch_names_the_weight_and_loads_nothing(tmp_path, file_format, problem):
  config = tiny_config()
  weights = original_weights(config)
  write_huggingface_config(str(tmp_path), config)
  if file_format == "bin":
    name, value, message = BIN_PROBLEMS[problem]
    tensors = huggingface_tensors(weights, config)
  else:
    name, value, message = H5_PROBLEMS[problem]
    tensors = huggingface_tf_weights(weights, config)
  if value is None:
    del tensors[name]
  else:
    tensors[name] = value
  if file_format == "bin":
    write_pytorch_bin(str(tmp_path / "pytorch_model.bin"), tensors)
  else:
    write_keras_h5(str(tmp_path / "tf_model.h5"), tensors)
  model = XLNetModel(config)
  before = [variable.numpy().copy() for variable in model.weights]
  with pytest.raises(checkpoints.CheckpointMismatchError, match=message):
    checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  for old, variable in zip(before, model.weights):
    np.testing.assert_array_equal(old, variable.numpy())


def test_h5_weight_stored_twice_with_different_values_is_refused(tmp_path):
  config = tiny_config()
  tf_weights = huggingface_tf_weights(original_weights(config), config)
  tf_weights["lm_loss/bias:0"] = np.zeros(config.n_token, np.float32)
  path = write_keras_h5(str(tmp_path / "tf_model.h5"), tf_weights)
  import h5py
  with h5py.File(path, "r+") as handle:
    handle["lm_loss/tfxl_net_lm_head_model/transformer/word_embedding/weight:0"][0, 0] += 1.0
  with pytest.raises(ValueError, match="word_embedding/weight:0 is stored under both "
                                       "transformer and lm_loss with different values"):
    checkpoints.load_huggingface_checkpoint(XLNetModel(config), path)


# ---- the pickle: only tensor storages; anything else is refused by name, never run ----

def _state_dict_then(payload):
  """A real state dict entry followed by `payload`, as data.pkl's object."""
  tensor = Call(Global("torch._utils", "_rebuild_tensor_v2"),
                (PersistentId(("storage", Global("torch", "FloatStorage"), "flat", "cpu", 4)),
                 0, (4,), (1,), False, Call(Global("collections", "OrderedDict"), ())))
  return {"transformer.mask_emb": tensor, "payload": payload}


PAYLOADS = {
    "os.system": lambda marker: Call(Global("os", "system"), (f"touch {marker}",)),
    "posix.system": lambda marker: Call(Global("posix", "system", stack=True),
                                        (f"touch {marker}",)),
    "builtins.exec": lambda marker: Call(Global("builtins", "exec"),
                                         (f"open({str(marker)!r}, 'w').close()",)),
    "subprocess.call": lambda marker: Instance("subprocess", "call", (("touch", str(marker)),)),
}


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_malicious_global_is_refused_by_name_without_running(tmp_path, payload):
  # The payload is real: the standard unpickler runs it.
  witness = tmp_path / "witness"
  pickle.loads(pickle_bytes(PAYLOADS[payload](witness), protocol=4))
  assert witness.exists()

  marker = tmp_path / "marker"
  path = str(tmp_path / "pytorch_model.bin")
  # torch's own payload position (a storage type) and a top-level entry are both refused.
  write_pytorch_bin(path, {"x": np.zeros(4, np.float32)},
                    pickled=_state_dict_then(PAYLOADS[payload](marker)))
  with pytest.raises(UnsafeCheckpointError, match=f"refused the pickled global {payload}"):
    read_pytorch_bin(path)
  assert not marker.exists()
  config = tiny_config()
  model = XLNetModel(config)
  before = model.word_embedding.numpy().copy()
  write_huggingface_config(str(tmp_path / "hf"), config)
  shutil.copy(path, tmp_path / "hf")
  with pytest.raises(UnsafeCheckpointError, match=payload):
    checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "hf"))
  assert not marker.exists()
  np.testing.assert_array_equal(model.word_embedding.numpy(), before)


@pytest.mark.parametrize("pickled,message", [
    (Call(Global("numpy.core.multiarray", "_reconstruct"), ()),
     "refused the pickled global numpy.core.multiarray._reconstruct"),
    (PersistentId(("module", "os")), r"refused the persistent id \('module', 'os'\)"),
    (PersistentId(("storage", Global("torch", "Tensor"), "flat", "cpu", 4)),
     "refused the pickled global torch.Tensor"),
    (Call(Global("torch._utils", "_rebuild_tensor_v2"),
          (PersistentId(("storage", Global("torch", "FloatStorage"), "flat", "cpu", 4)),
           2, (2, 2), (2, 1), False, Call(Global("collections", "OrderedDict"), ()))),
     "reads past its 4 elements"),
    (Call(Global("torch._utils", "_rebuild_tensor_v2"), ("0", 0, (4,), (1,), False, None)),
     "do not describe a tensor"),
])
def test_anything_but_tensor_storages_is_refused(tmp_path, pickled, message):
  path = str(tmp_path / "pytorch_model.bin")
  write_pytorch_bin(path, {"x": np.zeros(4, np.float32)}, pickled={"x": pickled})
  with pytest.raises(ValueError, match=message):
    read_pytorch_bin(path)


def test_legacy_pickle_file_is_refused_with_the_conversion(tmp_path):
  path = tmp_path / "pytorch_model.bin"
  path.write_bytes(pickle_bytes({"x": 1}))
  with pytest.raises(ValueError, match="(?s)not a zip archive.*safe_serialization=True"):
    read_pytorch_bin(str(path))


def test_file_written_by_torch_is_read(tmp_path):
  torch = pytest.importorskip("torch")
  state = {"plain": torch.randn(3, 4), "half": torch.randn(5).half(),
           "bfloat16": torch.randn(2, 3).bfloat16(), "transposed": torch.randn(4, 3).t(),
           "slice": torch.arange(10.0)[2:7]}
  state["tied"] = state["plain"]
  torch.save(state, str(tmp_path / "pytorch_model.bin"))
  read = read_pytorch_bin(str(tmp_path / "pytorch_model.bin"))
  assert set(read) == set(state)
  for name, tensor in state.items():
    np.testing.assert_array_equal(read[name], tensor.float().numpy(), err_msg=name)
