"""The ONNX files ONNX Runtime's rows run (xlnet_tf.benchmarks.onnx_rows), written by the
onnx_export row: the backbone as the project's ONNX file and that file after
quantize_onnx_int8.
"""

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.serving import write_onnx
from xlnet_tf.serving.onnx_litert import verification_inputs
from xlnet_tf.serving.onnx_quantization import quantize_onnx_int8
from xlnet_tf.utils import files
from xlnet_tf.benchmarks import rows, steps
from xlnet_tf.benchmarks.onnx_rows import onnx_paths

ONNX_SEP_ID = 4  # XLNet's <sep>, which write_onnx asks for (the backbone's outputs do not read it)


def export_onnx_files(spec):
  """Writes the backbone of spec's size (float32, weights from steps.distinct_weights, dropout
  off) as the project's ONNX file of the ids signature (write_onnx, T = seq_len) and that file
  after quantize_onnx_int8 (checked against it on verification_inputs: padding, three
  segments) into spec["onnx_dir"] (onnx_paths' names; each renamed into place when complete).
  Returns spec with the int8 check's relative error (check_error)."""
  vocab = spec.get("vocab", rows.VOCAB)
  model = XLNetModel(XLNetConfig.preset(spec["size"], n_token=vocab, dropout=0.0, dropatt=0.0))
  steps.distinct_weights(model)
  float_path, int8_path = onnx_paths(spec, spec["onnx_dir"])
  partial = float_path + ".partial"
  write_onnx(model, partial, spec["seq_len"], ONNX_SEP_ID)
  files.move(partial, float_path)
  _, error = quantize_onnx_int8(float_path, int8_path,
                                check_inputs=verification_inputs(model, spec["seq_len"]))
  return dict(spec, check_error=error)
