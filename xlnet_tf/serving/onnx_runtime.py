"""ONNX Runtime on an ONNX file, shared by the float export's check (onnx_litert) and the int8
file's (onnx_quantization), which onnx_litert.export_file runs: one module below both, so that
neither imports the other's importer."""

from typing import Dict

import numpy as np

from xlnet_tf.utils.errors import UserInputError


def missing_package(package: str, error: ImportError) -> UserInputError:
  """The error for a package of the `[export]` extra that is not installed."""
  return UserInputError(f"{package} is not installed ({error}); install the export extra: "
                        "pip install 'xlnet_tf[export]'")


def run_onnx(path: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """The ONNX file's outputs on `inputs`, by output name (ONNX Runtime, CPU)."""
  try:
    import onnxruntime
  except ImportError as error:
    raise missing_package("onnxruntime", error) from None
  session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
  names = [output.name for output in session.get_outputs()]
  return dict(zip(names, session.run(names, dict(inputs))))
