"""Int8 ONNX files (xlnet_tf.serving.onnx_quantization), as onnx_litert.export_file(...,
quantize="int8") places them (run/export.py --format=onnx --quantize=int8): the projections and
feed-forward layers quantized, the version's only model file, outputs within a stated tolerance
of the float file and of the TensorFlow model (batch 4, left padding, segments A / B / <cls>),
and a file failing its check never written, nor its version placed.

Needs the `[export]` extra (tf2onnx, onnxruntime): skipped without it.
"""

import os
import re
import shutil
import tempfile
import uuid

import numpy as np
import pytest
import tensorflow as tf

from model_inputs import padded_pair_batch
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.serving import onnx_litert, onnx_quantization, write_onnx
from xlnet_tf.serving.saved_model import ids_serving_function
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

pytest.importorskip("tf2onnx")
pytest.importorskip("onnxruntime")

CONFIG = XLNetConfig.preset("tiny", dropout=0.0, dropatt=0.0)
LENGTH = 16
SEP_ID = 4
# Weights N(0, 0.1^2): 5x the initializer's scale, so every product matters. The int8 file's
# relative error here is 5.5e-3 (the module docstring's table); this bound leaves 3x room.
WEIGHT_SCALE = 0.1


def _has_vnni() -> bool:
  with open("/proc/cpuinfo") as handle:
    flags = next((line for line in handle if line.startswith("flags")), "").split()
  return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(flags))


# ONNX Runtime's u8 x s8 kernels without VNNI (AVX2's vpmaddubsw) saturate the int16 sums of
# pairs of products: 3.8% on a 2-core AMD EPYC without AVX-512, against 1-1.5% with VNNI.
INT8_TOLERANCE = 1.5e-2 if _has_vnni() else 5e-2


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """(Keras backbone, float file, int8 file): the int8 file is the version's model.onnx as
  export_file(quantize="int8") placed it, checked against the float file on the export's own
  verification batch; the float file is a copy of the one the export wrote and checked first
  (the version does not keep it)."""
  directory = tmp_path_factory.mktemp("onnx_int8")
  model = XLNetModel(CONFIG)
  randomize_weights(model, seed=0, scale=WEIGHT_SCALE)
  float_path = str(directory / "float.onnx")

  def write_and_keep_a_copy(*arguments):
    shutil.copy(write_onnx(*arguments), float_path)
    return arguments[1]
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(onnx_litert.WRITERS, "onnx", write_and_keep_a_copy)
    int8_path, difference, error = onnx_litert.export_file(
        model, "onnx", str(directory / "serving" / "1"), LENGTH, SEP_ID, quantize="int8")
  assert int8_path == str(directory / "serving" / "1" / "model.onnx")
  assert difference < 1e-5 and 0 < error < INT8_TOLERANCE
  return model, float_path, int8_path


def test_the_projections_and_feed_forward_layers_hold_int8_weights(exported):
  _, float_path, int8_path = exported
  assert os.listdir(os.path.dirname(int8_path)) == ["model.onnx"]  # the int8 file alone
  counts = onnx_quantization.quantized_op_counts(int8_path)
  # q, k, v, o and the feed-forward's two layers, in each of the 2 layers; the attention
  # products (scores, weighted values, position and segment scores) stay float MatMuls.
  assert counts["MatMulInteger"] == 6 * CONFIG.n_layer
  assert counts["MatMul"] == 4 * CONFIG.n_layer and counts["Gemm"] == 0
  assert counts["DynamicQuantizeLinear"] > 0
  assert onnx_quantization.quantized_op_counts(float_path)["MatMulInteger"] == 0


def test_int8_outputs_are_near_the_float_file_and_the_tensorflow_model(exported, rng):
  model, float_path, int8_path = exported
  inputs = padded_pair_batch(rng, 4, LENGTH, CONFIG.n_token, pad_lengths=[0, 5, 2, 9])
  expected = {name: value.numpy() for name, value in ids_serving_function(model, SEP_ID)(
      *(tf.constant(inputs[name]) for name in ("input_ids", "segment_ids", "input_mask"))
  ).items()}
  floating = onnx_litert.run_onnx(float_path, inputs)
  quantized = onnx_litert.run_onnx(int8_path, inputs)
  assert sorted(quantized) == sorted(expected) == ["pooled_output", "sequence_output"]
  for name, value in expected.items():
    assert quantized[name].shape == value.shape, name
    np.testing.assert_allclose(floating[name], value, atol=1e-5, rtol=0, err_msg=name)
    assert 0 < onnx_quantization.relative_error(floating[name], quantized[name]) < INT8_TOLERANCE
    assert onnx_quantization.relative_error(value, quantized[name]) < INT8_TOLERANCE
  assert onnx_quantization.check_int8(float_path, int8_path, inputs) < INT8_TOLERANCE


def test_a_file_failing_its_check_is_not_written(exported, tmp_path):
  model, float_path, _ = exported
  (tmp_path / "serving").mkdir()
  target = tmp_path / "serving" / onnx_quantization.INT8_FILE_NAME
  target.write_bytes(b"an earlier file")
  with pytest.raises(RuntimeError, match="int8 ONNX check failed: outputs differ from the float "
                     r"file's by .* relative \(> 1e-09\)"):
    onnx_quantization.quantize_onnx_int8(
        float_path, str(target), check_inputs=onnx_litert.verification_inputs(model, LENGTH),
        tolerance=1e-9)
  assert os.listdir(tmp_path / "serving") == [target.name]
  assert target.read_bytes() == b"an earlier file"


def test_an_export_failing_its_int8_check_places_no_version(exported, tmp_path, monkeypatch):
  """The float file passes its check (the one converted above stands in for a second
  conversion); the int8 file fails a tolerance it cannot meet: the error names its relative
  error and the tolerance (run/export.py prints it as its one line), and no version is placed."""
  model, float_path, _ = exported
  monkeypatch.setitem(onnx_litert.WRITERS, "onnx",
                      lambda model, path, length, sep_id: shutil.copy(float_path, path))
  monkeypatch.setattr(onnx_quantization, "TOLERANCE", 1e-9)
  (tmp_path / "serving").mkdir()
  with pytest.raises(onnx_quantization.Int8CheckError, match=r"^int8 ONNX check failed: outputs "
                     r"differ from the float file's by \S+ relative \(> 1e-09\); nothing was "
                     r"written$"):
    onnx_litert.export_file(model, "onnx", str(tmp_path / "serving" / "1"), LENGTH, SEP_ID,
                            quantize="int8")
  assert os.listdir(tmp_path / "serving") == []


def test_int8_is_for_onnx_files_only(tmp_path):
  for export_format, quantize, message in (
      ("litert", "int8", "quantize must be 'none' with export format 'litert' (int8 files are "
       "ONNX's); got 'int8'"),
      ("onnx", "int4", "quantize must be one of ['none', 'int8']; got 'int4'")):
    with pytest.raises(UserInputError, match=f"^{re.escape(message)}$"):
      onnx_litert.export_file(None, export_format, str(tmp_path / "1"), LENGTH, SEP_ID,
                              quantize=quantize)
  assert os.listdir(tmp_path) == []


def test_relative_error_compares_floating_outputs_only():
  expected = {"logits": np.array([[3.0, 4.0]]), "predicted_label": np.array([1])}
  assert onnx_quantization.max_relative_error(
      expected, {"logits": np.array([[3.0, 4.5]]), "predicted_label": np.array([0])}) == (
          pytest.approx(0.1))
  assert np.isnan(onnx_quantization.relative_error(np.ones(3), np.array([1.0, np.nan, 1.0])))
  assert onnx_quantization.relative_error(np.zeros(2), np.zeros(2)) == 0.0
  with pytest.raises(RuntimeError, match=r"outputs \['logits'\] missing"):
    onnx_quantization.max_relative_error(expected, {"predicted_label": np.array([1])})


def test_remote_files_are_quantized_through_local_ones(exported, tmp_path, monkeypatch):
  """A ram:// float file (standing for gs://) quantized into a ram:// directory: ONNX Runtime
  reads a local copy and writes in a local work folder, and the checked file is copied whole,
  alone; it is the export's int8 file (the same nodes, the same outputs), and the temporary
  directory is left empty."""
  model, float_path, int8_path = exported
  (tmp_path / "tmp").mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
  root = f"ram://onnx-int8-{uuid.uuid4().hex}"
  remote_float = files.copy(float_path, f"{root}/float.onnx")
  inputs = onnx_litert.verification_inputs(model, LENGTH)
  remote_int8, error = onnx_quantization.quantize_onnx_int8(
      remote_float, f"{root}/serving/model.onnx", check_inputs=inputs)
  assert remote_int8 == f"{root}/serving/model.onnx" and 0 < error < INT8_TOLERANCE
  assert files.listdir(f"{root}/serving") == ["model.onnx"]
  assert (onnx_quantization.quantized_op_counts(remote_int8)
          == onnx_quantization.quantized_op_counts(int8_path))
  with files.local_copy(remote_int8) as local_int8:
    remote_outputs = onnx_litert.run_onnx(local_int8, inputs)
  for name, value in onnx_litert.run_onnx(int8_path, inputs).items():
    np.testing.assert_array_equal(remote_outputs[name], value, err_msg=name)
  assert os.listdir(tmp_path / "tmp") == []


def test_a_missing_float_file_is_refused(tmp_path):
  with pytest.raises(UserInputError, match="float_path must be an existing ONNX file"):
    onnx_quantization.quantize_onnx_int8(str(tmp_path / "missing.onnx"),
                                         str(tmp_path / "int8.onnx"))
  assert os.listdir(tmp_path) == []
