"""Int8 ONNX files: ONNX Runtime's dynamic quantization of the ids signature's file
(`write_onnx`), checked against the float file before it is moved into place.

What is quantized, and why:
- Weights in int8 (QInt8), symmetric, one scale per output column (`per_channel`); activations
  in uint8 with one scale per tensor, computed at run time (dynamic quantization: no
  calibration data). uint8 activations x int8 weights is the pair x86's VNNI instruction
  (vpdpbusd) multiplies, and what ONNX Runtime's CPU kernels are fastest at. Weights are not
  limited to 7 bits (`reduce_range`): that avoids the int16 saturation of the pre-VNNI AVX2 /
  AVX-512 kernels and costs accuracy (1.5-2x the error on the tiny model).
- Only MatMul nodes whose weight is a 2-D constant: the attention's q, k, v and o projections
  and the feed-forward's two layers, which hold nearly all of a forward's FLOPs. The products of
  two activations (scores, weighted values) stay float, as do the position- and segment-score
  products, whose operands ([1, N, 1, H, R], [1, N, H, 2]) are constants only because the file
  fixes T: ONNX Runtime's int8 MatMul takes per-column scales only for a 2-D weight ("b zero
  point is not valid" otherwise). The embedding stays float (a gather gains no speed from int8).
- The file is prepared first. ONNX Runtime's basic graph optimizations (constant folding, as its
  `quant_pre_process` does) turn the output projection's kernel, which tf2onnx reshapes at run
  time, into a constant; then every Gemm with a constant weight (tf2onnx writes the q / k / v / o
  einsums as Gemm) becomes MatMul (+ Add): dynamic quantization covers MatMul, not Gemm. ONNX
  Runtime fuses each quantized MatMul into one DynamicQuantizeMatMul when it loads the file.

Measured on the tiny model (2 layers, d_model 32, T 16) and onnx_litert.verification_inputs
(3 rows, left padding, three segments), the max relative error (`relative_error`) of the
outputs against the float file, weights drawn N(0, s^2): 2.2e-4 at s = 0.02 (the
initializer's scale), 5.5e-3 at s = 0.1, 3.9e-2 at s = 0.3; with per-tensor weight scales
2e-4 / 7.3e-3 / 5.1e-2, with 7-bit weights 1.5-2x these. The tests check s = 0.1
(tests/serving/test_onnx_quantization.py).

`TOLERANCE` catches a broken file (NaN, wrong scales, a wrong graph), not a loss of task
accuracy: measure that on the task's evaluation set. Integer outputs (predicted labels, top
indices) are not compared, since near-ties may flip under int8.

`onnx_litert.export_file(..., quantize="int8")` (run/export.py --format=onnx --quantize=int8)
runs `quantize_onnx_int8` in its staging folder on the float file it built and checked there,
with the same verification inputs, and places the int8 file as the version's model.onnx.

ONNX Runtime reads and writes local files: `quantize_onnx_int8` reads a remote float file
(gs://..., any tf.io.gfile file system: utils.files) from a local copy, builds the int8 file in
a local work folder (beside a local target, on its file system) and moves the checked file
into place whole: a rename, or one copy to a remote target.
"""

import os
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from xlnet_tf.serving.onnx_runtime import missing_package, run_onnx
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import require
from xlnet_tf.utils.relative_error import relative_error
from xlnet_tf.utils.temporary_folders import temporary_folder

INT8_FILE_NAME = "model.int8.onnx"
# Max relative error of the int8 file's floating outputs against the float file's: a file
# beyond it is broken, not merely int8 (the tiny model's error is 2e-4 to 4e-2, above).
TOLERANCE = 0.1
# quantize_dynamic warns about a file without this mark; `prepare_for_quantization` does what
# quant_pre_process does (skipping its symbolic shape inference, which needs sympy and adds
# nothing for constant 2-D weights) and sets it.
_PRE_PROCESS_MARK = ("onnx.quant.pre_process", "onnxruntime.quant")


def _onnxruntime():
  try:
    import onnx
    import onnxruntime
    from onnxruntime import quantization
  except ImportError as error:
    raise missing_package("onnx / onnxruntime", error) from None
  return onnx, onnxruntime, quantization


class Int8CheckError(RuntimeError):
  """The int8 file's outputs are beyond the tolerance of the float file's (`check_int8`): the
  weights do not survive int8 (or the file is broken); the float file is what to serve."""


def max_relative_error(expected: Dict[str, np.ndarray], actual: Dict[str, np.ndarray]) -> float:
  """The largest `relative_error` over the floating outputs of `expected` (by name); integer
  outputs are skipped."""
  missing = sorted(set(expected) - set(actual))
  if missing:
    raise RuntimeError(f"outputs {missing} missing; got {sorted(actual)}")
  errors = [relative_error(value, actual[name]) for name, value in expected.items()
            if np.asarray(value).dtype.kind == "f"]
  if not errors:
    raise RuntimeError(f"no floating output to compare among {sorted(expected)}")
  return float(max(errors))


def check_int8(float_path: str, int8_path: str, inputs: Dict[str, np.ndarray],
               tolerance: float = TOLERANCE) -> float:
  """The max relative error of the int8 file's floating outputs against the float file's on
  `inputs` (ONNX Runtime, CPU); Int8CheckError beyond `tolerance` (NaN included)."""
  error = max_relative_error(run_onnx(float_path, inputs), run_onnx(int8_path, inputs))
  if not error <= tolerance:
    raise Int8CheckError(f"int8 ONNX check failed: outputs differ from the float file's by "
                         f"{error:.3g} relative (> {tolerance})")
  return error


def _gemms_as_matmuls(graph, numpy_helper, helper) -> None:
  """Rewrites each Gemm of a constant weight B (alpha 1, A not transposed; with bias C, beta
  1) as MatMul(A, B or B^T) (+ Add C), in place; other Gemms stay."""
  initializers = {tensor.name: tensor for tensor in graph.initializer}
  nodes, replaced = [], set()
  for node in graph.node:
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    has_bias = len(node.input) > 2 and bool(node.input[2])
    if (node.op_type != "Gemm" or node.input[1] not in initializers
        or attributes.get("alpha", 1.0) != 1.0 or attributes.get("transA", 0)
        or (has_bias and attributes.get("beta", 1.0) != 1.0)):
      nodes.append(node)
      continue
    weight = node.input[1]
    if attributes.get("transB", 0):
      replaced.add(weight)
      weight += "_transposed"
      if weight not in initializers:
        kernel = np.ascontiguousarray(numpy_helper.to_array(initializers[node.input[1]]).T)
        initializers[weight] = numpy_helper.from_array(kernel, weight)
        graph.initializer.append(initializers[weight])
    product = node.output[0] + "_product" if has_bias else node.output[0]
    nodes.append(helper.make_node("MatMul", [node.input[0], weight], [product],
                                  name=node.name + "_MatMul"))
    if has_bias:
      nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]],
                                    name=node.name + "_bias"))
  del graph.node[:]
  graph.node.extend(nodes)
  used = {name for node in graph.node for name in node.input}
  has_subgraphs = any(a.type in (a.GRAPH, a.GRAPHS) for node in graph.node
                      for a in node.attribute)
  unused = [tensor for tensor in graph.initializer
            if tensor.name in replaced and tensor.name not in used]
  if not has_subgraphs:
    for tensor in unused:
      graph.initializer.remove(tensor)


def _constant_weight_matmuls(graph) -> List[str]:
  """Names of the MatMul nodes whose second input is a 2-D constant."""
  shapes = {tensor.name: tuple(tensor.dims) for tensor in graph.initializer}
  return [node.name for node in graph.node
          if node.op_type == "MatMul" and len(shapes.get(node.input[1], ())) == 2]


def prepare_for_quantization(float_path: str, prepared_path: str) -> List[str]:
  """Writes `float_path` constant-folded (ONNX Runtime's basic optimizations), with its
  constant-weight Gemms as MatMuls, to `prepared_path`; returns the names of the MatMul nodes
  to quantize (2-D constant weights). The prepared file computes what the float file does."""
  onnx, onnxruntime, _ = _onnxruntime()
  from onnx import helper, numpy_helper
  options = onnxruntime.SessionOptions()
  options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
  options.optimized_model_filepath = prepared_path
  options.log_severity_level = 3  # its notes on the initializers folding leaves unused
  onnxruntime.InferenceSession(float_path, options, providers=["CPUExecutionProvider"],
                               disabled_optimizers=["ConstantSharing"])  # as quant_pre_process
  model = onnx.load(prepared_path)
  _gemms_as_matmuls(model.graph, numpy_helper, helper)
  marks = {entry.key: entry for entry in model.metadata_props}
  if _PRE_PROCESS_MARK[0] not in marks:
    model.metadata_props.add(key=_PRE_PROCESS_MARK[0], value=_PRE_PROCESS_MARK[1])
  onnx.save(model, prepared_path)
  return _constant_weight_matmuls(model.graph)


def quantize_onnx_int8(float_path: str, int8_path: str,
                       check_inputs: Optional[Dict[str, np.ndarray]] = None,
                       tolerance: float = TOLERANCE,
                       per_channel: bool = True) -> Tuple[str, Optional[float]]:
  """Writes `float_path` (an ONNX file of `write_onnx`) with int8 weights to `int8_path`, as the
  module docstring describes. With `check_inputs` (input name -> array, e.g.
  onnx_litert.verification_inputs) the new file's outputs are first compared with the float
  file's (`check_int8`): beyond `tolerance` nothing is written (Int8CheckError). The file is
  built in a work folder and moved into place whole, replacing what was there; either path
  may be remote (gs://...: the module docstring).

  Returns (int8_path, the max relative error, or None without check_inputs)."""
  _, _, quantization = _onnxruntime()
  require(files.isfile(float_path), "float_path", "an existing ONNX file", float_path)
  int8_path = files.absolute(int8_path)
  directory, name = os.path.split(int8_path)
  files.makedirs(directory)
  with files.local_copy(float_path) as local_float, \
      temporary_folder(directory, f".{name}.partial-") as staging:
    prepared = os.path.join(staging, "prepared.onnx")
    nodes = prepare_for_quantization(local_float, prepared)
    if not nodes:  # quantize_dynamic reads an empty list as "every node"
      raise RuntimeError(f"{float_path}: no MatMul with a constant 2-D weight to quantize")
    staged = os.path.join(staging, name)
    quantization.quantize_dynamic(
        prepared, staged, op_types_to_quantize=["MatMul"], nodes_to_quantize=nodes,
        per_channel=per_channel, reduce_range=False,
        weight_type=quantization.QuantType.QInt8)
    error = None
    if check_inputs is not None:
      error = check_int8(local_float, staged, check_inputs, tolerance)
    files.move(staged, int8_path)
  return int8_path, error


def quantized_op_counts(path: str, op_types: Iterable[str] = (
    "MatMulInteger", "DynamicQuantizeLinear", "MatMul", "Gemm")) -> Dict[str, int]:
  """How many nodes of each of `op_types` the ONNX file at `path` (local or remote) holds (as
  written, before ONNX Runtime fuses them)."""
  onnx, _, _ = _onnxruntime()
  nodes = onnx.load_model_from_string(files.read_bytes(path)).graph.node
  return {op_type: sum(node.op_type == op_type for node in nodes) for op_type in op_types}
