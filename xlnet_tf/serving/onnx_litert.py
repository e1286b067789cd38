"""ONNX and LiteRT files of a model's ids signature, for runtimes without TensorFlow.

The file computes what the SavedModel's serve_ids does: input_ids / segment_ids int32 and
input_mask float32 [B, T] ([B, C, T] for multiple choice) -> the model's serving outputs (see
saved_model.py). It holds no tokenizer: the caller packs the text (xlnet_tf.text.pack_texts,
the same ids as the SavedModel's in-graph packing); the SentencePiece model and labels.json are
copied beside the file. The graph is traced with plain ops (`without_xla`): neither format has
XLA's compiled calls.

The files are built and checked in a work folder beside the version directory, then renamed
into place; for a remote directory (gs://...: utils.files) the folder is a local temporary one,
copied there when done, the model file last (version_directories.py).

- ONNX: tf2onnx (the `[export]` extra), opset 17; checked with ONNX Runtime. With
  `quantize="int8"` the checked float file is then quantized (onnx_quantization: int8 weights,
  dynamic uint8 activations), the int8 file checked against it on the same inputs, and the
  version holds the int8 file alone, as model.onnx: a server loads one model.onnx a version.
- LiteRT: TensorFlow's own TFLiteConverter (builtin ops only), converted from a SavedModel of
  the signature: a concrete function converted directly keeps Keras 3's variables as resource
  variables that the interpreter finds uninitialised (NaN outputs, or READ_VARIABLE failing).

Ops that blocked the converters, replaced in layers/masks.py by equivalents: tf.eye(bool)
(MatrixDiagV3 -> ONNX EyeLike on booleans, which ONNX Runtime has no kernel for) and an inner
new axis `x[:, None, :]` (a strided slice with new_axis_mask, not a LiteRT builtin).
"""

import os
import tempfile
from typing import Dict, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.checkpoints.labels import save_labels
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.serving import onnx_quantization
from xlnet_tf.serving.onnx_runtime import missing_package, run_onnx
from xlnet_tf.serving.saved_model import (QUANTIZE_MODES, ids_input_signature,
                                          ids_serving_function, verification_inputs)
from xlnet_tf.serving.version_directories import staged_version
from xlnet_tf.modeling.ops import compile as compile_ops

EXPORT_FORMATS = ("savedmodel", "onnx", "litert")
FILE_NAMES = {"onnx": "model.onnx", "litert": "model.tflite"}
ONNX_OPSET = 17
# Beyond this the file is not the model (float32 rounding differs by ~1e-6 on the tiny model).
TOLERANCE = 1e-3
WEIGHT_INPUT = "xlnet_tf_weight_"  # the weights' inputs while converting (write_onnx)


def write_onnx(model, path: str, max_seq_length: int, sep_id: int) -> str:
  """Writes the ids signature of `model` as an ONNX file at `path` (opset ONNX_OPSET).

  Unchecked: `export_file` writes it and checks it against the Keras model.

  Args:
    model: the XLNetModel or head to export (float; anything with serving_outputs).
    path: the .onnx file to write.
    max_seq_length: T, the static length of the inputs [B, T].
    sep_id: the tokenizer's <sep> id (the question-answering head's serving_features read it).

  Returns:
    `path`.

  Raises:
    UserInputError: when tf2onnx (the `[export]` extra) is not installed.
  """
  try:
    import tf2onnx
  except ImportError as error:
    raise missing_package("tf2onnx", error) from None
  signature = ids_input_signature(model, max_seq_length)
  weights = list({id(variable): variable for variable in model.weights}.values())
  weight_specs = [tf.TensorSpec(variable.shape, variable.dtype, f"{WEIGHT_INPUT}{index}")
                  for index, variable in enumerate(weights)]
  serve = ids_serving_function(model, sep_id)

  def serve_on_weights(*tensors):
    # The weights as inputs, not captured variables: tf2onnx freezes captured variables into
    # the graph and copies the whole graph for each of its optimizers, ~30x the weights in
    # memory (15 GB and 2.5 minutes at base size); inputs keep its graph small.
    values = tensors[len(signature):]
    with keras.StatelessScope(state_mapping=list(zip(weights, values))):
      return serve(*tensors[:len(signature)])

  with compile_ops.without_xla():
    function = tf.function(serve_on_weights, input_signature=signature + weight_specs)
    model_proto, _ = tf2onnx.convert.from_function(function,
                                                   input_signature=signature + weight_specs,
                                                   opset=ONNX_OPSET)
  _weights_as_initializers(model_proto.graph, {spec.name: variable for spec, variable
                                               in zip(weight_specs, weights)})
  # Whole or not at all, on any file system (utils.files).
  return files.write_bytes(path, model_proto.SerializeToString())


def _weights_as_initializers(graph, weights) -> None:
  """Turns the graph inputs named in `weights` (name -> variable) into initializers holding
  the variables' values, so the file's inputs are the signature's alone; a weight no node
  reads (the serving outputs need not read every weight) is left out."""
  from onnx import numpy_helper  # installed with tf2onnx
  read = set(_names_read(graph))
  kept = [graph_input for graph_input in graph.input if graph_input.name not in weights]
  used = [graph_input.name for graph_input in graph.input
          if graph_input.name in weights and graph_input.name in read]
  del graph.input[:]
  graph.input.extend(kept)
  graph.initializer.extend(numpy_helper.from_array(np.asarray(weights[name].numpy()), name)
                           for name in used)


def _names_read(graph):
  """The names every node of `graph` reads, its subgraphs' (control flow) included."""
  for node in graph.node:
    yield from node.input
    for attribute in node.attribute:
      subgraphs = list(attribute.graphs)
      if attribute.HasField("g"):
        subgraphs.append(attribute.g)
      for subgraph in subgraphs:
        yield from _names_read(subgraph)


def write_litert(model, path: str, max_seq_length: int, sep_id: int) -> str:
  """Writes the ids signature of `model` as a LiteRT (.tflite) flatbuffer at `path`.

  The flatbuffer's signature is `serving_default`; converted with TensorFlow's TFLiteConverter
  (builtin ops only) from a SavedModel of the signature. Unchecked: `export_file` writes it
  and checks it against the Keras model.

  Args:
    model: the XLNetModel or head to export (float; anything with serving_outputs).
    path: the .tflite file to write.
    max_seq_length: T, the static length of the inputs [B, T].
    sep_id: the tokenizer's <sep> id (the question-answering head's serving_features read it).

  Returns:
    `path`.
  """
  signature = ids_input_signature(model, max_seq_length)
  with tempfile.TemporaryDirectory() as saved_model:
    archive = keras.export.ExportArchive()
    archive.track(model)
    with compile_ops.without_xla():
      archive.add_endpoint("serving_default", ids_serving_function(model, sep_id),
                           input_signature=signature)
    archive.write_out(saved_model, verbose=False)
    flatbuffer = tf.lite.TFLiteConverter.from_saved_model(saved_model).convert()
  return files.write_bytes(path, flatbuffer)


WRITERS = {"onnx": write_onnx, "litert": write_litert}


def run_litert(path: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """The LiteRT file's outputs on `inputs` (ai_edge_litert's interpreter when installed, else
  TensorFlow's)."""
  try:
    from ai_edge_litert.interpreter import Interpreter
  except ImportError:
    Interpreter = tf.lite.Interpreter  # the same interpreter, bundled with TensorFlow
  runner = Interpreter(model_path=path).get_signature_runner("serving_default")
  return {name: np.asarray(value) for name, value in runner(**inputs).items()}


RUNNERS = {"onnx": run_onnx, "litert": run_litert}


def max_difference(model, export_format: str, path: str, max_seq_length: int, sep_id: int,
                   inputs: Optional[Dict[str, np.ndarray]] = None) -> float:
  """Max |exported file's output - Keras model's output| over every output (indices
  included) on `inputs` (default: `verification_inputs`)."""
  if inputs is None:
    inputs = verification_inputs(model, max_seq_length)
  expected = ids_serving_function(model, sep_id)(*(tf.constant(inputs[name]) for name in
                                                   ("input_ids", "segment_ids", "input_mask")))
  actual = RUNNERS[export_format](path, inputs)
  if sorted(actual) != sorted(expected):
    raise RuntimeError(f"{path}: outputs {sorted(actual)}, expected {sorted(expected)}")
  return float(max(np.max(np.abs(actual[name].astype(np.float64)
                                 - expected[name].numpy().astype(np.float64)))
                   for name in expected))


def export_file(model, export_format: str, directory: str, max_seq_length: int, sep_id: int,
                sp_path: Optional[str] = None, labels: Optional[Sequence[str]] = None,
                overwrite: bool = False, quantize: str = "none"):
  """Writes and checks an ONNX or LiteRT file of `model`, then places it as `directory`.

  Writes `directory/model.onnx` or `directory/model.tflite` (with the SentencePiece model and
  labels.json beside it), checks it against the Keras model (max |difference| of every output
  within TOLERANCE), and only then moves the folder into place as `directory`, as the
  SavedModel export does (version_directories.py: on a remote base the model file is copied
  last).

  `quantize="int8"` (ONNX only): the float file is written and checked as above, then
  onnx_quantization.quantize_onnx_int8 writes the int8 file, checked against the float file on
  the same `verification_inputs` (max relative error of the floating outputs within
  onnx_quantization.TOLERANCE, else Int8CheckError and nothing is placed); the int8 file
  replaces the float one as model.onnx, the version's only model file.

  Args:
    model: the float XLNetModel or head to export (a Keras-quantized one is refused: the ONNX
      file is quantized by `quantize`); not a long-document classifier (max_segments > 1).
    export_format: "onnx" or "litert".
    directory: the version directory to create, local or remote.
    max_seq_length: T, the static length of the inputs [B, T].
    sep_id: the tokenizer's <sep> id.
    sp_path: the SentencePiece model to copy beside the file, if any.
    labels: the class names to write as labels.json beside it, if any.
    overwrite: replace an existing local `directory` (else, or when remote, it is refused).
    quantize: "none" or, for ONNX, "int8".

  Returns:
    (path of the model file, max |difference| from the Keras model); with quantize="int8",
    (path, the float file's max |difference|, the int8 file's max relative error).

  Raises:
    UserInputError: for an unknown format or quantize mode, int8 with LiteRT, a quantized
      model, a long-document classifier, or an existing `directory` without overwrite.
    RuntimeError: when the file's outputs differ from the model's (nothing is placed).
    Int8CheckError: when the int8 file differs from the float one beyond its tolerance.
  """
  if export_format not in WRITERS:
    raise UserInputError(f"export format must be one of {sorted(WRITERS)}; got "
                         f"{export_format!r}")
  require(quantize in QUANTIZE_MODES, "quantize", f"one of {list(QUANTIZE_MODES)}",
          repr(quantize))
  require(quantize == "none" or export_format == "onnx", "quantize", "'none' with "
          f"export format {export_format!r} (int8 files are ONNX's)", repr(quantize))
  if getattr(model, "quantization", None) is not None:
    raise UserInputError(f"{type(model).__name__} '{model.name}' is quantized "
                         f"({model.quantization}): the {export_format} file is written from "
                         "the float model (ONNX: quantize='int8' quantizes the file)")
  segments = getattr(model, "max_segments", 1)
  require(segments == 1, "--format", "savedmodel for a long-document classifier (the ONNX and "
          "LiteRT files read one segment; its head.json says max_segments="
          f"{segments})", export_format)
  directory = files.absolute(directory)
  inputs = verification_inputs(model, max_seq_length)
  with staged_version(directory, overwrite, last=FILE_NAMES[export_format]) as staging:
    path = WRITERS[export_format](model, os.path.join(staging, FILE_NAMES[export_format]),
                                  max_seq_length, sep_id)
    difference = max_difference(model, export_format, path, max_seq_length, sep_id, inputs)
    if not difference <= TOLERANCE:  # NaN included
      raise RuntimeError(f"{export_format} export check failed: outputs differ from the Keras "
                         f"model by {difference} (> {TOLERANCE}); nothing was written")
    if quantize == "int8":
      try:
        int8_path, int8_error = onnx_quantization.quantize_onnx_int8(
            path, os.path.join(staging, onnx_quantization.INT8_FILE_NAME), check_inputs=inputs,
            tolerance=onnx_quantization.TOLERANCE)
      except onnx_quantization.Int8CheckError as error:
        raise onnx_quantization.Int8CheckError(f"{error}; nothing was written") from None
      files.move(int8_path, path)
    if sp_path:
      files.copy(sp_path, os.path.join(staging, os.path.basename(sp_path)))
    if labels is not None:
      save_labels(staging, labels)
  path = os.path.join(directory, FILE_NAMES[export_format])
  return (path, difference) if quantize == "none" else (path, difference, int8_error)
